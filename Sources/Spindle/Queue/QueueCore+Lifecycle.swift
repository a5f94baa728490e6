/// The queue's lifecycle events (states and transitions: `QueueLifecycle`): a shutdown request, the membership
/// emptying after one, a worker leaving its loop, the termination waits, and the handle's release. Each follows the
/// events' rule (`QueueCore+Events`): numbered steps under the lock, one `AfterUnlock` performed after unlocking;
/// members are cancelled and threads joined only after unlocking (cancelling runs observers; joining waits for a
/// thread that may be releasing user objects).
///
/// The one duty of every path that can make termination possible (a member finishing, a worker exiting, a thread
/// start failing or registering, the request itself): call `stopIfEmptyLocked` or `terminateIfDoneLocked`.
extension QueueCore {
    // MARK: - Shutdown requested

    /// `shutdown(mode)`: closes the inbox (admitting what was pushed before: accepted work), refuses blocked
    /// producers, lifts a suspension (what was accepted must run or finish cancelled), and stops the queue at once if
    /// it has no members. Cancelling: the caller cancels the members after unlocking, and meanwhile a worker that
    /// takes one cancels it before starting it (`runNextUnlocking`), so none starts uncancelled after the call. Returns the members to cancel (for `.cancel`: the caller cancels them after unlocking) and
    /// what is left to do. A repeated or weaker request changes nothing.
    func shutdownRequested(_ mode: QueueLifecycle.Mode) -> (cancel: [SpindleOperation], after: AfterUnlock) {
        var after = AfterUnlock()
        var cancel: [SpindleOperation] = []
        self.lockAndAdmit()  // 1. admit the inbox
        self.admitInboxChainLocked(self.inbox.closeTakingAll())  // 2. close it: later pushes fail
        if self.lifecycle.request(mode) {  // 3. running → draining/cancelling, draining → cancelling
            // 4. blocked producers' operations were never accepted: refused, given back by their producers
            after.addSemaphores(self.admission.refuseAll(.queueShutDown(name: self.name)))
            if self.slots.suspended {  // 5. a suspended queue resumes (reserved operations come back if a slot is free)
                self.slots.setSuspended(false)
                self.invalidateReservations()
                self.reclaimForFreeSlotLocked()
            }
            if self.lifecycle.state == .cancelling {  // 6. the members, to cancel after unlocking
                // Reserved operations give way (workers cancel what they take from now on, and reserve nothing).
                self.invalidateReservations()
                cancel.reserveCapacity(self.members.count)
                var node = self.members.first
                while let link = node {
                    let op = link.takeUnretainedValue()
                    cancel.append(op)
                    node = op.memberNext
                }
            }
            after.wake = self.collectWakeActionsLocked()  // 7. whom to wake for what can start now
            if self.members.count == 0 { self.stopIfEmptyLocked(&after) }  // 8. nothing accepted: stop now
        }
        self.lock.unlock()
        return (cancel, after)
    }

    /// A shut-down queue has no members: `stopping`, every parked worker woken to exit; terminated at once if no
    /// worker is left. Caller holds `lock`.
    func stopIfEmptyLocked(_ after: inout AfterUnlock) {
        guard self.lifecycle.emptied() else { return }
        after.wake.add(self.idle.wakeAll())
        self.publishIdleLocked()
        self.terminateIfDoneLocked(&after)
    }

    /// `stopping` with no worker in its loop and none being started: `terminated`; wakes the termination waiters
    /// (blocking ones on `drained`, async ones through `after`). Caller holds `lock`.
    func terminateIfDoneLocked(_ after: inout AfterUnlock) {
        guard self.lifecycle.workersGone(live: self.idle.noWorkers ? 0 : 1) else { return }
        self.drained.broadcast()
        after.addSemaphores(self.terminationWaiters.takeAll())
    }

    // MARK: - Workers leaving

    /// A worker left its loop (the queue is stopping), after performing everything it still held.
    func workerExited() -> AfterUnlock {
        var after = AfterUnlock()
        self.lock.lock()
        self.idle.workerExited()  // 1. one fewer in its loop
        self.publishIdleLocked()
        self.terminateIfDoneLocked(&after)  // 2. the last one out terminates the queue
        self.lock.unlock()
        return after
    }

    // MARK: - Termination waits

    /// Blocks until the queue has terminated or `deadline` passes; returns whether it terminated. The first caller
    /// to see the termination joins the threads (after unlocking). Caller holds no lock.
    ///
    /// A wait begins with a wake decision: a shut-down queue gets no more adds, so if its last thread start failed
    /// and nobody runs the retry (`IdleWorkers.timerRefusedRetry`), this is the event that starts a thread for what
    /// it still holds.
    func waitForTermination(until deadline: SpindleDeadline) -> Bool {
        self.perform(self.terminationWaitBegins())
        let terminated = ThreadContext.current.blocking {  // on a pool thread, another may serve meanwhile
            self.lock.lock()
            return self.drained.wait(until: deadline) {
                self.drainInboxLocked()
                return !self.lifecycle.isTerminated
            }
        }
        let threads = terminated ? self.collectThreadsLocked() : []
        self.lock.unlock()
        QueueCore.join(threads)
        return terminated
    }

    /// A task starts awaiting the termination: registers `semaphore` unless the queue has terminated already (then
    /// joins the threads nobody joined yet and returns false: nothing to await). Begins with a wake decision, as
    /// `waitForTermination` does.
    func terminationWaitBegan(_ semaphore: SpindleSemaphore) -> Bool {
        self.perform(self.terminationWaitBegins())
        let threads: [SpindleThread]? = self.withAdmittedLock {
            if self.lifecycle.isTerminated { return self.collectThreadsLocked() }
            self.terminationWaiters.add(semaphore)
            return nil
        }
        guard let threads else { return true }
        QueueCore.join(threads)
        return false
    }

    /// The awaiting task was signalled: joins the threads nobody joined yet. They have left their loops, so each
    /// join waits only for a thread's last few instructions (on the task's thread: a short block of a cooperative
    /// thread).
    func terminationWaitEnded() {
        QueueCore.join(self.lock.withLock { self.collectThreadsLocked() })
    }

    /// A termination wait begins: one wake decision for whatever can start now (see `waitForTermination`); a queue
    /// served by a pool also has the pool decide again (its requests may be waiting there with no thread coming).
    private func terminationWaitBegins() -> AfterUnlock {
        var after = AfterUnlock()
        self.lockAndAdmit()
        after.wake = self.collectWakeActionsLocked()
        self.lock.unlock()
        self.pool?.core.decideAgain()
        return after
    }

    /// Joins each collected thread, except the calling thread itself (a task's continuation can resume on the last
    /// worker out, through a shut-down queue's task executor), which is detached instead: it is about to be done.
    /// A worker that is itself joining the calling thread (a deinit it runs joins the thread that shuts the queue
    /// down) is detached too: that join would close a cycle (`joinCycle`), and the worker ends on its own once
    /// the calling thread has.
    static func join(_ threads: [SpindleThread]) {
        guard !threads.isEmpty else { return }
        let me = SpindleThread.current
        for thread in threads {
            if thread === me {
                thread.relinquish()
                continue
            }
            do throws(SpindleError) {
                try thread.join()
            } catch {
                if case .joinCycle = error { thread.relinquish() }  // otherwise it was joined already
            }
        }
    }

    /// The awaiting task was cancelled: withdraws `semaphore` (a no-op if the termination took it meanwhile).
    func terminationWaitCancelled(_ semaphore: SpindleSemaphore) {
        self.lock.withLock { self.terminationWaiters.withdraw(semaphore) }
    }

    /// Takes the threads to join (each is joined by exactly one caller). Caller holds `lock`.
    private func collectThreadsLocked() -> [SpindleThread] {
        self.lifecycle.collectThreads()
        return self.idle.takeThreads()
    }

    // MARK: - The handle's release

    /// The handle is gone (so there are no members): stop, wake every parked worker, and join the workers. A worker
    /// running this (the last operation released the queue from its finish path) detaches itself instead of joining
    /// itself.
    func shutdown() {
        // In a forked child the workers are the parent's: nothing to stop or join here (and the lock may have
        // been held by one of them at the fork).
        if ForkGeneration.isInherited(self.forkGeneration) { return }
        var after = AfterUnlock()
        self.lock.lock()
        self.admitInboxChainLocked(self.inbox.closeTakingAll())  // 1. nothing outstanding: closes an empty inbox
        if self.lifecycle.handleReleased() {  // 2. stopping
            after.wake.add(self.idle.wakeAll())  // 3. every parked worker, to see it
            self.publishIdleLocked()
        }
        self.terminateIfDoneLocked(&after)  // 4. no worker at all: terminated
        let workers = self.collectThreadsLocked()  // 5. threads that register later are joined by their starters
        self.lock.unlock()
        self.perform(&after)
        QueueCore.join(workers)
    }
}
