import Synchronization
import CShim

/// Which process an object was made in, across `fork()`. A forked child has one thread (the one that called
/// `fork`); every other thread of the parent, Spindle's workers and helpers among them, does not exist there, and
/// a lock one of them held at that moment stays held for ever. So Spindle's objects with threads behind them
/// record the generation (`cshim_fork_generation`, incremented in each child by a `pthread_atfork` handler) when
/// they are made, and compare it before they would take a lock or rely on a thread:
/// - a queue made in the parent refuses work in the child (`SpindleError.forkedChild`, see
///   `SpindleOperationQueue+Fork.swift`);
/// - the process-wide deadline timer and block-helper pool are made again, empty, the first time the child asks
///   for them (`current`), so new queues, block operations and deadlines work in the child.
///
/// State: none of its own beyond the C counter (written only by the child handler, before any other thread of
/// the child exists). Tracking starts the first time anything asks for the generation; if `pthread_atfork` fails
/// (ENOMEM) the generation never changes, and a child then behaves as the parent's objects would without their
/// threads (reported once: `SpindleDiagnosticEvent.forkTrackingUnavailable`).
enum ForkGeneration {
    /// The generation now (starts tracking on first use). A failure to start tracking is reported once, after
    /// the one-time initialiser returned (a handler may itself use Spindle, and so ask for the generation).
    static var current: UInt64 {
        if tracking != 0 && !trackingFailureReported.exchange(true, ordering: .relaxed) {
            SpindleDiagnostics.report(.forkTrackingUnavailable(errno: tracking))
        }
        return cshim_fork_generation()
    }

    /// Whether an object made in `generation` came from a parent process.
    @inline(__always)
    static func isInherited(_ generation: UInt64) -> Bool { generation != cshim_fork_generation() }

    /// 0, or the error of `pthread_atfork` (ENOMEM).
    private static let tracking: Int32 = cshim_fork_generation_track()
    private static let trackingFailureReported = Atomic<Bool>(false)
}

/// A process-wide object that owns threads, made again in a forked child (see `ForkGeneration`): `current`
/// returns the instance of this process, making it on first use here. The parent's instance is left alone in the
/// child (its threads are gone; its memory is never reclaimed).
///
/// State: `slot`, an atomic pointer to an immutable box (the instance and the generation it was made in). Lock-free
/// on purpose: a lock held by a parent thread at the fork would stay held in the child. Installed boxes are never
/// released, so a box read from the slot stays valid. Two threads racing to make the first instance of a
/// generation both make one; the compare-and-swap keeps the first, and the other is dropped before anyone saw it.
final class PerProcess<Value: AnyObject & Sendable>: Sendable {
    private final class Box: Sendable {
        let generation: UInt64
        let value: Value
        init(_ generation: UInt64, _ value: Value) { (self.generation, self.value) = (generation, value) }
    }

    private let slot = Atomic<Unmanaged<Box>?>(nil)
    private let make: @Sendable () -> Value
    private let generation: @Sendable () -> UInt64

    /// `generation` reads the fork generation; `ForkGeneration.current` (which starts tracking) unless the
    /// instance is used by what tracking's start may call (`SpindleDiagnostics`).
    init(generation: @escaping @Sendable () -> UInt64 = { ForkGeneration.current },
         _ make: @escaping @Sendable () -> Value) {
        self.generation = generation
        self.make = make
    }

    var current: Value {
        let now = self.generation()
        let seen = self.slot.load(ordering: .acquiring)
        if let seen, seen.takeUnretainedValue().generation == now { return seen.takeUnretainedValue().value }
        let fresh = Unmanaged.passRetained(Box(now, self.make()))
        let (installed, original) = self.slot.compareExchange(expected: seen, desired: fresh, ordering: .acquiringAndReleasing)
        if installed { return fresh.takeUnretainedValue().value }  // the box before it (the parent's) is leaked
        fresh.release()
        return original!.takeUnretainedValue().value
    }
}
