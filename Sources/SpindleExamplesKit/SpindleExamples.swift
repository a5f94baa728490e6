import Spindle

/// One runnable example: a port of a snippet from the seeds, printing what the book shows.
public struct SpindleExample: Sendable {
    /// The subcommand name (`spindle-examples NAME`).
    public let name: String
    /// Where it comes from: seed file and section.
    public let source: String
    /// One line on what it shows.
    public let summary: String
    /// Runs the example, writing its lines to the sink; returns once everything it started has finished. Any
    /// thread (the book's "main thread" is whichever thread calls it).
    public let run: @Sendable (any ExampleOutput) throws -> Void
}

/// The examples, in the order `spindle-examples` runs them.
public enum SpindleExamples {
    /// Every example, in seed order.
    public static let all: [SpindleExample] = [
        SpindleExample(name: "invocation-start", source: "seed 000 §7.11",
                       summary: "an invocation operation started by hand runs on the calling thread",
                       run: invocationStart),
        SpindleExample(name: "block-count", source: "seed 000 §7.11",
                       summary: "a block operation counting to 999 blocks the thread that starts it",
                       run: blockCount),
        SpindleExample(name: "counting-operation", source: "seed 000 §7.11",
                       summary: "CountingOperation, a subclass overriding main, started by hand",
                       run: countingOperation),
        SpindleExample(name: "invocation-queue", source: "seed 000 §7.12",
                       summary: "two invocation operations on a queue run on its threads",
                       run: invocationQueue),
        SpindleExample(name: "simple-operation", source: "seed 000 §7.12",
                       summary: "SimpleOperation, a concurrent operation, on a queue",
                       run: simpleOperationQueue),
        SpindleExample(name: "vinny-operation", source: "seed 003 §1",
                       summary: "VinnyOperation, non-concurrent: main runs inside start()",
                       run: vinnyOperation),
        SpindleExample(name: "my-operation", source: "seed 003 §2",
                       summary: "MyOperation, concurrent, run with performOperation: on a new thread",
                       run: myOperation),
        SpindleExample(name: "width-2", source: "seed 004",
                       summary: "a queue with maxConcurrentOperationCount = 2 runs two jobs at a time",
                       run: queueWidthTwo),
        SpindleExample(name: "upload-runloop", source: "seed 004",
                       summary: "recipe uploads waiting in main with a run loop and a port; one cancelled",
                       run: uploadRunLoop),
        SpindleExample(name: "upload-semaphore", source: "seed 004",
                       summary: "recipe uploads waiting in main on a semaphore; one cancelled",
                       run: uploadSemaphore),
        SpindleExample(name: "task-with-data", source: "seed 002 §3.3",
                       summary: "an invocation operation from taskWithData: and its typed result",
                       run: taskWithData),
        SpindleExample(name: "block-operation", source: "seed 002 §3.4",
                       summary: "a block operation's blocks run at the same time",
                       run: blockOperation),
        SpindleExample(name: "cancellation", source: "seed 002 §3.5.2, §3.9.3",
                       summary: "checking isCancelled in main; cancelAllOperations",
                       run: cancellation),
        SpindleExample(name: "dependencies", source: "seed 002 §3.6.1",
                       summary: "a dependency across queues; a cycle refused",
                       run: dependencies),
        SpindleExample(name: "priorities", source: "seed 002 §3.6.2, §3.6.3",
                       summary: "queue priorities order ready operations; thread priority",
                       run: priorities),
        SpindleExample(name: "completion-block", source: "seed 002 §3.6.4",
                       summary: "completion blocks run after main, before waitUntilFinished returns",
                       run: completionBlock),
        SpindleExample(name: "add-operations", source: "seed 002 §3.9.1",
                       summary: "addOperation, addOperations(_:waitUntilFinished:), addOperation { }",
                       run: addOperations),
        SpindleExample(name: "waiting", source: "seed 002 §3.9.4",
                       summary: "waitUntilFinished, waitUntilAllOperationsAreFinished, timeouts, self-waits",
                       run: waiting),
        SpindleExample(name: "suspend-resume", source: "seed 002 §3.9.5",
                       summary: "a suspended queue starts nothing new until resumed",
                       run: suspendResume),
        SpindleExample(name: "retry", source: "beyond the seeds (ProcedureKit's RetryProcedure)",
                       summary: "a flaky download retried with a backoff; a hopeless one gives up",
                       run: retry),
        SpindleExample(name: "thread-object", source: "beyond the seeds (NSThread)",
                       summary: "a thread created, configured, started once and cancelled",
                       run: threadObject),
        SpindleExample(name: "observed-values", source: "beyond the seeds (KVO's old and new values)",
                       summary: "observed changes carry their old and new values; .initial",
                       run: observedValues),
        SpindleExample(name: "group-operation", source: "Advanced NSOperations (WWDC 2015)",
                       summary: "a group of downloads, each producing its parse; the group's dependent runs last",
                       run: groupOperation),
        SpindleExample(name: "conditions", source: "Advanced NSOperations (WWDC 2015)",
                       summary: "a condition whose login dependency runs first; alerts one at a time across queues",
                       run: conditions),
        SpindleExample(name: "port-async-operation", source: "porting: a KVO-driven async base class",
                       summary: "downloads whose base class finishes from a callback: start() + beginExecuting()",
                       run: portAsyncOperation),
        SpindleExample(name: "port-sync-base-class", source: "porting: a start()-override base class",
                       summary: "generator steps on a base class keeping its own finish(_ errors:)",
                       run: portSyncBaseClass),
        SpindleExample(name: "port-is-ready", source: "porting: an isReady override",
                       summary: "an operation held by a readiness gate, then checked by a condition",
                       run: portIsReady),
        SpindleExample(name: "port-queue-delegate", source: "porting: an OperationQueue subclass with a delegate",
                       summary: "queue hooks telling a delegate of adds and finishes, and keeping counts",
                       run: portQueueDelegate),
        SpindleExample(name: "port-dispatch", source: "porting: Dispatch beside the queues",
                       summary: "a serial queue's sync/async, DispatchGroup, a reader-writer queue, QoS",
                       run: portDispatch),
    ]

    /// The example called `name`, if any.
    public static func named(_ name: String) -> SpindleExample? {
        self.all.first { $0.name == name }
    }
}
