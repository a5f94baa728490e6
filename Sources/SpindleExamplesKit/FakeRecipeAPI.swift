import Spindle

/// Stands in for seed 004's `someAPI` (NSURLSession behind it): each upload replies on a thread of its own after
/// `latency`, calling the callback with the server's answer. `replyNow()` makes every pending reply come at once
/// (the slow server of the cancel scenario); `join()` waits for every reply thread, so an example prints nothing
/// after it returns.
///
/// Guards: `pending` (the reply threads and their gates) under its `SpindleLockedValue`.
final class FakeRecipeAPI: Sendable {
    private struct Reply {
        let thread: SpindleThread
        let gate: SpindleSemaphore
    }

    let latency: Duration
    private let pending = SpindleLockedValue<[Reply]>([])

    init(latency: Duration) { self.latency = latency }

    /// Starts uploading `what`; `callback` gets "201 Created (what)" on a reply thread after `latency`.
    func upload(_ what: String, callback: @escaping @Sendable (String) -> Void) throws {
        let gate = try SpindleSemaphore(value: 0)
        let latency = self.latency
        let thread = try SpindleThread.spawnJoinable(name: "fake-api") {
            _ = gate.wait(timeout: latency)  // the network: the reply comes after `latency`, or when released
            callback("201 Created (\(what))")
        }
        self.pending.withLockedValue { $0.append(Reply(thread: thread, gate: gate)) }
    }

    /// Lets every pending reply come now.
    func replyNow() {
        for reply in self.pending.value { reply.gate.signal() }
    }

    /// Waits until every reply has been delivered.
    func join() throws {
        let replies = self.pending.withLockedValue { list in
            defer { list = [] }
            return list
        }
        for reply in replies { try reply.thread.join() }
    }
}
