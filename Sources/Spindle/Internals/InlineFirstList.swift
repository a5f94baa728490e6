/// A list that keeps its first element inline and the rest in an array: most operations have at most one dependency
/// and one dependent, and then it allocates nothing (not even to iterate: `forEach` is a plain loop, where a
/// `Collection` iterator would allocate a coroutine frame per element in debug builds). Invariant: `head == nil`
/// implies `tail` is empty. Not thread-safe (lives under its owner's lock).
struct InlineFirstList<Element> {
    private(set) var head: Element? = nil
    private(set) var tail: [Element] = []

    init() {}

    var isEmpty: Bool { self.head == nil }
    var count: Int { self.head == nil ? 0 : 1 + self.tail.count }

    /// The elements as an array (allocates when non-empty).
    var array: [Element] { self.head.map { [$0] + self.tail } ?? [] }

    /// Calls `body` on each element, in order.
    func forEach(_ body: (Element) throws -> Void) rethrows {
        guard let head = self.head else { return }
        try body(head)
        var index = 0
        while index < self.tail.count {
            try body(self.tail[index])
            index += 1
        }
    }

    /// Whether any element satisfies `predicate`.
    func contains(where predicate: (Element) throws -> Bool) rethrows -> Bool {
        try self.firstIndex(where: predicate) != nil
    }

    /// The position of the first element that satisfies `predicate` (0 is the inline one).
    func firstIndex(where predicate: (Element) throws -> Bool) rethrows -> Int? {
        guard let head = self.head else { return nil }
        if try predicate(head) { return 0 }
        var index = 0
        while index < self.tail.count {
            if try predicate(self.tail[index]) { return index + 1 }
            index += 1
        }
        return nil
    }

    mutating func append(_ element: Element) {
        if self.head == nil { self.head = element } else { self.tail.append(element) }
    }

    /// Removes the element at `position` (as numbered by `firstIndex`).
    mutating func remove(at position: Int) {
        if position == 0 {
            self.head = self.tail.isEmpty ? nil : self.tail.removeFirst()
        } else {
            self.tail.remove(at: position - 1)
        }
    }

    /// Removes and returns the last element (nil when empty).
    mutating func popLast() -> Element? {
        if !self.tail.isEmpty { return self.tail.removeLast() }
        return self.head.take()
    }

    /// Moves every element to the end of `other`, leaving this list empty (no copies of the first element).
    mutating func moveAll(into other: inout InlineFirstList<Element>) {
        guard let head = self.head.take() else { return }
        other.append(head)
        if !self.tail.isEmpty {
            self.tail.forEach { other.append($0) }
            self.tail = []
        }
    }
}
