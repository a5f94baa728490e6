import Testing

@testable import Spindle

/// `ReadyBuckets` without threads or a queue: operations pushed, put back at the front, removed and popped, checked
/// against a plain array of six FIFO lines.
@Suite struct ReadyBucketsTests {
    typealias Link = Unmanaged<SpindleOperation>

    /// Operations that are in no queue: the buckets only use their link fields. `ops` keeps them alive.
    private func makeOperations(_ n: Int) -> (ops: [SpindleOperation], links: [Link]) {
        let ops = (0..<n).map { _ in SpindleOperation() }
        return (ops, ops.map { Unmanaged.passUnretained($0) })
    }

    /// Which of `links` `link` is (nil for nil): `Unmanaged` is not `Equatable`.
    private func which(_ link: Link?, in links: [Link]) -> Int? {
        guard let link else { return nil }
        return links.firstIndex { $0.toOpaque() == link.toOpaque() }
    }

    /// Pops everything, as indices into `links`.
    private func drain(_ buckets: inout ReadyBuckets, _ links: [Link]) -> [Int?] {
        var order: [Int?] = []
        while let next = buckets.popHighest() { order.append(self.which(next, in: links)) }
        return order
    }

    @Test func popTakesTheHighestLevelFirstAndEachLevelInOrder() {
        let (ops, links) = self.makeOperations(7)
        var buckets = ReadyBuckets()
        buckets.push(links[0], level: 2)
        buckets.push(links[1], level: 0)
        buckets.push(links[2], level: 2)
        buckets.push(links[3], level: 4)
        buckets.push(links[4], level: ReadyBuckets.barrierLevel)
        buckets.push(links[5], level: 0)
        buckets.push(links[6], level: 4)
        #expect(buckets.count == 7)
        #expect(self.which(buckets.peekHighest(), in: links) == 4)  // barriers first
        #expect(self.drain(&buckets, links) == [4, 3, 6, 0, 2, 1, 5])
        #expect(buckets.count == 0 && buckets.peekHighest() == nil)
        for op in ops { #expect(op.bucketLevel == ReadyBuckets.noLevel && op.nextLink == nil && op.bucketPrev == nil) }
    }

    @Test func removeUnlinksFromTheHeadTheMiddleAndTheTail() {
        let (ops, links) = self.makeOperations(4)
        var buckets = ReadyBuckets()
        for link in links { buckets.push(link, level: 1) }
        buckets.remove(links[1])  // middle
        buckets.remove(links[0])  // head
        buckets.remove(links[3])  // tail
        #expect(buckets.count == 1 && self.which(buckets.peekHighest(), in: links) == 2)
        buckets.remove(links[2])  // the last one: the level is empty again
        #expect(buckets.count == 0 && buckets.peekHighest() == nil)
        buckets.push(links[3], level: 1)  // removed operations can be pushed again
        #expect(self.which(buckets.popHighest(), in: links) == 3)
        withExtendedLifetime(ops) {}
    }

    @Test func pushFrontPutsReturnedOperationsBackInTheirOldOrder() {
        // A worker returns its unclaimed reservations last-first with pushFront, so they come out in their old
        // order, ahead of what was pushed meanwhile.
        let (ops, links) = self.makeOperations(5)
        var buckets = ReadyBuckets()
        buckets.push(links[0], level: 3)
        buckets.push(links[1], level: 3)
        buckets.pushFront(links[4], level: 3)
        buckets.pushFront(links[3], level: 3)
        buckets.pushFront(links[2], level: 3)
        #expect(self.drain(&buckets, links) == [2, 3, 4, 0, 1])
        withExtendedLifetime(ops) {}
    }

    @Test func seededScriptsMatchAPlainModel() {
        // 64 operations, each in at most one line at a time; every step is checked against the model (count,
        // peek, and on pop the exact operation), and the model is drained in full at the end of each script.
        let (ops, links) = self.makeOperations(64)
        for seed in 1...20 as ClosedRange<UInt64> {
            var rng = SplitMix64(seed: seed)
            var buckets = ReadyBuckets()
            var model = [[Int]](repeating: [], count: 6)
            var level = [Int?](repeating: nil, count: 64)
            func modelPeek() -> Int? { model.lastIndex(where: { !$0.isEmpty }).map { model[$0][0] } }
            for _ in 0..<5_000 {
                let i = rng.below(64)
                switch rng.below(4) {
                case 0 where level[i] == nil:
                    let l = rng.below(6)
                    buckets.push(links[i], level: l)
                    model[l].append(i)
                    level[i] = l
                case 1 where level[i] == nil:
                    let l = rng.below(6)
                    buckets.pushFront(links[i], level: l)
                    model[l].insert(i, at: 0)
                    level[i] = l
                case 2 where level[i] != nil:
                    buckets.remove(links[i])
                    model[level[i]!].removeAll { $0 == i }
                    level[i] = nil
                case 3:
                    let expected = modelPeek()
                    let popped = buckets.popHighest()
                    #expect(self.which(popped, in: links) == expected, "seed \(seed)")
                    if let j = expected {
                        model[level[j]!].removeFirst()
                        level[j] = nil
                    }
                default:
                    break
                }
                #expect(buckets.count == model.reduce(0) { $0 + $1.count }, "seed \(seed)")
                #expect(self.which(buckets.peekHighest(), in: links) == modelPeek(), "seed \(seed)")
            }
            while let j = modelPeek() {
                #expect(self.which(buckets.popHighest(), in: links) == j, "seed \(seed)")
                model[level[j]!].removeFirst()
                level[j] = nil
            }
            #expect(buckets.count == 0 && buckets.popHighest() == nil)
        }
        withExtendedLifetime(ops) {}
    }
}
