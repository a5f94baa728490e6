import Testing

@testable import Spindle

/// `IdleWorkers` without threads: scripts of events in, wake decisions and hint words out. Each step checks the
/// unit's invariants too.
@Suite struct IdleWorkersTests {
    private typealias Action = IdleWorkers.WakeAction

    /// A pool-served unit with `started` running threads, the first `parked` of them parked (in that order),
    /// and the parkers of all of them.
    private func pool(started: Int, parked: Int = 0) -> (IdleWorkers, [ThreadParker]) {
        var idle = IdleWorkers(servedByRunLoop: false)
        let parkers = (0..<started).map { _ in ThreadParker() }
        for _ in 0..<started {
            guard case .spawn = idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 64, limit: 64) else {
                Issue.record("expected a spawn")
                return (idle, parkers)
            }
            _ = idle.threadStarted(SpindleThread.current)
        }
        for parker in parkers.prefix(parked) { idle.parking(parker) }
        #expect(idle.check())
        return (idle, parkers)
    }

    @Test func threadsAreStartedUpToTheWidthAndNoMoreThanTheWorkWants() {
        var idle = IdleWorkers(servedByRunLoop: false)
        // Width 4, three operations running or ready: three threads, numbered 0, 1, 2; then nothing.
        var actions: [Action] = []
        for _ in 0..<5 { actions.append(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4)) }
        #expect(actions == [.spawn(0), .spawn(1), .spawn(2), .none, .none])
        #expect(idle.threadCount == 3 && idle.starting == 3 && idle.check())
        // More work than the width: never past it.
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 10, limit: 4) == .spawn(3))
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 10, limit: 4) == .none)
        // One fails to start: its place is free again, but no event starts a thread until the retry runs; the
        // retry reuses its number.
        #expect(idle.threadFailedToStart() == 1_000_000)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 10, limit: 4) == .none)
        idle.retryStarted()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 10, limit: 4) == .spawn(3))
        #expect(idle.check())
    }

    @Test func aFailedStartHandsWorkToParkedWorkersAndHoldsBackSpawnsUntilTheRetry() {
        var (idle, w) = self.pool(started: 1, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4) == .signal(w[0]))
        // A batch of two (one event's operation would wait for the woken worker to decide: the hand-off rule).
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4, inFlightBelow: 2)
            == .spawn(1))
        _ = idle.threadFailedToStart()
        // Adders are told no thread may be added (they leave the work in the inbox for the retry) ...
        #expect(idle.hintWord(limit: 4) & IdleHints.canSpawnBit == 0)
        // ... and a parked worker still takes work at once.
        let back1 = idle.unparked(w[0])
        #expect(back1)
        idle.parking(w[0])
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4) == .signal(w[0]))
        idle.retryStarted()  // the retry runs: events start threads again
        #expect(idle.hintWord(limit: 4) & IdleHints.canSpawnBit != 0)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4, inFlightBelow: 2)
            == .spawn(1))
        #expect(idle.check())
    }

    @Test func whenTheTimerRefusesTheRetryTheFailingThreadRunsItUnlessItIsAWorkerOrTheCapIsReached() {
        // No worker in its loop, backoffs 1 ms … 512 ms: the failing thread runs the retry; retryPending stays set.
        var fresh = IdleWorkers(servedByRunLoop: false)
        for failures in 1...10 {
            #expect(fresh.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 1, limit: 2) == .spawn(0))
            let delay = fresh.threadFailedToStart()
            #expect(delay == IdleWorkers.retryDelay(afterFailures: failures))
            let inPlace = fresh.timerRefusedRetry(delay: delay, shuttingDown: false, callerIsWorker: false)
            #expect(inPlace)
            let word = fresh.hintWord(limit: 2)
            #expect(fresh.retryPending && word & IdleHints.canSpawnBit == 0)
            fresh.retryStarted()  // the in-place retry runs its event
        }
        // The eleventh failure in a row reaches the 1 s cap: nobody runs it, the next event starts a thread.
        #expect(fresh.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 1, limit: 2) == .spawn(0))
        let capped = fresh.threadFailedToStart()
        #expect(capped == IdleWorkers.maximumRetryDelay)
        let cappedInPlace = fresh.timerRefusedRetry(delay: capped, shuttingDown: false, callerIsWorker: false)
        #expect(!cappedInPlace)
        let cappedWord = fresh.hintWord(limit: 2)
        #expect(!fresh.retryPending && cappedWord & IdleHints.canSpawnBit != 0)

        // A worker in its loop, and the caller is a worker (it may hold an operation it has not run yet): not in
        // place; the retry is dropped and the next event starts a thread.
        var (busy, _) = self.pool(started: 1)
        #expect(busy.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 2) == .spawn(1))
        let delay = busy.threadFailedToStart()
        let busyInPlace = busy.timerRefusedRetry(delay: delay, shuttingDown: false, callerIsWorker: true)
        #expect(!busyInPlace)
        #expect(!busy.retryPending)
        #expect(busy.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 2) == .spawn(1))
        // The same with an adding thread as the caller: in place (every worker may be busy for ever).
        let adderDelay = busy.threadFailedToStart()
        let adderInPlace = busy.timerRefusedRetry(delay: adderDelay, shuttingDown: false, callerIsWorker: false)
        #expect(adderInPlace)
        #expect(busy.retryPending)
        busy.retryStarted()

        // A stopping queue: never in place.
        var stopping = IdleWorkers(servedByRunLoop: false)
        #expect(stopping.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 1, limit: 1) == .spawn(0))
        let stoppingDelay = stopping.threadFailedToStart()
        let stoppingInPlace = stopping.timerRefusedRetry(delay: stoppingDelay, shuttingDown: true, callerIsWorker: false)
        #expect(!stoppingInPlace)
        let checks = (fresh.check(), busy.check(), stopping.check())
        #expect(checks == (true, true, true))
    }

    @Test func theRetryBackoffDoublesFromOneMillisecondToOneSecondAndResetsOnSuccess() {
        #expect((1...12).map { IdleWorkers.retryDelay(afterFailures: $0) / 1_000_000 }
            == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000])
        var idle = IdleWorkers(servedByRunLoop: false)
        for expected: UInt64 in [1, 2, 4] {
            #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 1, limit: 1) == .spawn(0))
            #expect(idle.threadFailedToStart() == expected * 1_000_000)
            idle.retryStarted()
        }
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 1, limit: 1) == .spawn(0))
        #expect(idle.threadStarted(SpindleThread.current) == 3)  // three failures in a row ended
        #expect(idle.spawnFailures == 0 && !idle.retryPending && idle.check())
    }

    @Test func aBatchOfThreeWakesBothParkedInTheOrderTheyParkedThenStartsAThread() {
        var (idle, w) = self.pool(started: 2)
        idle.parking(w[1])
        idle.parking(w[0])
        var actions: [Action] = []
        for _ in 0..<3 {
            actions.append(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4, inFlightBelow: 3))
        }
        #expect(actions == [.signal(w[1]), .signal(w[0]), .spawn(2)])
        #expect(idle.wakeupsInFlight == 2 && idle.idleCount == 0 && idle.check())
        // Both woken workers come back: each was signalled.
        let back0a = idle.unparked(w[0]), back0b = idle.unparked(w[1])
        #expect(back0a && back0b)
        #expect(idle.parked == 0 && idle.wakeupsInFlight == 0 && idle.check())
    }

    @Test func aWakePrefersTheFirstOfTheFirstFourInLineThatParkedOnTheWakersCPU() {
        // Six parked, in order, on CPUs 0, 1, 1, 2, 3, 3.
        var (idle, w) = self.pool(started: 6)
        for (parker, cpu) in zip(w, [0, 1, 1, 2, 3, 3] as [Int32]) {
            parker.lastCPU = cpu
            idle.parking(parker)
        }
        func wake(from cpu: Int32) -> Action {
            idle.wakeOrSpawn(
                canDispatch: true, shuttingDown: false, wanted: 9, limit: 6, inFlightBelow: 9, wakerCPU: cpu)
        }
        #expect(wake(from: 1) == .signal(w[1]))  // the first on CPU 1, ahead of the line's head
        #expect(wake(from: 1) == .signal(w[2]))  // the next on CPU 1
        // Line now: w0 (0), w3 (2), w4 (3), w5 (3). CPU 3's first one is the third in line: within reach.
        #expect(wake(from: 3) == .signal(w[4]))
        // No worker parked on CPU 7, or the CPU unknown: the line's head, first parked, first woken.
        #expect(wake(from: 7) == .signal(w[0]))
        #expect(wake(from: -1) == .signal(w[3]))
        #expect(idle.idleCount == 1 && idle.wakeupsInFlight == 5 && idle.check())
        // Beyond the first four in line the preference does not look: the head is taken.
        var (far, v) = self.pool(started: 5)
        for (parker, cpu) in zip(v, [0, 0, 0, 0, 1] as [Int32]) {
            parker.lastCPU = cpu
            far.parking(parker)
        }
        #expect(IdleWorkers.cpuScan == 4)
        #expect(far.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 5, wakerCPU: 1)
            == .signal(v[0]))
        #expect(far.check())
    }

    @Test func onlyTheWorkerOfAQueueOfWidthOneMaySpin() {
        #expect(IdleWorkers.spinningAllowed(width: 1))
        for width in [0, 2, 3, 64, Int.max] { #expect(!IdleWorkers.spinningAllowed(width: width)) }
    }

    @Test func nobodyIsWokenWhileAWorkerSpinsAndOnlyOneMaySpin() {
        var (idle, w) = self.pool(started: 2, parked: 1)
        let first = idle.beginSpin(), second = idle.beginSpin()
        #expect(first && !second)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 5, limit: 4) == .none)
        idle.endSpin()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 5, limit: 4) == .signal(w[0]))
        #expect(idle.check())
    }

    @Test func nothingHappensWithoutDispatchableWorkOrDuringShutdown() {
        var (idle, _) = self.pool(started: 1, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: false, shuttingDown: false, wanted: 5, limit: 4) == .none)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: true, wanted: 5, limit: 4) == .none)
        #expect(idle.wakeupsInFlight == 0 && idle.starting == 0)
    }

    @Test func aSignalledWorkerIsNotSignalledAgain() {
        var (idle, w) = self.pool(started: 1, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 1) == .signal(w[0]))
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 1) == .none)
        let back2 = idle.unparked(w[0])
        #expect(back2)
        #expect(idle.parked == 0 && idle.wakeupsInFlight == 0 && idle.check())
    }

    @Test func aWorkerThatSawWorkBeforeSleepingLeavesTheLineWithoutTakingAnotherWorkersWakeup() {
        var (idle, w) = self.pool(started: 2, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 2) == .signal(w[0]))
        idle.parking(w[1])  // the second worker parks, sees the inbox non-empty and does not sleep
        let back3 = idle.unparked(w[1])
        #expect(!back3)
        #expect(idle.parked == 1 && idle.wakeupsInFlight == 1 && idle.idleCount == 0 && idle.check())
        #expect(idle.hintWord(limit: 2) & IdleHints.parkedBit == 0)  // the parked one is known signalled
        let back4 = idle.unparked(w[0])
        #expect(back4)
        #expect(idle.parked == 0 && idle.wakeupsInFlight == 0 && idle.check())
    }

    @Test func aSpuriousReturnFromTheMiddleOfTheLineKeepsTheOthersInOrder() {
        var (idle, w) = self.pool(started: 3, parked: 3)
        let back101 = idle.unparked(w[1])
        #expect(!back101)  // its park returned without a wake decision
        #expect(idle.parked == 2 && idle.idleCount == 2 && idle.check())
        for expected: Action in [.signal(w[0]), .signal(w[2]), .none] {  // a batch of three
            #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 3, inFlightBelow: 3)
                == expected)
        }
        // The last of the line leaving on its own (a spurious return) relinks the end: a later park joins after it.
        var (other, v) = self.pool(started: 2, parked: 2)
        let back5 = other.unparked(v[1])
        #expect(!back5)
        other.parking(v[1])
        #expect(other.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 2, inFlightBelow: 2)
            == .signal(v[0]))
        #expect(other.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 2, inFlightBelow: 2)
            == .signal(v[1]))
        #expect(other.check())
    }

    @Test func shutdownWakesEveryParkedWorkerThroughOnePlan() {
        var (idle, w) = self.pool(started: 3, parked: 3)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 3) == .signal(w[0]))
        let plan = idle.wakeAll()
        #expect(plan.signals == 2 && plan.firstSignal === w[1] && w[1].nextToWake === w[2])
        #expect(idle.idleCount == 0 && idle.wakeupsInFlight == 3 && idle.check())
        plan.unparkAll()  // leaves a notification with each (nobody sleeps here) and clears the chain
        #expect(w[1].nextToWake == nil && w[2].nextToWake == nil)
        #expect(w[1].park() && w[2].park())  // the notifications are there: neither sleeps
    }

    @Test func aRunLoopServedQueueSchedulesOnePerformAtATime() {
        var idle = IdleWorkers(servedByRunLoop: true)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 1) == .performOnRunLoop)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 1) == .none)
        idle.performRan()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 1) == .performOnRunLoop)
        #expect(idle.threadCount == 0 && idle.hintWord(limit: 1) == 0 && idle.check())
    }

    @Test func aPoolServedQueueSendsOneRequestPerOperationThatCouldStart() {
        var idle = IdleWorkers(server: .pool)
        // Width 3, one running, five ready: two more could start, so two requests and no more.
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 6, limit: 3, running: 1) == .serveOnPool)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 6, limit: 3, running: 1) == .serveOnPool)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 6, limit: 3, running: 1) == .none)
        #expect(idle.servesPending == 2)
        idle.serveBegan()  // one request begins and takes an operation: two running, one request still on its way
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 6, limit: 3, running: 2) == .none)
        // One ready operation left: a request for it only once nobody is on the way.
        idle.serveBegan()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 3, running: 2) == .serveOnPool)
        #expect(idle.wakeOrSpawn(canDispatch: false, shuttingDown: false, wanted: 3, limit: 3, running: 3) == .none)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: true, wanted: 9, limit: 9, running: 0) == .none)
        // No threads of its own, and nothing for the adding thread's lock-free path.
        #expect(idle.threadCount == 0 && idle.hintWord(limit: 3) == 0 && idle.check())
        var plan = IdleWorkers.WakePlan()
        plan.add(.serveOnPool)
        plan.add(.serveOnPool)
        #expect(plan.poolServes == 2 && !plan.isEmpty)
    }

    @Test func theHintWordSaysTakerComingUnsignalledParkedAndRoomForAThread() {
        var idle = IdleWorkers(servedByRunLoop: false)
        #expect(idle.hintWord(limit: 2) == IdleHints.canSpawnBit)
        var w: [ThreadParker]
        (idle, w) = self.pool(started: 2, parked: 1)
        #expect(idle.hintWord(limit: 2) == IdleHints.parkedBit)
        #expect(idle.hintWord(limit: 3) == IdleHints.parkedBit | IdleHints.canSpawnBit)
        // Once the parked worker has a signal on its way, adds need not take the lock: a taker is coming.
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 2) == .signal(w[0]))
        #expect(idle.hintWord(limit: 2) == IdleHints.takerComingBit)
        #expect(idle.hintWord(limit: 3) == IdleHints.takerComingBit | IdleHints.canSpawnBit)
        let back = idle.unparked(w[0])
        #expect(back && idle.hintWord(limit: 2) == 0)
        let began = idle.beginSpin()
        #expect(began && idle.hintWord(limit: 2) == IdleHints.takerComingBit)
    }

    @Test func oneEventsOperationWakesNobodyWhileAWokenWorkerIsOnItsWayWhichThenWakesTheNext() {
        var (idle, w) = self.pool(started: 3, parked: 3)
        // A burst's first add wakes the first worker in the line; the next adds wake nobody (and take no lock).
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 3) == .signal(w[0]))
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 3) == .none)
        #expect(idle.hintWord(limit: 3) & IdleHints.takerComingBit != 0 && idle.idleCount == 2)
        // It arrives, takes an operation and decides for what is left: the next worker in the line.
        let back0 = idle.unparked(w[0])
        #expect(back0 && idle.hintWord(limit: 3) == IdleHints.parkedBit)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 3) == .signal(w[1]))
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 3) == .none)
        // Nothing left when that one arrives: the chain ends and the third stays parked.
        let back1 = idle.unparked(w[1])
        #expect(back1)
        #expect(idle.wakeOrSpawn(canDispatch: false, shuttingDown: false, wanted: 2, limit: 3) == .none)
        #expect(idle.idleCount == 1 && idle.wakeupsInFlight == 0 && idle.check())
        // The rule also holds back a start: a thread is started only once nobody is on the way.
        var (fresh, v) = self.pool(started: 1, parked: 1)
        #expect(fresh.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 4, limit: 4) == .signal(v[0]))
        #expect(fresh.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 4, limit: 4) == .none)
        let backV = fresh.unparked(v[0])
        #expect(backV)
        #expect(fresh.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 4, limit: 4) == .spawn(1))
    }

    @Test func aBatchWakesAsManyAsCanStartCountingThoseAlreadyOnTheirWay() {
        var (idle, w) = self.pool(started: 4, parked: 4)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 4) == .signal(w[0]))
        // Three operations can start now and one woken worker is on its way: two more wakes, then none.
        var actions: [Action] = []
        for _ in 0..<3 {
            actions.append(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 9, limit: 4, inFlightBelow: 3))
        }
        #expect(actions == [.signal(w[1]), .signal(w[2]), .none])
        #expect(idle.wakeupsInFlight == 3 && idle.idleCount == 1 && idle.check())
    }

    @Test func aWakePlanChainsSignalsAndCountsConsecutiveSpawns() {
        var (idle, w) = self.pool(started: 2, parked: 2)
        var plan = IdleWorkers.WakePlan()
        for _ in 0..<5 {
            plan.add(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 8, limit: 5, inFlightBelow: 5))
        }
        #expect(plan.signals == 2 && plan.firstSignal === w[0] && w[0].nextToWake === w[1] && w[1].nextToWake == nil)
        #expect(plan.firstSpawn == 2 && plan.spawns == 3 && !plan.performOnRunLoop)
        plan.unparkAll()
        #expect(w[0].nextToWake == nil)
    }
}
