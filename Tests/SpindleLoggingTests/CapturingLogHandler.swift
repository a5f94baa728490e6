#if SpindleLogging  // the trait of the same name (Package.swift)
import Logging
import Spindle

/// What the tests' log handler captured, in order. Shared by every copy of the handler (a `Logger` copies its
/// handler by value).
///
/// State: `stored` is under its own lock; `arrived` is signalled once per entry, after it is stored.
final class CapturedLogs: Sendable {
    /// One log call.
    struct Entry: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
        let source: String
    }

    private let stored = SpindleLockedValue<[Entry]>([])
    /// Signalled once per captured entry, so a test can wait for an entry logged on another thread.
    let arrived = try! SpindleSemaphore(value: 0)  // 0 is a valid value

    /// Everything captured so far.
    var entries: [Entry] { self.stored.value }

    func append(_ entry: Entry) {
        self.stored.withLockedValue { $0.append(entry) }
        self.arrived.signal()
    }
}

/// A `LogHandler` that stores each call in a `CapturedLogs`, with the logger's metadata merged under the call's.
struct CapturingLogHandler: LogHandler {
    let capture: CapturedLogs
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(_ capture: CapturedLogs) { self.capture = capture }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = self.metadata.merging(event.metadata ?? [:]) { _, call in call }
        self.capture.append(
            .init(level: event.level, message: "\(event.message)", metadata: merged, source: event.source))
    }
}
#endif
