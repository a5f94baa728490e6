#if SpindleServiceLifecycle  // the trait of the same name (Package.swift)
import ServiceLifecycle
import Spindle

/// A `SpindleRunLoopThread` as a `Service` of a swift-service-lifecycle `ServiceGroup`: the thread runs its loop
/// (ports, timers, performs, descriptor sources) until the group's graceful shutdown, which stops it for good and
/// joins it.
///
/// ```swift
/// let io = try SpindleRunLoopThread(name: "io")
/// // … add ports, timers and sources to io.runLoop …
/// let group = ServiceGroup(services: [SpindleRunLoopThreadService(io), httpServer],
///                          gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// What `run()` does: it waits for graceful shutdown, then calls `SpindleRunLoopThread.shutdown() async` (the
/// current callout finishes, what was already queued in the default mode is served, the thread exits and is
/// joined) and returns. If its task is cancelled first, it still stops the loop for good, then throws
/// `CancellationError` without waiting (the thread exits after its current callout; a later
/// `runLoopThread.shutdown()` joins it, or releasing it lets it go).
///
/// A thread stopped by someone else's `shutdown` does not end the service: it returns at the group's graceful
/// shutdown, as usual (the second `shutdown` returns at once).
public struct SpindleRunLoopThreadService: Service, CustomStringConvertible {
    /// The thread this service stops.
    public let runLoopThread: SpindleRunLoopThread

    /// A service that stops `runLoopThread` at graceful shutdown.
    public init(_ runLoopThread: SpindleRunLoopThread) {
        self.runLoopThread = runLoopThread
    }

    /// Waits for graceful shutdown, then stops and joins the thread; see the type's notes.
    /// - Throws: `CancellationError` when the task is cancelled (the loop is stopped for good all the same);
    ///   `SpindleError.joinSelf` when run on the loop's own thread.
    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled before graceful shutdown: the shutdown below still asks the loop to stop for good, then
            // throws CancellationError at once, as the task is cancelled.
        }
        try await self.runLoopThread.shutdown()
    }

    /// The thread's name, as the group's logs show the service.
    public var description: String {
        "SpindleRunLoopThreadService('\(self.runLoopThread.thread.name)')"
    }
}
#endif
