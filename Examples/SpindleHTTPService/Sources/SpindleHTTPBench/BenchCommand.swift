import ArgumentParser
import AsyncHTTPClient
import Glibc
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SpindleHTTPServiceKit

/// `spindle-http-bench`: the service's `/hash` handler run once on a bounded Spindle queue and once on
/// NIOThreadPool (same thread count, capacity, deadline, work and server), each driven in this process by
/// async-http-client at the same fixed open-loop rates for the same time. Prints one table.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spindle-http-bench",
        abstract: "The example service's handler on Spindle and on NIOThreadPool, at the same offered loads."
    )

    @Option(help: "Offered loads, requests per second, comma-separated: each variant runs at each.")
    var rates = "1000,4000"

    @Option(help: "Seconds measured per variant and rate (after a one-second warm-up at the same rate).")
    var duration = 10

    @Option(help: "Threads running the work, in both variants.")
    var threads = 2

    @Option(help: "Work held at most (running or waiting) before 503, in both variants.")
    var capacity = 64

    @Option(name: .customLong("deadline-ms"), help: "Each request's deadline in milliseconds (504 when missed).")
    var deadlineMilliseconds = 1000

    @Option(help: "Bytes of the data file each request hashes (read with pread).")
    var bytes = 256 << 10

    @Option(help: "Connections the client may open to the server.")
    var connections = 256

    @Option(help: "Variants to run, comma-separated: spindle, nio.")
    var variants = "spindle,nio"

    func run() async throws {
        let rates = self.rates.split(separator: ",").compactMap { Double($0) }
        let variants = self.variants.split(separator: ",").map(String.init)
        guard !rates.isEmpty, rates.allSatisfy({ $0 > 0 }) else { throw ValidationError("bad --rates") }
        guard variants.allSatisfy({ $0 == "spindle" || $0 == "nio" }) else { throw ValidationError("bad --variants") }
        var logger = Logger(label: "spindle-http-bench")
        logger.logLevel = .error
        let dataFile = try DataFile(
            path: "/tmp/spindle-http-bench-\(getpid()).data",
            size: max(self.bytes, 1),
            removeWhenReleased: false
        )
        defer { unlink(dataFile.path) }
        print(
            "spindle-http-bench: GET /hash?bytes=\(self.bytes) (pread + FNV-1a), \(self.threads) threads, capacity "
                + "\(self.capacity), deadline \(self.deadlineMilliseconds) ms, \(self.duration) s per row, "
                + "\(ProcessInfoLite.cpuCount) CPUs"
        )
        var rows: [Row] = []
        for rate in rates {
            for variant in variants {
                let row = try await self.measure(variant: variant, rate: rate, dataFile: dataFile, logger: logger)
                print("  done: \(variant) at \(Int(rate))/s")
                rows.append(row)
            }
        }
        print(Row.table(rows))
    }

    /// Starts the server on `variant`'s executor, warms it up, measures one row, stops it.
    private func measure(variant: String, rate: Double, dataFile: DataFile, logger: Logger) async throws -> Row {
        let tally = RequestTally()
        let deadline = Duration.milliseconds(self.deadlineMilliseconds)
        switch variant {
        case "spindle":
            let executor = try SpindleWorkExecutor(name: "bench-work", width: self.threads, capacity: self.capacity)
            let routes = WorkRoutes(
                executor: executor,
                dataFile: dataFile,
                deadline: deadline,
                retryAfterSeconds: 1,
                tally: tally,
                describeExecutor: { "" }
            )
            let row = try await self.drive(routes, name: "Spindle queue", rate: rate, logger: logger)
            executor.queue.shutdown()
            try await executor.queue.awaitTermination()
            return row
        default:
            let executor = NIOThreadPoolExecutor(
                width: self.threads,
                capacity: self.capacity,
                timers: MultiThreadedEventLoopGroup.singleton
            )
            let routes = WorkRoutes(
                executor: executor,
                dataFile: dataFile,
                deadline: deadline,
                retryAfterSeconds: 1,
                tally: tally,
                describeExecutor: { "" }
            )
            let row = try await self.drive(routes, name: "NIOThreadPool", rate: rate, logger: logger)
            try await executor.pool.shutdownGracefully()
            return row
        }
    }

    /// Serves `routes` on a free port, runs a warm-up and the measured load against it, stops the server.
    private func drive<Executor: BlockingWorkExecutor>(
        _ routes: WorkRoutes<Executor>,
        name: String,
        rate: Double,
        logger: Logger
    ) async throws -> Row {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let application = HTTPFrontEnd.makeApplication(
            routes: routes,
            host: "127.0.0.1",
            port: 0,
            logger: logger,
            onListening: { portSink.yield($0) }
        )
        let group = ServiceGroup(services: [application], logger: logger)
        let server = Task {
            defer { portSink.finish() }
            try await group.run()
        }
        guard let port = await ports.first(where: { _ in true }) else {
            try await server.value
            throw ValidationError("the server did not start")
        }
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: self.connections
        )
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let url = "http://127.0.0.1:\(port)/hash?bytes=\(self.bytes)"
        _ = await OpenLoopLoad(client: client, url: url, rate: rate, duration: .seconds(1)).run()
        let cpuBefore = ProcessInfoLite.cpuTime
        let (samples, elapsed) = await OpenLoopLoad(
            client: client,
            url: url,
            rate: rate,
            duration: .seconds(self.duration)
        ).run()
        let cpu = ProcessInfoLite.cpuTime - cpuBefore
        try await client.shutdown()
        await group.triggerGracefulShutdown()
        try await server.value
        return Row(variant: name, offered: rate, samples: samples, elapsed: elapsed, cpu: cpu)
    }
}

/// The two process figures the benchmark needs, from libc.
enum ProcessInfoLite {
    /// CPU time used by the whole process so far (every thread, user and system): CLOCK_PROCESS_CPUTIME_ID.
    static var cpuTime: Duration {
        var now = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
        return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
    }

    /// CPUs this process may run on.
    static var cpuCount: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
}
