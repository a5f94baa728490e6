import Glibc
import Spindle
import Synchronization

// Memory back to baseline: every operation class the harness creates carries a `LiveToken` (a non-copyable
// field whose init and deinit bump one global counter, so it costs no allocation), and every queue the harness
// creates is registered (weakly) with `LiveObjects`. After each scenario, `LiveObjects.settle` waits a few seconds
// for both counts to come back to what they were when the scenario started (zero, unless an earlier scenario
// leaked) and records a `live-objects` violation otherwise: an operation or queue that outlives its scenario is a
// leak (a retain cycle, a lost release in the library, a stuck worker). Each leak is counted once, by the scenario
// that made it.
// RSS (/proc/self/statm) is reported, not checked: malloc need not give memory back to the system.

/// Live-object counters for the stress binary's own objects.
enum LiveObjects {
    /// Operations created by the harness and not yet deinitialised.
    static let operations = Atomic<Int>(0)
    /// Operations created so far (a figure).
    static let operationsCreated = Atomic<Int>(0)
    private static let queues = SpindleLockedValue<[Watchdog.WeakQueue]>([])
    static let queuesCreated = Atomic<Int>(0)

    /// Records a queue made by the harness (its deinit is seen through the weak reference).
    static func track(_ q: SpindleOperationQueue) {
        queuesCreated.add(1, ordering: .relaxed)
        queues.withLockedValue { list in
            if list.count > 64 { list.removeAll { $0.queue == nil } }
            list.append(Watchdog.WeakQueue(q))
        }
    }

    /// Queues made by the harness that are still alive.
    static var liveQueues: [SpindleOperationQueue] {
        queues.withLockedValue { list in
            list.removeAll { $0.queue == nil }
            return list.compactMap { $0.queue }
        }
    }

    /// What is alive now (take it before a scenario starts).
    static var snapshot: (operations: Int, queues: Int) { (operations.load(ordering: .acquiring), liveQueues.count) }

    /// Waits up to `seconds` for the harness operations and queues to come back to `baseline` (taken before the
    /// scenario started); counts what is left over as violations of `live-objects` in `ctx`. Call after the
    /// scenario has returned (its locals gone).
    static func settle(_ ctx: ScenarioContext, baseline: (operations: Int, queues: Int), seconds: Double = 5) {
        let deadline = nowNs() + UInt64(seconds * 1e9)
        var ops = operations.load(ordering: .acquiring) - baseline.operations
        var qs = liveQueues.count - baseline.queues
        while (ops > 0 || qs > 0) && nowNs() < deadline {
            sleepMicros(5_000)
            ops = operations.load(ordering: .acquiring) - baseline.operations
            qs = liveQueues.count - baseline.queues
        }
        if ops > 0 {
            ctx.violation("live-objects", "\(ops) operation(s) created by the scenario still alive \(fmt(seconds)) s "
                + "after it ended", count: ops)
        }
        if qs > 0 {
            let names = liveQueues.prefix(4).map { $0.name }.joined(separator: ", ")
            ctx.violation("live-objects", "\(qs) queue(s) still alive \(fmt(seconds)) s after the scenario ended: "
                + names, count: qs)
        }
    }
}

/// A non-copyable field that counts its owner as a live harness operation from init to deinit.
struct LiveToken: ~Copyable {
    init() {
        LiveObjects.operations.add(1, ordering: .relaxed)
        LiveObjects.operationsCreated.add(1, ordering: .relaxed)
    }
    deinit { LiveObjects.operations.subtract(1, ordering: .releasing) }
}

/// SpindleBlockOperation, counted as a live harness operation.
final class StressBlockOp: SpindleBlockOperation, @unchecked Sendable {
    let live = LiveToken()
    override init() { super.init() }
    override init(_ block: @escaping @Sendable () -> Void) { super.init(block) }
}

// MARK: - RSS

/// Resident set size in bytes (second field of /proc/self/statm × page size), or -1 if unreadable.
func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return -1 }
    defer { close(fd) }
    var buf = [UInt8](repeating: 0, count: 128)
    let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, 127) }
    guard n > 0 else { return -1 }
    let fields = buf[0..<n].split(separator: UInt8(ascii: " "))
    guard fields.count >= 2, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return -1 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func mib(_ bytes: Int) -> String { bytes < 0 ? "?" : fmt(Double(bytes) / 1_048_576, 1) }

/// An atomic counter in a class, so closures and parameters can share it.
final class AtomicCounter: Sendable {
    let n = Atomic<Int>(0)
}
