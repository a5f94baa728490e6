import Glibc

/// Everything the service is started with: the command line's flags, or a test's choices.
public struct ServiceConfiguration: Sendable {
    /// The address to listen on.
    public var host = "127.0.0.1"
    /// The port to listen on (0: any free port; the one chosen is reported when the server runs).
    public var port = 8080
    /// Requests whose work runs at once: the Spindle queue's width (its threads).
    public var width = 4
    /// Requests the queue holds at most, running or waiting; one more is refused with 503.
    public var capacity = 64
    /// The longest a request may take, from reaching its handler to its answer; a request's `deadline_ms` may
    /// only shorten it. A missed deadline answers 504 and cancels the work.
    public var deadline: Duration = .seconds(2)
    /// The `Retry-After` value of a 503, in seconds.
    public var retryAfterSeconds = 1
    /// On graceful shutdown, how long the queue may take to drain before its remaining work is cancelled.
    public var drainTimeout: Duration = .seconds(30)
    /// Where the data file for `/hash` is written (nil: in /tmp, named after the process id, removed at exit).
    public var dataFilePath: String? = nil
    /// The data file's size in bytes: the largest `bytes` `/hash` accepts.
    public var dataFileSize = 16 << 20

    /// The defaults: 127.0.0.1:8080, width 4, capacity 64, deadline 2 s.
    public init() {}

    /// The data file's path: `dataFilePath`, or a name in /tmp unique to this process.
    public var resolvedDataFilePath: String {
        self.dataFilePath ?? "/tmp/spindle-http-service-\(getpid()).data"
    }
}
