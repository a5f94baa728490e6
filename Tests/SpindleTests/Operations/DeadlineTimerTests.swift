import Testing

@testable import Spindle

/// The process timer's wake rule: its thread is signalled only for an entry due before its current wait ends.
/// Each test uses a timer of its own (not the shared one), so the counts are this test's alone.
@Suite struct DeadlineTimerTests {
    /// An entry that posts a semaphore when it fires.
    final class Entry: TimerEntry, @unchecked Sendable {
        let fired: OracleSemaphore?

        init(at deadline: UInt64, fired: OracleSemaphore? = nil) {
            self.fired = fired
            super.init(deadline: deadline)
        }

        override func fire() { self.fired?.post() }
    }

    private static let second: UInt64 = 1_000_000_000

    @Test func entriesDueAfterTheArmedWaitSendNoSignalOneDueBeforeDoesAndFires() {
        let timer = DeadlineTimer()
        let now = SpindleDeadline.now.uptimeNanoseconds
        let first = Entry(at: now + 60 * Self.second)
        #expect(timer.insert(first) == 0)  // starts the thread, which arms its wait at this entry
        #expect(waitUntil(deadline: 10) { timer.armedDeadline == first.deadline }, "the timer thread never armed")
        // One operation at a time, each with a timeout: its entry is removed before the next one is inserted, so
        // each new entry is the earliest. None is due before the armed wait ends: no signal (the old rule sent one
        // per entry).
        timer.remove(first)
        for round in 0..<100 {
            let entry = Entry(at: now + 61 * Self.second + UInt64(round))
            #expect(timer.insert(entry) == 0)
            timer.remove(entry)
        }
        #expect(timer.signalsSent == 0)
        #expect(timer.armedDeadline == first.deadline)  // still asleep, armed where it was
        // Due now, before the armed wait ends: one signal, and it fires.
        let fired = OracleSemaphore()
        #expect(timer.insert(Entry(at: now, fired: fired)) == 0)
        #expect(timer.signalsSent == 1)
        #expect(fired.wait(), "an entry due before the armed wait ended did not fire")
    }

    @Test func anEntryMovedEarlierThanTheArmedWaitSignalsAndFires() {
        let timer = DeadlineTimer()
        let now = SpindleDeadline.now.uptimeNanoseconds
        let fired = OracleSemaphore()
        let entry = Entry(at: now + 60 * Self.second, fired: fired)
        #expect(timer.insert(entry) == 0)
        #expect(waitUntil(deadline: 10) { timer.armedDeadline == entry.deadline }, "the timer thread never armed")
        timer.advance(entry, to: now + 61 * Self.second)  // later: ignored
        #expect(timer.signalsSent == 0)
        timer.advance(entry, to: now)
        #expect(timer.signalsSent == 1)
        #expect(fired.wait(), "an entry moved before the armed wait's end did not fire")
    }

    @Test func anIdleTimerIsSignalledByItsNextEntry() {
        let timer = DeadlineTimer()
        let fired = OracleSemaphore()
        #expect(timer.insert(Entry(at: SpindleDeadline.now.uptimeNanoseconds, fired: fired)) == 0)
        #expect(fired.wait())
        #expect(waitUntil(deadline: 10) { timer.armedDeadline == .max }, "the timer thread never waited empty")
        #expect(timer.insert(Entry(at: SpindleDeadline.now.uptimeNanoseconds, fired: fired)) == 0)
        #expect(timer.signalsSent == 1)
        #expect(fired.wait(), "an entry inserted into an idle timer did not fire")
    }
}
