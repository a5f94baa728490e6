/// `IdleWorkers.WakePlan`: the wakes and thread starts one decision leaves to do after unlocking (see `IdleWorkers`).
/// A value built under `QueueCore.lock` and carried out by the deciding thread after unlocking; the parkers it names
/// are chained through `ThreadParker.nextToWake`, which nobody else touches between the pop and the unpark.
extension IdleWorkers {
    /// What to do after unlocking so that several more operations run (a batch add, a width or suspension
    /// change, shutdown). Deciding allocates nothing: the parkers to unpark are chained through their
    /// `nextToWake`.
    struct WakePlan {
        private(set) var signals = 0
        private(set) var firstSignal: ThreadParker? = nil
        private unowned(unsafe) var lastSignal: ThreadParker? = nil  // owned through the chain from `firstSignal`
        var firstSpawn = 0
        var spawns = 0
        var performOnRunLoop = false
        /// Requests to send to the serving thread pool.
        var poolServes = 0
        /// The pool thread sending them goes back to the pool right after (it counts as one taker coming).
        var callerReturns = false

        @inline(__always)
        mutating func add(_ action: WakeAction) {
            switch action {
            case .none: return
            case .signal(let parker):
                if let last = self.lastSignal { last.nextToWake = parker } else { self.firstSignal = parker }
                self.lastSignal = parker
                self.signals += 1
            case .spawn(let index):
                if self.spawns == 0 { self.firstSpawn = index }
                self.spawns += 1
            case .performOnRunLoop: self.performOnRunLoop = true
            case .serveOnPool: self.poolServes += 1
            }
        }

        /// The places to start, taken out (the caller starts them itself): their indices.
        mutating func takeSpawns() -> Range<Int> {
            defer { self.spawns = 0 }
            return self.firstSpawn..<(self.firstSpawn + self.spawns)
        }

        /// Appends another plan's signals (a plan of wakes only: `wakeAll`'s), keeping this one's order.
        mutating func add(_ other: WakePlan) {
            precondition(other.spawns == 0 && !other.performOnRunLoop && other.poolServes == 0,
                         "IdleWorkers: merging a plan that is not wakes")
            guard let first = other.firstSignal else { return }
            if let last = self.lastSignal { last.nextToWake = first } else { self.firstSignal = first }
            self.lastSignal = other.lastSignal
            self.signals += other.signals
        }

        /// Nothing to do.
        @inline(__always)
        var isEmpty: Bool { self.signals == 0 && self.spawns == 0 && !self.performOnRunLoop && self.poolServes == 0 }

        /// Unparks the chained parkers (after unlocking), clearing the chain as it goes.
        func unparkAll() {
            var next = self.firstSignal
            while let parker = next {
                next = parker.nextToWake
                parker.nextToWake = nil
                parker.unpark()
            }
        }
    }
}
