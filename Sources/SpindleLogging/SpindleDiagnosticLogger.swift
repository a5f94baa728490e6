#if SpindleLogging  // the trait of the same name (Package.swift)
import Logging
import Spindle

/// Routes Spindle's diagnostics events (`SpindleDiagnosticEvent`, reported through `SpindleDiagnostics`) to a
/// swift-log `Logger`. Spindle itself never writes anything; a service installs one of these at startup:
///
/// ```swift
/// SpindleDiagnosticLogger(logger: Logger(label: "spindle")).install()
/// ```
///
/// Each event is logged once, with its `description` as the message, at its level (`defaultLevel(for:)`, or the
/// `level` function given to `init`), with metadata (`metadata(for:)`):
///
/// | Event | Default level | Metadata besides `spindle.event` |
/// |---|---|---|
/// | `workerSpawnFailed` | warning | `spindle.queue`, `spindle.errno`, `spindle.retry_ns` |
/// | `workerSpawnRecovered` | notice | `spindle.queue`, `spindle.failures` |
/// | `blockHelperSpawnFailed` | warning | `spindle.errno` |
/// | `threadReleasedWithoutJoin` | warning | `spindle.thread` |
/// | `deadlineTimerFailedToStart` | error | `spindle.errno` |
/// | `forkTrackingUnavailable` | error | `spindle.errno` |
/// | `invalidConcurrencyLimitIgnored` | warning | `spindle.queue`, `spindle.value` |
/// | `runLoopExecutorMoved` | warning | `spindle.run_loop`, `spindle.thread_id` |
/// | `runLoopPollFailed` | error | `spindle.errno`, `spindle.watched`, `spindle.polled` |
///
/// Why these levels: nothing is lost in any of these events, so none is critical. The `error`s leave a feature
/// degraded until something else happens (deadlines fire late; a forked child is not told it inherited a queue; a
/// run loop watches only some of its descriptors); the `warning`s are handled at once by Spindle but point at a
/// resource limit (threads) or a bug in the caller (a joinable thread never joined, an invalid width set, a loop's
/// thread gone before its actor); a recovery is worth a `notice`.
///
/// `spindle.event` is the event's case name (`workerSpawnFailed`…), `spindle.errno` the C `errno` as a number.
///
/// The handler runs on the thread where the event happened, outside Spindle's locks (see `SpindleDiagnostics`):
/// the logger's backend must not block for long. Immutable, so any thread may use it.
public struct SpindleDiagnosticLogger: Sendable {
    /// Where events go.
    public let logger: Logger
    private let level: @Sendable (SpindleDiagnosticEvent) -> Logger.Level

    /// Logs events to `logger`, at `level(event)` (default: `defaultLevel(for:)`). The logger's own `logLevel`
    /// still filters them.
    public init(
        logger: Logger,
        level: @escaping @Sendable (SpindleDiagnosticEvent) -> Logger.Level = SpindleDiagnosticLogger.defaultLevel
    ) {
        self.logger = logger
        self.level = level
    }

    /// Makes this the process-wide diagnostics handler (`SpindleDiagnostics.setHandler`), replacing the previous
    /// one, which is returned (to put it back with `SpindleDiagnostics.setHandler(previous)`). Any thread.
    @discardableResult
    public func install() -> (@Sendable (SpindleDiagnosticEvent) -> Void)? {
        SpindleDiagnostics.setHandler(self.handler)
    }

    /// A diagnostics handler that logs each event (what `install()` sets), for a caller that combines it with
    /// other handlers.
    public var handler: @Sendable (SpindleDiagnosticEvent) -> Void {
        { event in self.log(event) }
    }

    /// Logs `event` once at its level, with its metadata. Any thread.
    public func log(_ event: SpindleDiagnosticEvent) {
        self.logger.log(
            level: self.level(event), "\(event.description)", metadata: Self.metadata(for: event),
            source: "Spindle")
    }

    /// The level each event is logged at unless `init` is given another function (see the table above).
    public static func defaultLevel(for event: SpindleDiagnosticEvent) -> Logger.Level {
        switch event {
        case .workerSpawnFailed: .warning
        case .workerSpawnRecovered: .notice
        case .blockHelperSpawnFailed: .warning
        case .threadReleasedWithoutJoin: .warning
        case .deadlineTimerFailedToStart: .error
        case .forkTrackingUnavailable: .error
        case .invalidConcurrencyLimitIgnored: .warning
        case .runLoopExecutorMoved: .warning
        case .runLoopPollFailed: .error
        }
    }

    /// The metadata logged with `event` (see the table above).
    public static func metadata(for event: SpindleDiagnosticEvent) -> Logger.Metadata {
        switch event {
        case .workerSpawnFailed(let queue, let errno, let retryNanoseconds):
            [
                "spindle.event": "workerSpawnFailed", "spindle.queue": "\(queue)", "spindle.errno": "\(errno)",
                "spindle.retry_ns": "\(retryNanoseconds)",
            ]
        case .workerSpawnRecovered(let queue, let failures):
            ["spindle.event": "workerSpawnRecovered", "spindle.queue": "\(queue)", "spindle.failures": "\(failures)"]
        case .blockHelperSpawnFailed(let errno):
            ["spindle.event": "blockHelperSpawnFailed", "spindle.errno": "\(errno)"]
        case .threadReleasedWithoutJoin(let name):
            ["spindle.event": "threadReleasedWithoutJoin", "spindle.thread": "\(name)"]
        case .deadlineTimerFailedToStart(let errno):
            ["spindle.event": "deadlineTimerFailedToStart", "spindle.errno": "\(errno)"]
        case .forkTrackingUnavailable(let errno):
            ["spindle.event": "forkTrackingUnavailable", "spindle.errno": "\(errno)"]
        case .invalidConcurrencyLimitIgnored(let queue, let value):
            ["spindle.event": "invalidConcurrencyLimitIgnored", "spindle.queue": "\(queue)", "spindle.value": "\(value)"]
        case .runLoopExecutorMoved(let runLoop, let threadID):
            ["spindle.event": "runLoopExecutorMoved", "spindle.run_loop": "\(runLoop)", "spindle.thread_id": "\(threadID)"]
        case .runLoopPollFailed(let errno, let watched, let polled):
            [
                "spindle.event": "runLoopPollFailed", "spindle.errno": "\(errno)", "spindle.watched": "\(watched)",
                "spindle.polled": "\(polled)",
            ]
        }
    }
}
#endif
