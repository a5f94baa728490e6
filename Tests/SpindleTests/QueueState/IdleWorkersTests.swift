import Testing

@testable import Spindle

/// `IdleWorkers` without threads: scripts of events in, wake decisions and hint words out. Each step checks the
/// unit's invariants too.
@Suite struct IdleWorkersTests {
    private typealias Action = IdleWorkers.WakeAction

    /// A pool-served unit with `started` running threads, `parked` of them parked.
    private func pool(started: Int, parked: Int = 0) -> IdleWorkers {
        var idle = IdleWorkers(servedByRunLoop: false)
        for _ in 0..<started {
            guard case .spawn = idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 64, limit: 64) else {
                Issue.record("expected a spawn")
                return idle
            }
            _ = idle.threadStarted(SpindleThread.current)
        }
        for _ in 0..<parked { idle.parking() }
        #expect(idle.check())
        return idle
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
        var idle = self.pool(started: 1, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4) == .signal)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4) == .spawn(1))
        _ = idle.threadFailedToStart()
        // Adders are told no thread may be added (they leave the work in the inbox for the retry) ...
        #expect(idle.hintWord(limit: 4) & IdleHints.canSpawnBit == 0)
        // ... and a parked worker still takes work at once.
        idle.unparked()
        idle.parking()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4) == .signal)
        idle.retryNotScheduled()  // the timer could not take the retry: events start threads again
        #expect(idle.hintWord(limit: 4) & IdleHints.canSpawnBit != 0)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4) == .spawn(1))
        #expect(idle.check())
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

    @Test func twoParkedAndThreeRunnableSignalTwiceThenStartAThread() {
        var idle = self.pool(started: 2, parked: 2)
        var actions: [Action] = []
        for _ in 0..<3 { actions.append(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 4)) }
        #expect(actions == [.signal, .signal, .spawn(2)])
        #expect(idle.wakeupsInFlight == 2 && idle.check())
        // Both woken workers leave their park: the signals are consumed.
        idle.unparked()
        idle.unparked()
        #expect(idle.parked == 0 && idle.wakeupsInFlight == 0 && idle.check())
    }

    @Test func nobodyIsWokenWhileAWorkerSpinsAndOnlyOneMaySpin() {
        var idle = self.pool(started: 2, parked: 1)
        let first = idle.beginSpin(), second = idle.beginSpin()
        #expect(first && !second)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 5, limit: 4) == .none)
        idle.endSpin()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 5, limit: 4) == .signal)
        #expect(idle.check())
    }

    @Test func nothingHappensWithoutDispatchableWorkOrDuringShutdown() {
        var idle = self.pool(started: 1, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: false, shuttingDown: false, wanted: 5, limit: 4) == .none)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: true, wanted: 5, limit: 4) == .none)
        #expect(idle.wakeupsInFlight == 0 && idle.starting == 0)
    }

    @Test func aSignalledWorkerIsNotSignalledAgain() {
        var idle = self.pool(started: 1, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 1) == .signal)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 1) == .none)
        // A spurious wakeup of another parker may consume the count; never below zero, never above `parked`.
        idle.parking()
        idle.unparked()
        idle.unparked()
        #expect(idle.parked == 0 && idle.wakeupsInFlight == 0 && idle.check())
    }

    @Test func aWorkerThatSawWorkBeforeWaitingLeavesAnotherWorkersSignalCounted() {
        var idle = self.pool(started: 2, parked: 1)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 2, limit: 2) == .signal)
        idle.parking()  // the second worker parks, sees the inbox non-empty and does not wait
        idle.unparked(waited: false)
        #expect(idle.parked == 1 && idle.wakeupsInFlight == 1 && idle.check())
        #expect(idle.hintWord(limit: 2) & IdleHints.parkedBit == 0)  // the parked one is still known signalled
        idle.unparked()
        #expect(idle.parked == 0 && idle.wakeupsInFlight == 0 && idle.check())
    }

    @Test func aRunLoopServedQueueSchedulesOnePerformAtATime() {
        var idle = IdleWorkers(servedByRunLoop: true)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 1) == .performOnRunLoop)
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 1) == .none)
        idle.performRan()
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 1) == .performOnRunLoop)
        #expect(idle.threadCount == 0 && idle.hintWord(limit: 1) == 0 && idle.check())
    }

    @Test func theHintWordSaysSpinningUnsignalledParkedAndRoomForAThread() {
        var idle = IdleWorkers(servedByRunLoop: false)
        #expect(idle.hintWord(limit: 2) == IdleHints.canSpawnBit)
        idle = self.pool(started: 2, parked: 1)
        #expect(idle.hintWord(limit: 2) == IdleHints.parkedBit)
        #expect(idle.hintWord(limit: 3) == IdleHints.parkedBit | IdleHints.canSpawnBit)
        // Once the parked worker has a signal on its way, adds need not take the lock.
        #expect(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 3, limit: 2) == .signal)
        #expect(idle.hintWord(limit: 2) == 0)
        let began = idle.beginSpin()
        #expect(began && idle.hintWord(limit: 2) == IdleHints.spinningBit)
    }

    @Test func aWakePlanCountsSignalsAndConsecutiveSpawnsWithoutAllocating() {
        var idle = self.pool(started: 1, parked: 1)
        var plan = IdleWorkers.WakePlan()
        for _ in 0..<4 { plan.add(idle.wakeOrSpawn(canDispatch: true, shuttingDown: false, wanted: 8, limit: 4)) }
        #expect(plan == IdleWorkers.WakePlan(signals: 1, firstSpawn: 1, spawns: 3, performOnRunLoop: false))
    }
}
