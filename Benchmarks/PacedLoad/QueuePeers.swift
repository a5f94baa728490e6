import Dispatch
import Foundation
import Glibc
import NIOPosix
import Spindle

/// The queue peers of a paced run, each set up fresh: one empty item per hand-over, whose first act is its stamp.
public enum QueuePeers {
    /// The width "as many as CPUs" resolves to here; NIOThreadPool is given that many threads.
    public static let processorCount = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))

    /// A `SpindleOperationQueue` at its default width (one per CPU).
    public static func spindle(_ stamps: StartStamps) -> PacedTarget {
        let queue = SpindleOperationQueue()
        return PacedTarget(submit: { i in queue.addOperation { stamps.stamp(i) } })
    }

    /// libdispatch's global queue (default QoS).
    public static func dispatchGlobal(_ stamps: StartStamps) -> PacedTarget {
        let queue = DispatchQueue.global()
        return PacedTarget(submit: { i in queue.async { stamps.stamp(i) } })
    }

    /// `NIOThreadPool` with one thread per CPU, like the suite's other NIOThreadPool rows.
    public static func nioPool(_ stamps: StartStamps) -> PacedTarget {
        let pool = NIOThreadPool(numberOfThreads: QueuePeers.processorCount)
        pool.start()
        return PacedTarget(submit: { i in pool.submit { _ in stamps.stamp(i) } },
                           tearDown: { try! pool.syncShutdownGracefully() })
    }

    /// Foundation's `OperationQueue` at its default width.
    public static func foundation(_ stamps: StartStamps) -> PacedTarget {
        let queue = OperationQueue()
        return PacedTarget(submit: { i in queue.addOperation { stamps.stamp(i) } })
    }

    /// The floor: the item run inline by the pacing thread (no hand-off); its CPU per item is the pacing thread's
    /// own share of every other row.
    public static func inline(_ stamps: StartStamps) -> PacedTarget { PacedTarget(submit: { i in stamps.stamp(i) }) }
}
