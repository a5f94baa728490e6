import AsyncHTTPClient
import NIOCore
import NIOPosix

/// One answer as the client saw it.
struct Answer: Sendable {
    /// The request's path and query.
    let path: String
    /// The status code.
    let status: Int
    /// The body, whitespace at the end trimmed.
    let body: String
    /// The `Retry-After` header, if any.
    let retryAfter: String?
    /// When the request was sent and when its answer was read, on the continuous clock.
    let sent: ContinuousClock.Instant
    let answered: ContinuousClock.Instant

    var elapsed: Duration { self.answered - self.sent }
}

/// What one request came to: an answer, or no answer at all (the connection was refused or closed).
enum Reply: Sendable {
    case answer(Answer)
    case noAnswer(path: String, error: String)

    var answer: Answer? {
        if case .answer(let answer) = self { return answer }
        return nil
    }
}

/// An async-http-client set up for these tests: up to `connections` connections to the service (so that many
/// requests are really in flight at once), no retried connection attempts (a stopped server answers at once).
struct HTTPProbe: Sendable {
    let client: HTTPClient
    let port: Int

    init(port: Int, connections: Int) {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: connections
        )
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(120))
        self.client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        self.port = port
    }

    /// GET `path` (with its query), waiting up to two minutes for the whole answer.
    func get(_ path: String) async -> Reply {
        let request = HTTPClientRequest(url: "http://127.0.0.1:\(self.port)\(path)")
        let sent = ContinuousClock.now
        do {
            let response = try await self.client.execute(request, timeout: .seconds(120))
            let body = try await response.body.collect(upTo: 1 << 20)
            var text = String(buffer: body)
            while text.last?.isWhitespace == true { text.removeLast() }
            return .answer(
                Answer(
                    path: path,
                    status: Int(response.status.code),
                    body: text,
                    retryAfter: response.headers.first(name: "Retry-After"),
                    sent: sent,
                    answered: .now
                )
            )
        } catch {
            return .noAnswer(path: path, error: "\(error)")
        }
    }

    /// Closes the client's connections.
    func shutdown() async throws {
        try await self.client.shutdown()
    }
}
