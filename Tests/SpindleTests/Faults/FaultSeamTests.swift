import Synchronization
import Glibc
import Testing

@_spi(Faults) @testable import Spindle

/// Every failure path that the fault seam reaches, made to fail on purpose. Each test faults only its own
/// thread's calls (`onlyOnThisThread`), since other suites run in the same process at the same time (except the
/// queue workers' spurious parks, which no thread-scoped schedule reaches and which only make other suites' workers
/// look for work once more), and the suite
/// is serialized because the seam's schedules and the diagnostics handler are process-wide.
@Suite(.serialized) struct FaultSeamTests {
    /// Collects the diagnostics events of one test (the handler is process-wide: filter by what the test made).
    /// Events arrive on whichever thread made them (a worker's recovery is reported by the thread that started
    /// it, possibly after that worker already ran the test's operation), so a test waits for what it expects.
    final class EventLog: @unchecked Sendable {
        private let condition = SpindleCondition()
        private var events: [SpindleDiagnosticEvent] = []  // guarded by `condition`'s mutex

        func append(_ event: SpindleDiagnosticEvent) {
            self.condition.withLock { self.events.append(event) }
            self.condition.broadcast()
        }

        var all: [SpindleDiagnosticEvent] { self.condition.withLock { self.events } }

        /// Whether the spawn events of the queue or pool named `queue` are those of one failed start whose retry
        /// ran in place: the failure (1 ms backoff), the timer's thread failing to start, the recovery.
        func showsOneRetryInPlace(queue: String) -> Bool {
            let events = self.waitFor(3) {
                switch $0 {
                case .workerSpawnFailed, .workerSpawnRecovered, .deadlineTimerFailedToStart: true
                default: false
                }
            }
            return events == [
                .workerSpawnFailed(queue: queue, errno: EAGAIN, retryNanoseconds: 1_000_000),
                .deadlineTimerFailedToStart(errno: EAGAIN),
                .workerSpawnRecovered(queue: queue, failures: 1),
            ]
        }

        /// The events once `count` of them pass `filter`, or (after a generous deadline) those that did.
        func waitFor(_ count: Int, where filter: (SpindleDiagnosticEvent) -> Bool) -> [SpindleDiagnosticEvent] {
            self.condition.withLock {
                _ = self.condition.wait(until: .after(.seconds(10))) { self.events.filter(filter).count < count }
                return self.events.filter(filter)
            }
        }
    }

    /// Runs `body` with the seam reset before and after, and the diagnostics handler collecting into a log.
    private func withFaults(_ body: (EventLog) throws -> Void) rethrows {
        SpindleFaults.reset()
        let log = EventLog()
        let previous = SpindleDiagnostics.setHandler { log.append($0) }
        defer {
            SpindleFaults.reset()
            SpindleDiagnostics.setHandler(previous)
        }
        try body(log)
    }

    // MARK: - Settings that cannot throw

    /// Issue 22: `maxConcurrentOperationCount` is settable as Foundation's. A valid value takes effect; an invalid
    /// one leaves the width and is reported (here, because the diagnostics handler is process-wide).
    @Test func settingAnInvalidWidthLeavesTheWidthAndIsReported() throws {
        try self.withFaults { log in
            let queue = SpindleOperationQueue(name: "width.property")  // no `try`: cannot fail
            #expect(queue.maxConcurrentOperationCount == SpindleOperationQueue.defaultMaxConcurrentOperationCount)
            queue.maxConcurrentOperationCount = 3
            #expect(queue.maxConcurrentOperationCount == 3)
            queue.maxConcurrentOperationCount = -7
            #expect(queue.maxConcurrentOperationCount == 3)
            let reported = log.waitFor(1) { $0 == .invalidConcurrencyLimitIgnored(queue: "width.property", value: -7) }
            #expect(reported.count == 1)
            do throws(SpindleError) {
                try queue.setMaxConcurrentOperationCount(-7)
                Issue.record("setMaxConcurrentOperationCount(-7) did not throw")
            } catch .invalidConcurrencyLimit(let value) {
                #expect(value == -7)
            } catch {
                Issue.record("unexpected error \(error)")
            }
            #expect(queue.maxConcurrentOperationCount == 3)
            // The width set by the property is honoured: at most 1 at once after setting 1.
            queue.maxConcurrentOperationCount = 1
            let running = Atomic<Int>(0)
            let most = Atomic<Int>(0)
            for _ in 0..<20 {
                queue.addOperation {
                    let now = running.add(1, ordering: .sequentiallyConsistent).newValue
                    most.max(now, ordering: .sequentiallyConsistent)
                    running.subtract(1, ordering: .sequentiallyConsistent)
                }
            }
            let drained = try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(10))
            #expect(drained)
            #expect(most.load(ordering: .sequentiallyConsistent) == 1)
        }
    }

    // MARK: - Queue workers

    @Test func aQueuesFirstWorkerThatCannotStartIsRetriedAndTheOperationRuns() throws {
        try self.withFaults { log in
            let queue = try SpindleOperationQueue(name: "faults.first", maxConcurrentOperationCount: 1)
            let ran = OracleSemaphore()
            SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
            queue.addOperation { ran.post() }  // this add's thread start fails; nothing else will happen
            let ranInTime = ran.wait()
            #expect(ranInTime, "the operation never ran: stranded after the failed thread start")
            if !ranInTime { queue.addOperation {} }  // another event starts a thread: do not hang the suite
            #expect(SpindleFaults.injected(.threadCreate) == 1)
            try queue.waitUntilAllOperationsAreFinished()
            // The recovery is reported by the timer thread after the worker started, maybe after it ran: wait.
            let mine = log.waitFor(2) {
                switch $0 {
                case .workerSpawnFailed(let q, _, _), .workerSpawnRecovered(let q, _): q == "faults.first"
                default: false
                }
            }
            #expect(mine == [
                .workerSpawnFailed(queue: "faults.first", errno: EAGAIN, retryNanoseconds: 1_000_000),
                .workerSpawnRecovered(queue: "faults.first", failures: 1),
            ])
        }
    }

    @Test func whenNeitherAWorkerNorTheTimersThreadCanStartTheFailingThreadRetriesItself() async {
        // A process of its own: the process timer's thread must not have started yet (in this process it has).
        // The add's worker start fails, then the timer's (its first entry is the retry): nothing else would ever
        // start a thread for this queue, so the adding thread waits out the backoff and runs the retry itself.
        await #expect(processExitsWith: .success) {
            let log = EventLog()
            SpindleDiagnostics.setHandler { log.append($0) }
            let queue: SpindleOperationQueue
            do { queue = try SpindleOperationQueue(name: "faults.notimer", maxConcurrentOperationCount: 2) } catch {
                exit(2)
            }
            let ran = OracleSemaphore()
            SpindleFaults.inject(.threadCreate, .next(2), onlyOnThisThread: true)
            queue.addOperation { ran.post() }  // returns once the retry started a worker
            guard ran.wait() else { exit(3) }  // stranded: nobody ran the retry (no later add may rescue it)
            queue.addOperation { ran.post() }
            guard ran.wait() else { exit(7) }
            guard SpindleFaults.injected(.threadCreate) == 2 else { exit(4) }
            guard log.showsOneRetryInPlace(queue: "faults.notimer") else { exit(5) }
            do { try queue.waitUntilAllOperationsAreFinished() } catch { exit(6) }
            exit(0)
        }
    }

    @Test func anAddWhoseWorkerAndTimerCannotStartRetriesItselfWhileEveryWorkerWaitsForIt() async {
        // A process of its own, as above. The queue's one worker runs `first`, which waits for `second`; the add of
        // `second` needs a second worker, whose start fails, then the timer's. The busy worker will not come back
        // until `second` has run, and no later event comes: the adding thread runs the retry itself.
        await #expect(processExitsWith: .success) {
            let log = EventLog()
            SpindleDiagnostics.setHandler { log.append($0) }
            let queue: SpindleOperationQueue
            do { queue = try SpindleOperationQueue(name: "faults.busy", maxConcurrentOperationCount: 2) } catch {
                exit(2)
            }
            let firstRunning = OracleSemaphore(), secondRan = OracleSemaphore(), firstDone = OracleSemaphore()
            let served = Atomic<Bool>(false)
            queue.addOperation {
                firstRunning.post()
                served.store(secondRan.wait(seconds: 30), ordering: .relaxed)
                firstDone.post()
            }
            guard firstRunning.wait() else { exit(3) }
            SpindleFaults.inject(.threadCreate, .next(2), onlyOnThisThread: true)
            queue.addOperation { secondRan.post() }  // returns once the retry started a worker
            guard firstDone.wait(seconds: 60) else { exit(4) }
            guard served.load(ordering: .relaxed) else { exit(5) }  // stranded: nobody ran the retry
            guard SpindleFaults.injected(.threadCreate) == 2 else { exit(6) }
            guard log.showsOneRetryInPlace(queue: "faults.busy") else { exit(7) }
            do { try queue.waitUntilAllOperationsAreFinished() } catch { exit(8) }
            exit(0)
        }
    }

    @Test func aPoolWhoseThreadsAllWaitAndWhoseStandInAndTimerCannotStartRetriesOnTheWaitingThread() async {
        // A process of its own, as above. The pool's one thread runs `first`, which adds `second` (no thread is free
        // to take it) and waits for it in a Spindle wait, so the pool starts a stand-in: that start fails, then the
        // timer's. Every thread of the pool is blocked, so no serve ends and no request or wait comes to try
        // again: the waiting thread runs the retry itself before it blocks.
        await #expect(processExitsWith: .success) {
            let log = EventLog()
            SpindleDiagnostics.setHandler { log.append($0) }
            let queue: SpindleOperationQueue, secondRan: SpindleSemaphore
            do {
                let pool = try SpindleThreadPool(name: "faults.pool", threadCount: 1)
                queue = try SpindleOperationQueue(name: "faults.onpool", maxConcurrentOperationCount: 2, pool: pool)
                secondRan = try SpindleSemaphore()
            } catch {
                exit(2)
            }
            let firstDone = OracleSemaphore()
            let served = Atomic<Bool>(false)
            queue.addOperation {
                SpindleFaults.inject(.threadCreate, .next(2), onlyOnThisThread: true)
                queue.addOperation { secondRan.signal() }
                served.store(secondRan.wait(timeout: .seconds(30)), ordering: .relaxed)
                firstDone.post()
            }
            guard firstDone.wait(seconds: 60) else { exit(3) }
            guard served.load(ordering: .relaxed) else { exit(4) }  // stranded: nobody ran the retry
            guard SpindleFaults.injected(.threadCreate) == 2 else { exit(5) }
            guard log.showsOneRetryInPlace(queue: "faults.pool") else { exit(6) }
            do { try queue.waitUntilAllOperationsAreFinished() } catch { exit(7) }
            exit(0)
        }
    }

    @Test func aFreeSlotRunsAReadyOperationWhileTheOtherWorkerNeverFinishesAndItsThreadFailedToStart() throws {
        try self.withFaults { _ in
            let queue = try SpindleOperationQueue(name: "faults.later", maxConcurrentOperationCount: 2)
            let started = OracleSemaphore(), gate = OracleSemaphore(), second = OracleSemaphore()
            queue.addOperation {
                started.post()
                _ = gate.wait(seconds: 60)  // holds its slot until the test lets it go
            }
            #expect(started.wait())
            // The second slot needs a second thread; its start fails. The first worker is busy and will not come
            // back until the second operation has run, so only the retry can run it.
            SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
            queue.addOperation { second.post() }
            let ranWhileBlocked = second.wait()
            gate.post()
            #expect(ranWhileBlocked, "a ready operation waited for an unrelated operation to finish")
            #expect(SpindleFaults.injected(.threadCreate) == 1)
            try queue.waitUntilAllOperationsAreFinished()
        }
    }

    // MARK: - Threads of operations

    @Test func aConcurrentOperationWhoseThreadCannotStartFinishesWithTheError() throws {
        self.withFaults { _ in
            final class Op: SpindleConcurrentOperation, @unchecked Sendable {
                override func main() throws { Issue.record("main ran without a thread") }
            }
            let op = Op()
            let completed = OracleSemaphore()
            op.completionBlock = { completed.post() }
            SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
            expectSpindleError(.system(function: "pthread_create", errno: EAGAIN)) { try op.start() }
            #expect(op.isFinished && !op.isExecuting)
            #expect(completed.wait())
        }
    }

    @Test func aBlockOperationWhoseHelpersCannotStartRunsEveryBlockOnTheThreadsItHas() throws {
        try self.withFaults { _ in
            let counter = SpindleLockedValue(0)
            let op = SpindleBlockOperation { counter.withLockedValue { $0 += 1 } }
            for _ in 0..<15 { try op.addExecutionBlock { counter.withLockedValue { $0 += 1 } } }
            SpindleFaults.inject(.threadCreate, .always, onlyOnThisThread: true)
            try op.start()  // on this thread: any helper it must start fails
            #expect(op.isFinished)
            #expect(counter.withLockedValue { $0 } == 16)
        }
    }

    @Test func aThreadThatCannotBeCreatedThrowsAndReleasesItsBody() throws {
        try self.withFaults { _ in
            let released = OracleSemaphore()
            SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
            do {
                let sentinel = ReleaseSentinel(released)
                expectSpindleError(.system(function: "pthread_create", errno: EAGAIN)) {
                    try SpindleThread.detach(name: "never") { _ = sentinel }
                }
            }
            #expect(released.wait(), "the body of a thread that never started was kept")
            SpindleFaults.inject(.stackSize, .next(1), onlyOnThisThread: true)
            expectSpindleError(.system(function: "pthread_create", errno: EINVAL)) {
                _ = try SpindleThread.spawnJoinable(name: "never", stackSize: 1 << 20) {}
            }
            // The next start works again.
            try SpindleThread.spawnJoinable(name: "after") {}.join()
        }
    }

    @Test func nameAndPriorityFailuresKeepTheStoredValuesAndReportThePriority() throws {
        try self.withFaults { _ in
            try runJoinableThreads(1, name: "fault.name") { _ in
                SpindleFaults.inject(.threadName, .next(1), onlyOnThisThread: true)
                SpindleThread.current.name = "renamed"
                #expect(SpindleThread.current.name == "renamed")  // documented: the stored name still changes
                SpindleFaults.inject(.threadPriority, .next(1), onlyOnThisThread: true)
                #expect(SpindleThread.current.setPriority(0.4) == false)
                #expect(SpindleThread.current.priority == 0.4)
                #expect(SpindleThread.current.setPriority(0.5) == true)
            }
        }
    }

    // MARK: - Run loop and timer

    @Test func aRunLoopWithoutADescriptorThrowsAndWorksOnceOneCanBeOpened() throws {
        try self.withFaults { _ in
            let outcome = SpindleLockedValue<[String]>([])
            try runJoinableThreads(1, name: "fault.loop") { _ in
                SpindleFaults.inject(.eventDescriptor, .next(2), onlyOnThisThread: true)
                let loop = SpindleRunLoop.current  // its eventfd fails to open (EMFILE)
                let performed = SpindleLockedValue(false)
                loop.perform { performed.withLockedValue { $0 = true } }  // queued; the signal has no fd yet
                do {
                    try loop.run(until: .after(.seconds(5)))
                    outcome.withLockedValue { $0.append("ran without a descriptor") }
                } catch {
                    outcome.withLockedValue { $0.append("\(error)") }
                }
                // Descriptors are back: the next run opens one and runs the perform queued before.
                do {
                    _ = try loop.runOnce(before: .after(.seconds(10)))
                    outcome.withLockedValue { $0.append(performed.withLockedValue { $0 } ? "performed" : "lost") }
                } catch {
                    outcome.withLockedValue { $0.append("second run: \(error)") }
                }
            }
            #expect(outcome.withLockedValue { $0 } == [
                SpindleError.system(function: "eventfd", errno: EMFILE).description, "performed",
            ])
        }
    }

    @Test func aTimerThreadThatCannotStartIsReportedAndStartedByTheNextInsert() throws {
        self.withFaults { _ in
            final class Entry: TimerEntry, @unchecked Sendable {
                let fired: OracleSemaphore
                init(_ fired: OracleSemaphore) {
                    self.fired = fired
                    super.init(deadline: SpindleDeadline.now.uptimeNanoseconds)
                }
                override func fire() { self.fired.post() }
            }
            let timer = DeadlineTimer()  // not the shared one, so this test starts its thread
            let fired = OracleSemaphore()
            SpindleFaults.inject(.threadCreate, .next(1), onlyOnThisThread: true)
            #expect(timer.insert(Entry(fired)) == EAGAIN)
            #expect(timer.insert(Entry(fired)) == 0)
            #expect(fired.wait() && fired.wait(), "an entry inserted while the thread could not start was lost")
        }
    }

    // MARK: - Spurious wakeups

    @Test func spuriousWakeupsLoseNoSignalAndEndNoTimedWaitEarly() throws {
        try self.withFaults { _ in
            let semaphore = try SpindleSemaphore(value: 0)
            let condition = SpindleCondition()
            // Half of this thread's condition waits return at once, unsignalled.
            SpindleFaults.inject(.conditionWait, .everyNth(2), onlyOnThisThread: true)
            let start = SpindleDeadline.now
            #expect(!semaphore.wait(until: .after(.milliseconds(30))))
            #expect(SpindleDeadline.now.uptimeNanoseconds - start.uptimeNanoseconds >= 30_000_000)
            let rounds = 200
            try runJoinableThreads(1) { _ in for _ in 0..<rounds { semaphore.signal() } } beforeJoining: {
                for round in 0..<rounds {
                    #expect(semaphore.wait(until: .after(.seconds(10))), "wait \(round) lost its signal")
                }
            }
            #expect(!semaphore.wait(until: .now))  // nothing extra was granted either
            condition.lock()
            #expect(!condition.wait(until: .after(.milliseconds(10))) { true })
            condition.unlock()
            #expect(SpindleFaults.injected(.conditionWait) > 0)
        }
    }

    @Test func queueWorkersWhoseParksReturnSpuriouslyRunEveryOperationOnce() throws {
        try self.withFaults { _ in
            // Process-wide (worker threads carry no scope): every other park of any queue worker returns at once,
            // unnotified. Harmless to other suites' queues, whose workers then just look for work once more.
            SpindleFaults.inject(.park, .everyNth(2))
            let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
            let done = try SpindleSemaphore(value: 0)
            let runs = Atomic<Int>(0)
            for round in 0..<200 {
                // One at a time, so the workers park between rounds; every third round, a pair.
                let count = round % 3 == 0 ? 2 : 1
                for _ in 0..<count {
                    queue.addOperation {
                        runs.add(1, ordering: .relaxed)
                        done.signal()
                    }
                }
                for _ in 0..<count { #expect(done.wait(until: .after(.seconds(10))), "round \(round) stalled") }
            }
            #expect(try queue.waitUntilAllOperationsAreFinished(until: .after(.seconds(10))))
            #expect(runs.load(ordering: .relaxed) == 200 + 67)
            #expect(SpindleFaults.injected(.park) > 0)
        }
    }
}
