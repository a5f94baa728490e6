/// A queue served by a `SpindleThreadPool` (`pool != nil`): it has no threads of its own. Each event that makes one
/// more operation startable sends the pool one request (`IdleWorkers.wakeOrSpawn`, server `.pool`, counted in
/// `idle.servesPending`), and a pool thread that pops the request runs `serveOnPool` here.
///
/// A serve works as a worker does (`QueueCore+Workers`), under the same lock and with the same references: it takes
/// the best ready operation (a slot), sends requests for whatever else could start, runs the operation, and when it
/// finished on this thread does its queue bookkeeping and takes the next one under the same lock acquisition, up to
/// `poolBudget` operations; then it sends one request for what is left (at the back of the pool's line: queues on a
/// pool take turns) and returns. A concurrent operation still executing when its `start()` returns hands its
/// reference back to the member list and finishes later through `operationDidFinish`, whose wake decision sends a
/// request. No spinning and no reservations: an idle pool thread parks in the pool, not in the queue.
///
/// The serving thread is the queue's "worker" meanwhile (`ThreadContext.workerOf`): a dependent that becomes ready
/// when an operation finishes here is left for it (`scheduleReady(selfServe:)`), and its `context.queue` is the
/// queue while an operation runs, so the waits that could never end refuse (`waitOnOwnQueue`) as on a worker.
extension QueueCore {
    /// Operations one serve runs back to back before the queue goes to the back of the pool's line.
    static let poolBudget = 16

    /// Serves this queue on the calling pool thread (see above). The caller holds a reference to this core and no
    /// lock.
    func serveOnPool() {
        let context = ThreadContext.current
        let outerWorker = context.workerOf
        context.workerOf = self
        var after = AfterUnlock()
        self.lock.lock()
        self.drainInboxLocked()
        let counted = !self.lifecycle.isTerminated  // a request left over from before the termination serves nothing
        self.idle.serveBegan(counting: counted)
        var served = 0
        while self.canDispatchLocked && served < QueueCore.poolBudget {
            let op = self.takeNextLocked()  // the queue's reference is ours now
            let cancelling = self.lifecycle.state == .cancelling  // as in `runNextUnlocking`
            after.wake.add(self.wakeOrSpawnLocked())  // requests for what else can start
            self.lock.unlock()
            // The previous operation's releases; `outstanding` drops once a batch is due (never the last: `op` is
            // outstanding).
            self.perform(&after, keepingDropsBelow: QueueCore.dropBatch)
            if cancelling { op._withUnsafeGuaranteedRef { $0.cancel() } }
            let outerQueue = context.queue
            context.queue = self.handle
            let finishedHere = self.runOnWorker(op, context)
            context.queue = outerQueue
            self.lock.lock()
            self.settleRunLocked(op, finishedHere: finishedHere, into: &after)  // as a worker does
            served += 1
        }
        // Budget spent with more to start: one request for it, at the back of the line. This thread takes a request
        // next, so nobody else is woken for it, unless releases (user deinitialisers, waiters) come first.
        after.wake.add(self.wakeOrSpawnLocked())
        after.wake.callerReturns = after.hasNoReleases
        self.lock.unlock()
        // Still this queue's worker while the releases run deinitialisers: a wait for this queue from one of them
        // is refused (`waitOnOwnQueue`), as on a worker of its own, instead of waiting for this serve to end.
        self.perform(&after)  // the handle (and this queue) may go away here; the caller holds this core
        context.workerOf = outerWorker
        // Last: the serve is over (a stopping queue terminates only now, after everything it held was released).
        guard counted else { return }
        var ended = AfterUnlock()
        self.lock.lock()
        self.idle.serveEnded()
        self.terminateIfDoneLocked(&ended)
        self.lock.unlock()
        self.perform(&ended)
    }
}
