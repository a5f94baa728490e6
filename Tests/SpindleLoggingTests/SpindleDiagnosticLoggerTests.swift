#if SpindleLogging  // the trait of the same name (Package.swift)
import Glibc
import Logging
import Spindle
import SpindleLogging
import Testing

/// `SpindleDiagnosticLogger`: each event logged once at its documented level with its metadata, the logger's level
/// filtering, a custom level function, and (in a process of its own, since the diagnostics handler is process-wide
/// and other suites set it too) a real event from Spindle reaching the installed logger.
@Suite struct SpindleDiagnosticLoggerTests {
    /// A logger that captures into `capture`, at `level`.
    func logger(_ capture: CapturedLogs, level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: "spindle-test") { _ in CapturingLogHandler(capture) }
        logger.logLevel = level
        return logger
    }

    /// Every event (one per case), with the level and metadata the documentation promises.
    static let cases: [(SpindleDiagnosticEvent, Logger.Level, Logger.Metadata)] = [
        (.workerSpawnFailed(queue: "q1", errno: EAGAIN, retryNanoseconds: 2_000_000), .warning,
         ["spindle.event": "workerSpawnFailed", "spindle.queue": "q1", "spindle.errno": "\(EAGAIN)",
          "spindle.retry_ns": "2000000"]),
        (.workerSpawnRecovered(queue: "q2", failures: 3), .notice,
         ["spindle.event": "workerSpawnRecovered", "spindle.queue": "q2", "spindle.failures": "3"]),
        (.blockHelperSpawnFailed(errno: ENOMEM), .warning,
         ["spindle.event": "blockHelperSpawnFailed", "spindle.errno": "\(ENOMEM)"]),
        (.threadReleasedWithoutJoin(name: "worker-7"), .warning,
         ["spindle.event": "threadReleasedWithoutJoin", "spindle.thread": "worker-7"]),
        (.deadlineTimerFailedToStart(errno: EAGAIN), .error,
         ["spindle.event": "deadlineTimerFailedToStart", "spindle.errno": "\(EAGAIN)"]),
        (.forkTrackingUnavailable(errno: ENOMEM), .error,
         ["spindle.event": "forkTrackingUnavailable", "spindle.errno": "\(ENOMEM)"]),
        (.invalidConcurrencyLimitIgnored(queue: "q3", value: -4), .warning,
         ["spindle.event": "invalidConcurrencyLimitIgnored", "spindle.queue": "q3", "spindle.value": "-4"]),
        (.runLoopExecutorMoved(runLoop: "SpindleRunLoop(camera)", threadID: 4242), .warning,
         ["spindle.event": "runLoopExecutorMoved", "spindle.run_loop": "SpindleRunLoop(camera)",
          "spindle.thread_id": "4242"]),
        (.runLoopPollFailed(errno: EINVAL, watched: 40, polled: 15), .error,
         ["spindle.event": "runLoopPollFailed", "spindle.errno": "\(EINVAL)", "spindle.watched": "40",
          "spindle.polled": "15"]),
    ]

    @Test func eachEventIsLoggedOnceAtItsLevelWithItsMetadataAndDescription() {
        for (event, level, metadata) in Self.cases {
            let capture = CapturedLogs()
            SpindleDiagnosticLogger(logger: self.logger(capture)).log(event)
            let entries = capture.entries
            #expect(entries.count == 1, "\(event)")
            #expect(entries.first?.level == level, "\(event)")
            #expect(entries.first?.metadata == metadata, "\(event)")
            #expect(entries.first?.message == event.description)
            #expect(entries.first?.source == "Spindle")
            #expect(SpindleDiagnosticLogger.defaultLevel(for: event) == level)
            #expect(SpindleDiagnosticLogger.metadata(for: event) == metadata)
        }
    }

    @Test func theLoggersLevelFiltersEvents() {
        let capture = CapturedLogs()
        let diagnostics = SpindleDiagnosticLogger(logger: self.logger(capture, level: .error))
        for (event, _, _) in Self.cases { diagnostics.handler(event) }
        #expect(capture.entries.map(\.level) == [.error, .error, .error])
        let events = capture.entries.map { $0.metadata["spindle.event"] }
        #expect(events == ["deadlineTimerFailedToStart", "forkTrackingUnavailable", "runLoopPollFailed"])
    }

    @Test func aLevelFunctionReplacesTheDefaultLevels() {
        let capture = CapturedLogs()
        let diagnostics = SpindleDiagnosticLogger(logger: self.logger(capture)) { event in
            if case .workerSpawnRecovered = event { return .debug }
            return .critical
        }
        diagnostics.log(.workerSpawnRecovered(queue: "q", failures: 1))
        diagnostics.log(.blockHelperSpawnFailed(errno: EAGAIN))
        #expect(capture.entries.map(\.level) == [.debug, .critical])
    }

    @Test func installedItLogsWhatSpindleReports() async {
        // A process of its own: the handler is process-wide. The child makes a real event (a joinable thread
        // released without join) and checks that the installed logger got exactly that event.
        await #expect(processExitsWith: .success) {
            let capture = CapturedLogs()
            var logger = Logger(label: "spindle-test") { _ in CapturingLogHandler(capture) }
            logger.logLevel = .trace
            let previous = SpindleDiagnosticLogger(logger: logger).install()
            guard previous == nil else { exit(2) }  // nothing was installed before in a fresh process
            do {
                let released = try SpindleThread.spawnJoinable(name: "never-joined") {}
                _ = released  // released here, without join()
            } catch {
                exit(3)
            }
            // The release happens on that thread as it exits (it holds itself until then): wait for the entry.
            guard capture.arrived.wait(timeout: .seconds(20)) else { exit(4) }
            let logged = capture.entries.filter { $0.metadata["spindle.thread"] == "never-joined" }
            guard logged.count == 1, let entry = logged.first else { exit(4) }
            guard entry.level == .warning, entry.metadata["spindle.event"] == "threadReleasedWithoutJoin" else {
                exit(5)
            }
            exit(0)
        }
    }
}
#endif
