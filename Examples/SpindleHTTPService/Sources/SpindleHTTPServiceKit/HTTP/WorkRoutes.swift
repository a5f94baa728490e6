import Hummingbird

/// The service's routes, on any `BlockingWorkExecutor`:
///
/// - `GET /hash?bytes=N[&rounds=R][&deadline_ms=D]`: the FNV-1a hash (16 hex digits) of the data file's first N
///   bytes, read from the file R times (default 1) with blocking `pread(2)`;
/// - `GET /primes?limit=N[&deadline_ms=D]`: how many primes are at most N (trial division, CPU-bound);
/// - `GET /stats`: the request counts and the executor's state, one line each;
/// - `GET /health`: `ok`.
///
/// Each work request runs on the executor with a deadline: the configured one, or `deadline_ms` if shorter. The
/// outcome decides the answer: 200 with the value; 503 with `Retry-After` when the executor refused the work
/// (full, or shutting down); 504 when the deadline passed first (the work is told to stop); 500 if the work
/// failed; 400 for bad parameters.
public struct WorkRoutes<Executor: BlockingWorkExecutor>: Sendable {
    /// Where the work runs.
    public let executor: Executor
    /// The file `/hash` reads.
    public let dataFile: DataFile
    /// The longest deadline a request gets (`deadline_ms` may only shorten it).
    public let deadline: Duration
    /// The `Retry-After` value of a 503, in seconds.
    public let retryAfterSeconds: Int
    /// How the requests ended.
    public let tally: RequestTally
    /// What `/stats` prints about the executor (its second line).
    public let describeExecutor: @Sendable () -> String

    /// The largest `rounds` `/hash` accepts.
    public static var maxRounds: Int { 1_000_000 }
    /// The largest `limit` `/primes` accepts.
    public static var maxPrimeLimit: Int { 1_000_000_000 }

    /// Routes running their work on `executor`.
    public init(
        executor: Executor,
        dataFile: DataFile,
        deadline: Duration,
        retryAfterSeconds: Int,
        tally: RequestTally,
        describeExecutor: @escaping @Sendable () -> String
    ) {
        self.executor = executor
        self.dataFile = dataFile
        self.deadline = deadline
        self.retryAfterSeconds = retryAfterSeconds
        self.tally = tally
        self.describeExecutor = describeExecutor
    }

    /// Adds the routes to `router`.
    public func add<Context: RequestContext>(to router: Router<Context>) {
        router.get("hash") { request, _ in try await self.hash(request) }
        router.get("primes") { request, _ in try await self.primes(request) }
        router.get("stats") { _, _ in
            Self.text(.ok, "\(self.tally.counts)\n\(self.describeExecutor())\n")
        }
        router.get("health") { _, _ in Self.text(.ok, "ok\n") }
    }

    // MARK: - Handlers

    private func hash(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        let bytes = try Self.parameter(query, "bytes", in: 0...self.dataFile.size)
        let rounds = try Self.parameter(query, "rounds", in: 1...Self.maxRounds, default: 1)
        let timeout = try self.timeout(query)
        let file = self.dataFile
        let outcome = await self.executor.execute(timeout: timeout) { cancellation in
            try file.hash(bytes: bytes, rounds: rounds, cancellation: cancellation).hexDigits
        }
        return self.answer(outcome)
    }

    private func primes(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        let limit = try Self.parameter(query, "limit", in: 0...Self.maxPrimeLimit)
        let timeout = try self.timeout(query)
        let outcome = await self.executor.execute(timeout: timeout) { cancellation in
            String(try PrimeCounter.countPrimes(upTo: limit, cancellation: cancellation))
        }
        return self.answer(outcome)
    }

    /// The response for `outcome`, counted in `tally`.
    private func answer(_ outcome: WorkOutcome<String>) -> Response {
        self.tally.record(outcome)
        switch outcome {
        case .completed(let value):
            return Self.text(.ok, value + "\n")
        case .failed(let error):
            return Self.text(.internalServerError, "work failed: \(error)\n")
        case .refused(let reason):
            var headers = HTTPFields()
            headers[.retryAfter] = String(self.retryAfterSeconds)
            let why = reason == .full ? "the work queue is full" : "the service is shutting down"
            return Self.text(.serviceUnavailable, why + "\n", headers: headers)
        case .deadlineExpired:
            return Self.text(.gatewayTimeout, "deadline passed\n")
        case .abandoned:
            return Self.text(.init(code: 499, reasonPhrase: "Client Closed Request"), "abandoned\n")
        }
    }

    // MARK: - Parameters

    /// The request's deadline: `deadline_ms` if given and shorter than `deadline`, else `deadline`.
    private func timeout(_ query: Parameters) throws -> Duration {
        guard query["deadline_ms"] != nil else { return self.deadline }
        let milliseconds = try Self.parameter(query, "deadline_ms", in: 0...Int(Int32.max))
        return min(.milliseconds(milliseconds), self.deadline)
    }

    /// The integer parameter `name`, which must lie in `range`; `fallback` when it is absent (required if nil).
    private static func parameter(
        _ query: Parameters,
        _ name: Substring,
        in range: ClosedRange<Int>,
        default fallback: Int? = nil
    ) throws -> Int {
        guard let text = query[name] else {
            if let fallback { return fallback }
            throw HTTPError(.badRequest, message: "missing parameter \(name)")
        }
        guard let value = Int(text), range.contains(value) else {
            throw HTTPError(
                .badRequest,
                message: "\(name) must be an integer in \(range.lowerBound)...\(range.upperBound)"
            )
        }
        return value
    }

    private static func text(_ status: HTTPResponse.Status, _ body: String, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
