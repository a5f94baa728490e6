import Dispatch
import Synchronization

/// The stamps of one run, preallocated and touched before the run: `submitted[i]` is written by the pacing thread
/// right before it hands item `i` over, `started[i]` by the item itself. The first `warmup` items are the warm-up,
/// handed over without pacing and waited for before the paced part, so the peer's threads exist and have run.
public final class StartStamps: @unchecked Sendable {
    public let warmup: Int
    public let total: Int
    let submitted: UnsafeMutablePointer<Int>
    let started: UnsafeMutablePointer<Int>
    private let done = Atomic<Int>(0)
    /// Signalled when the warm-up items have all started, and again when all items have: the same waiter for every
    /// peer.
    private let drained = DispatchSemaphore(value: 0)

    init(warmup: Int = 8, measured: Int) {
        self.warmup = warmup
        self.total = warmup + measured
        self.submitted = .allocate(capacity: self.total)
        self.submitted.initialize(repeating: 0, count: self.total)
        self.started = .allocate(capacity: self.total)
        self.started.initialize(repeating: 0, count: self.total)
    }

    deinit {
        self.submitted.deallocate()
        self.started.deallocate()
    }

    /// An item's first act: its start stamp, then the count that tells the pacing thread when all have started.
    @inline(__always) public func stamp(_ i: Int) {
        self.started[i] = monotonicNanoseconds()
        let n = self.done.add(1, ordering: .acquiringAndReleasing).newValue
        if n == self.warmup || n == self.total { self.drained.signal() }
    }

    func waitDrained() { self.drained.wait() }

    /// For a load in bursts of `burst`: the median submit→start of the item at each of `positions` in its burst, over
    /// all bursts (call after the run has drained). The measured items start at a burst's first position.
    func positionMedians(burst: Int, positions: [Int]) -> [BurstPosition] {
        let bursts = (self.total - self.warmup) / burst
        return positions.filter { $0 < burst }.map { position in
            let sorted = (0..<bursts).map { b -> Int in
                let i = self.warmup + b * burst + position
                return self.started[i] - self.submitted[i]
            }.sorted()
            return BurstPosition(position: position, medianStart: sorted[(sorted.count - 1) / 2])
        }
    }

    /// Nearest-rank percentiles of submit→start over the measured items (call after the run has drained).
    func latencyPercentiles(_ ps: [Double]) -> [Int] {
        let sorted = (self.warmup..<self.total).map { self.started[$0] - self.submitted[$0] }.sorted()
        return ps.map { p in sorted[max(0, min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1))] }
    }
}
