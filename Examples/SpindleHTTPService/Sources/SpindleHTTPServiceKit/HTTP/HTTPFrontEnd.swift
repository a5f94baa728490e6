import Hummingbird
import Logging

/// The HTTP side, the same for every executor: a Hummingbird application serving `WorkRoutes`.
public enum HTTPFrontEnd {
    /// An application listening on `host:port` that serves `routes`; `onListening` gets the port actually bound
    /// (useful with port 0) once the server accepts connections.
    public static func makeApplication<Executor: BlockingWorkExecutor>(
        routes: WorkRoutes<Executor>,
        host: String,
        port: Int,
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void
    ) -> some ApplicationProtocol {
        let router = Router()
        routes.add(to: router)
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "spindle-http-service"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
            logger: logger
        )
    }
}
