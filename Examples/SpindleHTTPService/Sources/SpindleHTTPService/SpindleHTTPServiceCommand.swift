import ArgumentParser
import Glibc
import Logging
import SpindleHTTPServiceKit
import SpindleLogging

/// `spindle-http-service`: the example service. Runs until SIGTERM or SIGINT, then drains and exits.
@main
struct SpindleHTTPServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spindle-http-service",
        abstract: "An HTTP service whose handlers run blocking work on a bounded Spindle queue with deadlines.",
        discussion: """
            GET /hash?bytes=N[&rounds=R][&deadline_ms=D]  FNV-1a of the data file's first N bytes, read R times
            GET /primes?limit=N[&deadline_ms=D]           the number of primes up to N
            GET /stats, GET /health
            A full queue answers 503 with Retry-After; a missed deadline answers 504 and cancels the work.
            SIGTERM or SIGINT: stop accepting, answer what was accepted, drain the queue, exit.
            """
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port).")
    var port = 8080

    @Option(help: "Requests whose work runs at once (the queue's threads).")
    var width = 4

    @Option(help: "Requests the queue holds at most, running or waiting; more are refused with 503.")
    var capacity = 64

    @Option(name: .customLong("deadline-ms"), help: "Each request's deadline in milliseconds (504 when missed).")
    var deadlineMilliseconds = 2000

    @Option(name: .customLong("retry-after"), help: "The Retry-After of a 503, in seconds.")
    var retryAfterSeconds = 1

    @Option(
        name: .customLong("drain-timeout-ms"),
        help: "On shutdown, how long the queue may drain before the rest is cancelled."
    )
    var drainTimeoutMilliseconds = 30_000

    @Option(
        name: .customLong("data-file"),
        help: "Where to write the data file /hash reads (default: in /tmp, removed at exit)."
    )
    var dataFilePath: String?

    @Option(name: .customLong("data-file-bytes"), help: "The data file's size.")
    var dataFileBytes = 16 << 20

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    func validate() throws {
        guard self.width >= 1 else { throw ValidationError("--width must be at least 1") }
        guard self.capacity >= 1 else { throw ValidationError("--capacity must be at least 1") }
        guard self.deadlineMilliseconds >= 1 else { throw ValidationError("--deadline-ms must be at least 1") }
        guard self.dataFileBytes >= 0 else { throw ValidationError("--data-file-bytes must not be negative") }
        guard Logger.Level(rawValue: self.logLevel) != nil else { throw ValidationError("unknown --log-level") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: self.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var configuration = ServiceConfiguration()
        configuration.host = self.host
        configuration.port = self.port
        configuration.width = self.width
        configuration.capacity = self.capacity
        configuration.deadline = .milliseconds(self.deadlineMilliseconds)
        configuration.retryAfterSeconds = self.retryAfterSeconds
        configuration.drainTimeout = .milliseconds(self.drainTimeoutMilliseconds)
        configuration.dataFilePath = self.dataFilePath
        configuration.dataFileSize = self.dataFileBytes
        // What Spindle cannot report through a return value (a worker thread that could not start…) goes to the log.
        SpindleDiagnosticLogger(logger: Logger(label: "spindle")).install()
        let service = try ExampleService(configuration: configuration, logger: Logger(label: "spindle-http-service"))
        let host = self.host
        let group = service.makeServiceGroup(gracefulShutdownSignals: [.sigterm, .sigint]) { port in
            // One line on standard output (unbuffered), for people and for scripts that started it with --port 0.
            let line = "listening on http://\(host):\(port)\n"
            _ = line.withCString { write(STDOUT_FILENO, $0, strlen($0)) }
        }
        try await group.run()
        service.logSummary()
    }
}
