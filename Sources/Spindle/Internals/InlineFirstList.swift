/// A list that keeps its first element inline and the rest in an array: most operations have at most one dependency
/// and one dependent, and then it allocates nothing. Invariant: `head == nil` implies `tail` is empty. Not
/// thread-safe (lives under its owner's lock).
struct InlineFirstList<Element>: RandomAccessCollection {
    private(set) var head: Element? = nil
    private(set) var tail: [Element] = []

    init() {}

    var startIndex: Int { 0 }
    var endIndex: Int { self.head == nil ? 0 : 1 + self.tail.count }
    subscript(position: Int) -> Element { position == 0 ? self.head! : self.tail[position - 1] }

    /// The elements as an array (allocates when non-empty).
    var array: [Element] { self.head.map { [$0] + self.tail } ?? [] }

    mutating func append(_ element: Element) {
        if self.head == nil { self.head = element } else { self.tail.append(element) }
    }

    mutating func remove(at position: Int) {
        if position == 0 {
            self.head = self.tail.isEmpty ? nil : self.tail.removeFirst()
        } else {
            self.tail.remove(at: position - 1)
        }
    }

    /// Keeps the elements for which `keep` returns true, in order.
    mutating func filterInPlace(_ keep: (Element) -> Bool) {
        guard let head = self.head.take() else { return }
        var rest: [Element] = []
        swap(&rest, &self.tail)
        if keep(head) { self.head = head }
        for element in rest where keep(element) { self.append(element) }
    }

    /// Moves every element to the end of `array`, leaving this list empty (no copies of the first element).
    mutating func moveAll(into array: inout [Element]) {
        guard let head = self.head.take() else { return }
        array.append(head)
        if !self.tail.isEmpty {
            array.append(contentsOf: self.tail)
            self.tail = []
        }
    }
}
