import Dispatch
import Glibc
import NIOPosix
import Spindle

/// Back-to-back round trips: hand one empty item over, wait until it has signalled a `DispatchSemaphore` (the same
/// waiter for every peer), repeat. The suite's "submit→run→signal round trip" rows, from the calling thread.
public enum RoundTrips {
    /// What `n` trips cost, per trip, in nanoseconds: wall clock and the process's CPU time.
    public struct Result: Sendable {
        public let wallPerTrip: Int
        public let cpuPerTrip: Int
    }

    /// A peer: set up, then `handOver(signal)` runs `signal` on the peer's thread; `tearDown` after.
    public struct Peer: Sendable {
        public let name: String
        let make: @Sendable () -> (handOver: (@escaping @Sendable () -> Void) -> Void, tearDown: () -> Void)

        /// The same peer under another name: a second, independent run of it in the same round (an A/A control).
        public func renamed(_ name: String) -> Peer { Peer(name: name, make: self.make) }
    }

    public static let peers = [
        Peer(name: "Spindle") {
            let queue = SpindleOperationQueue()
            return ({ signal in queue.addOperation(signal) }, {})
        },
        Peer(name: "DispatchQueue.global") {
            let queue = DispatchQueue.global()
            return ({ signal in queue.async(execute: signal) }, {})
        },
        Peer(name: "NIOThreadPool") {
            let pool = NIOThreadPool(numberOfThreads: QueuePeers.processorCount)
            pool.start()
            return ({ signal in pool.submit { _ in signal() } }, { try! pool.syncShutdownGracefully() })
        },
    ]

    /// `n` trips to `peer` after 1,000 unmeasured ones.
    public static func run(_ peer: Peer, trips n: Int) -> Result {
        let (handOver, tearDown) = peer.make()
        let back = DispatchSemaphore(value: 0)
        let signal: @Sendable () -> Void = { back.signal() }
        for _ in 0..<1_000 {
            handOver(signal)
            back.wait()
        }
        let wall0 = monotonicNanoseconds()
        let cpu0 = clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
        for _ in 0..<n {
            handOver(signal)
            back.wait()
        }
        let cpu1 = clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
        let wall1 = monotonicNanoseconds()
        tearDown()
        return Result(wallPerTrip: (wall1 - wall0) / n, cpuPerTrip: (cpu1 - cpu0) / n)
    }
}
