/* queue-workers.pml: the idle/park/wake protocol of the queue's worker threads (QueueCore's worker loop,
 * IdleWorkers' wake decision and idle line, each worker's ThreadParker, the IdleHints word read by adding
 * threads, the inbox, and the spawn-failure retry), checked with SPIN 6.5.
 *
 * WHAT IS MODELLED
 *   ADDERS adder processes (default 2) call addOperation's lock-free hot path (pushClaimed): adder 0 adds OPS0
 *   operations (default 2), adder 1 adds OPS1 (default 1), NOPS = 3 in all. The width is LIMIT = 2. Worker
 *   threads are started by the wake decisions (spawnWorker, by whichever process decided it); a start may fail
 *   (MAXFAIL = 2 failures in all), which runs the failure path and schedules a SpawnRetry, fired by the timer
 *   process. Each operation, when a worker takes it, either finishes on that worker or never finishes (the
 *   worker stays busy for ever and keeps the slot): a nondeterministic choice per operation. At most MAXSPUR = 2
 *   spurious returns from a park. At each point where the Swift worker may spin, the model's worker spins or not.
 *   The wake decision's hand-off rule: one event's operation (an add, or the worker's own decision after taking
 *   one) wakes or starts nobody while a worker spins or a woken one is on its way (wakeupsInFlight > 0), and the
 *   hint word's taker-coming bit tells adders so; a batch decision (collect) wakes up to its room, counting those
 *   already on their way.
 *   State: the inbox, the ready count, slots.running, slots.limit, IdleWorkers (threads.count, starting,
 *   parked, wakeupsInFlight, the idle line, spinning, retryPending), the published hint word, the timer's
 *   scheduled retries, each worker's parker (its notification).
 *
 * ABSTRACTIONS (everything the model leaves out or simplifies)
 *   A1 Mutex and atomics: QueueCore.lock is `mtx`. A locked stretch is a sequence of atomic steps with mtx held
 *      throughout, cut right after each access to a variable that lock-free code also touches: the inbox (a
 *      push's compare-and-swap [IB_CAS], isEmpty [IB_EMPTY], the drain's exchange [IB_TAKEALL]) and the hint
 *      word (publish [H_STORE], load [H_LOAD]). All those accesses are sequentially consistent in Swift and
 *      each is one step here, so every interleaving of them is explored; the steps in between touch only
 *      lock-guarded state, which nobody else can see, and are merged. (The drain's isEmpty and exchange count
 *      as one access: a push between them is taken by the exchange.) Any process waiting for mtx may get it.
 *   A2 Parking: inLine[w] is worker w's place in IdleWorkers' idle line (under mtx). A wake decision takes a
 *      worker out of the line (which one, if both are in it, is nondeterministic: the Swift line is FIFO with a
 *      preference for a worker that parked on the waker's CPU, so any order can happen) and the waker, after
 *      unlocking, unparks it: token[w] = true, one atomic step
 *      (cshim_parker_unpark's exchange; the futex_wake is not a separate state: a worker that has not slept yet
 *      finds the token, one asleep is woken by it). The worker's park (cshim_parker_park) is one step that
 *      consumes the token, or blocks until there is one; or, at most MAXSPUR times in all, returns at once
 *      without consuming anything (the fault seam's spurious return). The unlock before the park and the
 *      relock after it are steps of their own. wakeAll (only shutdown uses it) is left out.
 *   A3 Queue contents: plain, identical operations. Left out: priorities (a worker takes the lowest-numbered
 *      ready one; ReadyBuckets' order does not matter here), dependencies and readiness (admitted = ready),
 *      barriers (BarrierGate), cancellation, reservations (reserveLocked, claimReserved,
 *      settleReservationLocked, reclaimReservationsLocked, noteAdded), suspension, batch adds
 *      (addOperations), bounded queues and blocked producers, batch waits, run-loop-served queues
 *      (servedByRunLoop is false), statistics (noteRunning's count, lastSignalAt, wait times), the outstanding
 *      count and the handle (dropOutstanding is only an unlocked gap), and shutdown (shuttingDown stays false;
 *      workers never exit; no joins; the inbox's closed bit is never set, so every push succeeds: the issue-18
 *      lifecycle is tested in QueueShutdownTests and QueueLifecycleTests, not modelled). Every operation finishes on its own worker (runOnWorker returns true)
 *      or never: operations finishing on another thread (operationDidFinish) and scheduleReady are left out.
 *      The width is fixed (except with -DRAISE_WIDTH: one raise from 1 to LIMIT).
 *   A4 Spin: SpinPolicy (its estimate, budget, spinMissed, and what gotWork and woke report to it) is left out:
 *      where the Swift worker may spin (maySpin, nobody spinning) the model's worker spins or not (budget > 0
 *      or 0). The spin window is the worker's unlocked gap between [W_SPINUNLOCK] and [W_SPINRELOCK], which
 *      lasts any number of the other processes' steps (any number of polls; .seen and .budgetSpent lead to
 *      the same relock). So PushCounter (pushes.announce, pushes.current) and inbox.mayHoldWork, which only
 *      end the spin early, are left out.
 *   A5 Threads and the timer: spawnJoinable fails (MAXFAIL times in all) or starts the worker process at
 *      once. Thread names and indices, joins, diagnostics reports, spawnFailures and the retry's backoff are
 *      left out: the timer fires each scheduled retry at any time after it was inserted (no clock).
 *      DeadlineTimer.insert never fails, except with -DTIMER_CAN_FAIL (once). Then (IdleWorkers.timerRefusedRetry)
 *      when the thread whose start failed is not a worker of the queue (an adder, the timer, the widener:
 *      [F_CALLER], each process's constant isWorker) or no worker is started ([I_INPLACEQ]: threads == 0, A3:
 *      workers never exit), that thread runs the retry itself after the backoff (QueueCore.retryInPlace: the
 *      retry's event, then the starts it decided, in a loop): the same steps as the timer's fire, on another
 *      thread, later; the model's timer process stands for whichever thread runs them ([F_INPLACE]). When a
 *      worker's start of another worker failed and a worker is started, nobody runs it ([I_DROP]: retryPending
 *      cleared, a worker comes back for the work or the next event starts a thread; ghost workerDrops). The in-place loop's 1 s cap (after it,
 *      nobody runs the retry either) is left out: the model has no clock.
 *   A6 A worker's own state: `finished`/`dropped` and `drops` are booleans (whether the unlocked gaps
 *      [W_RELEASEQ] and [W_DROPSQ] come before the next park; dropBatch, 256, is never reached).
 *   A7 Ghost state: each operation's place (new, inbox, ready, taken) and counters for the properties. The
 *      inbox's order (newest-first stack, admitted oldest first) is left out.
 *   A8 Bounds (defaults): ADDERS 2 (OPS0 2 + OPS1 1 = 3 operations), LIMIT 2, MAXFAIL 2, MAXSPUR 2; the search
 *      depth stays under 500. Override with -D (ADDERS and LIMIT 1 or 2).
 *      10,988,134 states for the safety run and 16,757,663 for the progress run (3,394,374 and 5,003,650 before
 *      the hand-off rule).
 *
 * PROPERTIES
 *   Safety (assertions; run with -DSAFETY, plus invalid end states):
 *     S1 after every locked step: wakeupsInFlight <= parked, parked + spinning <= threads + starting
 *        (IdleWorkers.check), running <= limit, threads + starting <= limit; no counter goes below zero (each
 *        decrement asserts its precondition, as the Swift code does; a byte that wrapped would also fail the
 *        upper bounds).
 *     S3 a worker joining the idle line holds no notification (no stale one was left by an earlier pop).
 *     S2 no operation runs twice: a worker takes only a ready operation and marks it taken, and every
 *        operation added is in exactly one place (inbox + ready + taken == added).
 *     P1 "a free slot runs a ready operation even if the others never finish", at quiescence (`timeout`: all
 *        adders done, the timer idle with no retry scheduled, nothing can move): every operation added has
 *        been taken by a worker, unless all `limit` slots are held by operations that never finish. Valid end
 *        states (end labels): a worker blocked in the park wait (end_park, when nothing woke it), a worker
 *        busy for ever (end_busy), the timer with nothing scheduled (end_idle).
 *   Progress (LTL; run with pan -a, no fairness needed: every run is finite, so the formula is checked on each
 *   run's final state, stutter-extended):
 *     ltl all_run: <> [] (ntaken == NOPS || stuck == limit)   (P1 as a formula).
 *   With -DTIMER_CAN_FAIL, P1 and all_run are weakened by the documented exception: when the timer cannot take a
 *   retry after a worker's start of another worker failed, and a worker is in its loop, the workers are left to
 *   come back for the work (the failing one must not sleep holding an operation it has taken), so the work may
 *   wait if every started worker is busy for ever (workerDrops && stuck == threads && threads > 0). Nothing else
 *   may be left: a queue with no worker is never stranded (BROKEN_TIMER_FAILURE_STRANDS, the old drop, is
 *   caught), nor is an add while every worker is busy for ever (BROKEN_ADDER_LEAVES_RETRY, the code before, is
 *   caught).
 *
 * FOUND BY THIS MODEL, AND FIXED: retrySpawn drained the inbox before it published the cleared retryPending,
 *   the wrong order for the Dekker pairing of IdleHints: an add between the two read the old word ("no thread
 *   may be started"), took no lock, and its operation stayed in the inbox for ever with a slot free (W0 busy
 *   with an operation that never finishes, the second thread's start failed, the retry drained an empty inbox,
 *   then the push). The code now publishes first ([R_PUBLISH_FIRST]), then drains; the old order is the broken
 *   variant BROKEN_RETRY_DRAIN_BEFORE_PUBLISH. Raising the width had the same fault (withAdmittedLock drained
 *   before the new width was published): it drains again after publishing ([WD_DRAIN]); checked with
 *   -DRAISE_WIDTH, its old order is BROKEN_WIDTH_DRAIN_BEFORE_PUBLISH.
 *
 * OPTIONS
 *   -DTIMER_CAN_FAIL            one DeadlineTimer.insert may fail (its thread cannot start): [F_INPLACE] or
 *                               [I_DROP], with P1 weakened as said above.
 *   -DRAISE_WIDTH               a widener process raises the width from 1 to LIMIT once
 *                               (setMaxConcurrentOperationCount: [WD_ADMIT] [WD_SET] [WD_PUBLISH] [WD_DRAIN]).
 *   -DNO_FOREVER                every operation finishes (then the broken variants NO_RECHECK and
 *                               SPAWN_FAILURE_STRANDS, and the retry bug, are not caught).
 *
 * BROKEN VARIANTS (each must make pan report errors: P1 in the safety run, all_run in the progress run)
 *   -DBROKEN_NO_RECHECK             the worker waits without looking at the inbox again after advertising
 *                                   itself parked ([W_RECHECK] missing): a push that read the word just before
 *                                   the advertisement is stranded. Caught only with operations that never
 *                                   finish (another busy worker would come back and drain it).
 *   -DBROKEN_SPAWN_FAILURE_STRANDS  the failure path before the fix: it frees the place and nothing else (no
 *                                   retryPending, no drain, no wake, no retry): the work the start was for is
 *                                   stranded.
 *   -DBROKEN_ADDER_LEAVES_RETRY     (with -DTIMER_CAN_FAIL) the code before the adders ran the retry: in place
 *                                   only with no worker started; an adder whose start failed while the one
 *                                   worker was busy for ever dropped the retry, and its operation was stranded.
 *   -DBROKEN_TIMER_FAILURE_STRANDS  (with -DTIMER_CAN_FAIL) the code before the in-place retry: when the
 *                                   DeadlineTimer.insert fails the retry is always dropped (retryPending cleared
 *                                   and published, the next event left to start a thread): with no worker and
 *                                   no next event, the work is stranded.
 *   -DBROKEN_NO_WAKE_AFTER_PUSH     the adder ignores the word's parked bit ([H_TEST] without parkedBit): with
 *                                   every thread started and one parked, its operation is stranded.
 *   -DBROKEN_WAKE_ONLY_SLEEPERS     the unpark is a bare futex_wake that reaches only a worker already asleep (no
 *                                   notification kept, [C_UNPARK] without the exchange): an unpark between the
 *                                   worker's unlock ([W_PARKUNLOCK]) and its sleep is lost, and its operation
 *                                   stranded.
 *   -DBROKEN_NO_HANDOFF_CHAIN       the woken worker does not decide the next wake when it takes an operation
 *                                   ([W_CHAIN] missing): under the hand-off rule the adds made while it was on its
 *                                   way woke nobody, so their operations are stranded with a worker parked.
 *   -DBROKEN_STALE_NOTIFICATION     a worker popped by a wake decision whose park returned spuriously does not
 *                                   take the notification its waker then sends ([W_ABSORB] missing): the next
 *                                   park returns on that stale one, and (in Swift) a later decision can rewrite the
 *                                   worker's nextToWake link while the first waker still reads it, losing a wake.
 *                                   Caught by S3 (safety run only).
 *   -DBROKEN_SPURIOUS_COUNTS_AS_SIGNAL  every return from a park is taken as a wakeup decided for the worker
 *                                   ([I_NOTPOPPED] missing): a spurious return consumes a wakeup that is not
 *                                   its own (safety run only: wakeupsInFlight goes below zero; the progress run
 *                                   with assertions off does not see it).
 *
 * STEPS AND THE SWIFT LINES THEY STAND FOR (checked by .ci/check-models)
 */
/* [W_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:47 "self.lock.lock()" */
/* [W_LOOP]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:49 "while !self.shuttingDown {" */
/* [W_DRAIN]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:50 "self.drainInboxLocked()" */
/* [W_CANDISPATCH]   PIN Sources/Spindle/Queue/QueueCore+Workers.swift:51 "if self.canDispatchLocked {" */
/* [W_TAKE]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:94 "let op = self.takeNextLocked()  // 1. the queue's reference is ours now" */
/* [W_CHAIN]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:96 "let wake = self.wakeOrSpawnLocked()  // 2. whom to wake for what is left" */
/* [W_UNLOCK]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:99 "self.lock.unlock()" */
/* [W_PERFORM]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:102 "self.perform(&worker.pending, keepingDropsBelow: QueueCore.dropBatch, retiring: true)" */
/* [W_GOTWORK]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:100 "worker.gotWork()" */
/* [W_RUN]           PIN Sources/Spindle/Queue/QueueCore+Workers.swift:106 "let deferredFinish = self.runOnWorker(op, context)" */
/* [W_RELOCK]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:125 "self.lock.lock()" */
/* [W_UNLINK]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:205 "_ = op._withUnsafeGuaranteedRef { self.unlinkFinishedLocked($0, into: &after) }" */
/* [W_FINISHED]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:206 "after.addFinished(op)" */
/* [W_DROPS]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:207 "after.outstandingDrops += 1" */
/* [W_RELEASEQ]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:58 "if !worker.pending.hasNoReleases {" */
/* [W_RELEASE]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:60 "self.perform(&worker.pending, keepingDropsBelow: .max)" */
/* [W_RELEASELOCK]   PIN Sources/Spindle/Queue/QueueCore+Workers.swift:61 "self.lock.lock()" */
/* [W_SPINQ]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:65 "if IdleWorkers.spinningAllowed(width: self.slots.limit) && worker.maySpin && worker.policy.budgetNanos > 0" */
/* [W_SPINONCE]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:143 "worker.maySpin = false" */
/* [W_SPINPUB]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:144 "self.publishIdleLocked()" */
/* [W_SPINUNLOCK]    PIN Sources/Spindle/Queue/QueueCore+Workers.swift:146 "self.lock.unlock()" */
/* [W_SPIN]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:149 "let caught = SpinPolicy.spin(" */
/* [W_SPINPOLL]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:151 ") { self.pushes.current != seen || self.inbox.mayHoldWork } == .seen" */
/* [W_SPINRELOCK]    PIN Sources/Spindle/Queue/QueueCore+Workers.swift:152 "self.lock.lock()" */
/* [W_ENDSPIN]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:153 "self.idle.endSpin()" */
/* [W_ENDSPINPUB]    PIN Sources/Spindle/Queue/QueueCore+Workers.swift:154 "self.publishIdleLocked()" */
/* [W_LOOKAGAIN]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:69 "continue  // look again under the lock before parking" */
/* [W_DROPSQ]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:71 "if worker.pending.outstandingDrops > 0 {" */
/* [W_DROPOUT]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:75 "self.perform(&worker.pending)" */
/* [W_DROPLOCK]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:76 "self.lock.lock()" */
/* [W_PARKING]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:168 "self.idle.parking(parker)" */
/* [W_PARKPUB]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:169 "self.publishIdleLocked()" */
/* [W_RECHECK]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:171 "if self.inbox.isEmpty {" */
/* [W_PARKUNLOCK]    PIN Sources/Spindle/Queue/QueueCore+Workers.swift:172 "self.lock.unlock()" */
/* [W_PARK]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:173 "notified = parker.park()" */
/* [W_PARKRELOCK]    PIN Sources/Spindle/Queue/QueueCore+Workers.swift:174 "self.lock.lock()" */
/* [W_UNPARKED]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:176 "let signalled = self.idle.unparked(parker)" */
/* [W_UNPARKPUB]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:177 "self.publishIdleLocked()" */
/* [W_NOTIFIEDQ]    PIN Sources/Spindle/Queue/QueueCore+Workers.swift:170 "var notified = true" */
/* [W_ABSORBQ]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:178 "if signalled && !notified {" */
/* [W_ABSORBUNLOCK] PIN Sources/Spindle/Queue/QueueCore+Workers.swift:179 "self.lock.unlock()" */
/* [W_ABSORB]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:180 "while !parker.park() {}  // the waker unparks after its unlock: soon" */
/* [W_ABSORBRELOCK] PIN Sources/Spindle/Queue/QueueCore+Workers.swift:181 "self.lock.lock()" */
/* [W_WOKE]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:183 "worker.woke(workArrivedAt: signalled ? parker.signalledAt : 0)" */
/* [D_CALL]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:18 "let action = self.idle.wakeOrSpawn(" */
/* [D_PUBLISH]       PIN Sources/Spindle/Queue/QueueCore+Wake.swift:24 "self.publishIdleLocked()  // fewer unsignalled parked workers, or fewer threads to start" */
/* [C_ROOM]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:33 "let room = self.slots.room(ready: self.ready.count)" */
/* [C_EACH]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:35 "let action = self.wakeOrSpawnLocked(inFlightBelow: room)" */
/* [C_NONE]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:36 "if action == .none { break }" */
/* [P_SIGNAL]       PIN Sources/Spindle/Queue/State/IdleWorkers+WakePlan.swift:62 "parker.unpark()" */
/* [P_SPAWN]         PIN Sources/Spindle/Queue/QueueCore+Wake.swift:141 "for index in plan.firstSpawn..<(plan.firstSpawn + plan.spawns) { self.spawnWorker(index) }" */
/* [PA_SIGNAL]      PIN Sources/Spindle/Queue/QueueCore+Wake.swift:76 "case .signal(let parker): parker.unpark()" */
/* [PA_SPAWN]       PIN Sources/Spindle/Queue/QueueCore+Wake.swift:77 "case .spawn(let index): self.spawnWorker(index)" */
/* [PP_SIGNALS]     PIN Sources/Spindle/Queue/QueueCore+Wake.swift:140 "plan.unparkAll()" */
/* [PP_SPAWNS]       PIN Sources/Spindle/Queue/QueueCore+Wake.swift:141 "for index in plan.firstSpawn..<(plan.firstSpawn + plan.spawns) { self.spawnWorker(index) }" */
/* [TAKE_POP]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:218 "let link = self.ready.popHighest()!" */
/* [TAKE_SLOT]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:219 "self.stats.noteRunning(self.slots.take())" */
/* [T_FIRE]          PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:48 "override func fire() { self.core.retrySpawn() }" */
/* [S_SPAWN]         PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:61 "thread = try SpindleThread.spawnJoinable(name: "spindle.w\(index)") { [self] in self.workerLoop() }" */
/* [S_FAILED]        PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:63 "return self.threadFailedToStart(error)" */
/* [S_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:66 "self.lock.lock()" */
/* [S_STARTED]       PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:67 "let recoveredFrom = self.idle.threadStarted(thread)" */
/* [S_PUBLISH]       PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:68 "self.publishIdleLocked()" */
/* [F_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:244 "self.lock.lock()" */
/* [F_FREE]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:245 "let delay = self.idle.threadFailedToStart()  // 1. free the place, retry pending, the backoff" */
/* [F_DRAIN]         PIN Sources/Spindle/Queue/QueueCore+Events.swift:246 "self.drainInboxLocked()  // 2. admit what was added meanwhile" */
/* [F_COLLECT]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:247 "after.wake = self.collectWakeActionsLocked()  // 3. parked workers take what can start now" */
/* [F_PUBLISH]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:248 "self.publishIdleLocked()  // 4. adding threads see that no thread may start until the retry" */
/* [F_PERFORM]       PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:86 "self.perform(after)" */
/* [F_INSERT]        PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:92 "let timerFailure = DeadlineTimer.shared.insert(retry)" */
/* [F_REMOVE]        PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:94 "DeadlineTimer.shared.remove(retry)  // else it waits in the heap and fires whenever the timer starts" */
/* [F_REFUSEDLOCK]   PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:96 "let inPlace = self.lock.withLock {" */
/* [F_REFUSEDPUBLISH] PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:99 "self.publishIdleLocked()  // not in place: threads may start again" */
/* [F_INPLACE]       PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:53 "if let delay = self.startWorker(index) { self.retryInPlace(after: delay) }" */
/* [S_RETRYINPLACE]  PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:113 "var after = self.spawnRetried()" */
/* [R_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:257 "self.lock.lock()" */
/* [R_STARTED]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:258 "self.idle.retryStarted()  // 1. threads may start again" */
/* [R_PUBLISH_FIRST] PIN Sources/Spindle/Queue/QueueCore+Events.swift:259 "self.publishIdleLocked()  // 2. first: a later add sees that a thread may start and locks, or we see its push" */
/* [R_DRAIN]         PIN Sources/Spindle/Queue/QueueCore+Events.swift:260 "self.drainInboxLocked()  // 3. admit the inbox" */
/* [R_COLLECT]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:262 "after.wake = self.collectWakeActionsLocked()  // 4. whom to wake or start" */
/* [R_PUBLISH]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:263 "self.publishIdleLocked()  // 5. the places just reserved" */
/* [R_PERFORM]       PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:135 "self.perform(self.spawnRetried())" */
/* [I_GUARD]         PIN Sources/Spindle/Queue/State/IdleWorkers.swift:133 "guard canDispatch, !shuttingDown else { return .none }" */
/* [I_COMING]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:145 "if self.takerComing(inFlightBelow: inFlightBelow) { return .none }" */
/* [I_TAKERCOMING]   PIN Sources/Spindle/Queue/State/IdleWorkers.swift:161 "func takerComing(inFlightBelow: Int = 1) -> Bool { self.spinning || self.wakeupsInFlight >= inFlightBelow }" */
/* [I_PARKEDQ]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:146 "if let first = self.popIdle(preferring: wakerCPU) {" */
/* [I_SIGNAL]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:147 "self.wakeupsInFlight += 1" */
/* [I_SPAWNQ]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:151 "if count < limit && count < wanted && !self.retryPending {" */
/* [I_RESERVE]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:152 "self.starting += 1  // reserved now, so concurrent decisions do not overshoot" */
/* [I_STARTED]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:167 "self.starting -= 1" */
/* [I_THREADS]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:169 "self.threads.append(thread)" */
/* [I_FAILFREE]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:180 "self.starting -= 1" */
/* [I_RETRYSET]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:182 "self.retryPending = true" */
/* [I_RETRYSTARTED]  PIN Sources/Spindle/Queue/State/IdleWorkers.swift:196 "mutating func retryStarted() { self.retryPending = false }" */
/* [I_INPLACEQ]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:205 "if (!callerIsWorker || self.live <= 0) && !shuttingDown && delay < IdleWorkers.maximumRetryDelay {" */
/* [F_CALLER]        PIN Sources/Spindle/Queue/QueueCore+Spawning.swift:95 "let callerIsWorker = ThreadContext.withCurrent { $0.workerOf === self }" */
/* [I_DROP]          PIN Sources/Spindle/Queue/State/IdleWorkers.swift:208 "self.retryPending = false" */
/* [I_BEGINSPIN]     PIN Sources/Spindle/Queue/State/IdleWorkers.swift:234 "self.spinning = true" */
/* [I_ENDSPIN]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:241 "self.spinning = false" */
/* [I_PARKING]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:247 "self.parked += 1" */
/* [I_UNPARK]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:259 "self.parked -= 1" */
/* [I_CONSUME]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:265 "self.wakeupsInFlight -= 1" */
/* [I_NOTPOPPED]     PIN Sources/Spindle/Queue/State/IdleWorkers.swift:260 "if parker.inIdleLine {" */
/* [I_LEAVELINE]     PIN Sources/Spindle/Queue/State/IdleWorkers.swift:261 "self.removeFromIdle(parker)" */
/* [I_JOINLINE]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:248 "parker.inIdleLine = true" */
/* [I_POP]           PIN Sources/Spindle/Queue/State/IdleWorkers.swift:298 "self.removeFromIdle(chosen)" */
/* [I_HCOMING]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:339 "if self.takerComing() { word |= IdleHints.takerComingBit }" */
/* [I_HPARKED]      PIN Sources/Spindle/Queue/State/IdleWorkers.swift:340 "if self.idleFirst != nil { word |= IdleHints.parkedBit }" */
/* [I_HCANSPAWN]     PIN Sources/Spindle/Queue/State/IdleWorkers.swift:341 "if self.server == .ownThreads && self.threadCount < limit && !self.retryPending { word |= IdleHints.canSpawnBit }" */
/* [I_CHECK1]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:347 "self.wakeupsInFlight >= 0 && self.wakeupsInFlight <= self.parked && self.starting >= 0" */
/* [I_CHECKLINE]    PIN Sources/Spindle/Queue/State/IdleWorkers.swift:348 "&& self.idleCount == self.parked - self.wakeupsInFlight && (self.idleCount == 0) == (self.idleFirst == nil)" */
/* [I_CHECK2]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:349 "&& self.parked + (self.spinning ? 1 : 0) <= self.threadCount && self.threadCount >= 0" */
/* [C_PARK]        PIN CShim/shim.c:120 "if (__atomic_fetch_sub(&parker->state, 1u, __ATOMIC_ACQUIRE) == CSHIM_PARKER_NOTIFIED) return 0;" */
/* [C_PARKWAIT]    PIN CShim/shim.c:123 "syscall(SYS_futex, &parker->state, FUTEX_WAIT_PRIVATE, CSHIM_PARKER_PARKED, NULL, NULL, 0);" */
/* [C_PARKTAKE]    PIN CShim/shim.c:125 "if (__atomic_compare_exchange_n(&parker->state, &expected, CSHIM_PARKER_EMPTY, 0, __ATOMIC_ACQUIRE," */
/* [C_PARKFAULT]   PIN CShim/shim.c:114 "int fault = cshim_fault(CSHIM_FAULT_PARK);" */
/* [C_UNPARK]      PIN CShim/shim.c:132 "if (__atomic_exchange_n(&parker->state, CSHIM_PARKER_NOTIFIED, __ATOMIC_RELEASE) == CSHIM_PARKER_PARKED)" */
/* [H_INIT]          PIN Sources/Spindle/Queue/FastPath/IdleHints.swift:27 "private let word = Atomic<UInt8>(IdleHints.canSpawnBit)" */
/* [H_STORE]         PIN Sources/Spindle/Queue/FastPath/IdleHints.swift:34 "self.word.store(value, ordering: .sequentiallyConsistent)" */
/* [H_LOAD]          PIN Sources/Spindle/Queue/FastPath/IdleHints.swift:42 "let value = self.word.load(ordering: .sequentiallyConsistent)" */
/* [H_TEST]          PIN Sources/Spindle/Queue/FastPath/IdleHints.swift:43 "return value & IdleHints.takerComingBit == 0 && value & (IdleHints.parkedBit | IdleHints.canSpawnBit) != 0" */
/* [IB_CAS]          PIN Sources/Spindle/Queue/FastPath/Inbox.swift:45 "let (done, seen) = self.head.compareExchange(" */
/* [IB_EMPTY]        PIN Sources/Spindle/Queue/FastPath/Inbox.swift:63 "var isEmpty: Bool { self.head.load(ordering: .sequentiallyConsistent) & ~Inbox.closedBit == 0 }" */
/* [IB_TAKEALL]      PIN Sources/Spindle/Queue/FastPath/Inbox.swift:72 "Inbox.reversed(self.head.exchange(self.head.load(ordering: .relaxed) & Inbox.closedBit," */
/* [Q_LOCKADMIT]     PIN Sources/Spindle/Queue/QueueCore.swift:153 "self.drainInboxLocked()" */
/* [Q_DRAINQ]        PIN Sources/Spindle/Queue/QueueCore.swift:177 "if self.inbox.isEmpty { return }" */
/* [Q_DRAINALL]      PIN Sources/Spindle/Queue/QueueCore.swift:183 "self.admitInboxChainLocked(self.inbox.takeAllOldestFirst())" */
/* [Q_PUBLISH]       PIN Sources/Spindle/Queue/QueueCore.swift:205 "self.idleHints.publish(self.idle.hintWord(limit: self.slots.limit))" */
/* [Q_FREESLOT]      PIN Sources/Spindle/Queue/QueueCore.swift:304 "if freesSlot { self.slots.free() }" */
/* [A_PUSH]          PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:273 "guard core.pushToInbox(operation) else { return false }" */
/* [A_NEEDS]         PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:274 "guard core.needsWakeAfterInboxPush() else { return true }" */
/* [A_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:25 "self.lockAndAdmit()  // 1. admit the inbox, the push among it" */
/* [A_DECIDE]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:26 "let wake = self.wakeOrSpawnLocked()  // 2. whom to wake" */
/* [A_UNLOCK]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:27 "self.lock.unlock()" */
/* [A_PERFORM]       PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:275 "core.perform(core.pushedToInbox())" */
/* [SL_CANDISPATCH]  PIN Sources/Spindle/Queue/State/DispatchSlots.swift:33 "func canDispatch(ready: Int) -> Bool { ready > 0 && self.hasFreeSlot }" */
/* [SL_ROOM]         PIN Sources/Spindle/Queue/State/DispatchSlots.swift:36 "func room(ready: Int) -> Int { self.suspended ? 0 : max(0, min(ready, self.limit - self.running)) }" */
/* [SL_TAKE]         PIN Sources/Spindle/Queue/State/DispatchSlots.swift:41 "self.running += 1" */
/* [SL_FREE]         PIN Sources/Spindle/Queue/State/DispatchSlots.swift:48 "self.running -= 1" */
/* [WD_ADMIT]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:183 "self.lockAndAdmit()  // 1. admit the inbox" */
/* [WD_SET]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:184 "self.slots.setWidth(requested: requested, resolved: QueueCore.resolve(requested))  // 2. the slots" */
/* [WD_PUBLISH]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:187 "self.publishIdleLocked()  // 4. adding threads see whether a thread may start" */
/* [WD_DRAIN]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:188 "self.drainInboxLocked()  // 5. adds that saw the old hint (no thread to start) left their operations here" */
/* [WD_COLLECT]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:189 "after.wake = self.collectWakeActionsLocked()  // 6. one wake per operation that can start now" */
/* [WD_PERFORM]      PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:338 "self.core.perform(self.core.widthChanged(requested: value))" */


#ifndef LIMIT
#define LIMIT 2                             /* the width (maxConcurrentOperationCount); 1 or 2 */
#endif
#ifndef ADDERS
#define ADDERS 2                            /* adding threads; 1 or 2 */
#endif
#ifndef OPS0
#define OPS0 2                              /* operations added by adder 0 */
#endif
#ifndef OPS1
#define OPS1 1                              /* operations added by adder 1 (if ADDERS == 2) */
#endif
#if ADDERS == 2
#define NOPS (OPS0 + OPS1)
#else
#define NOPS OPS0
#endif
#ifndef MAXFAIL
#define MAXFAIL 2                           /* thread starts that fail, in all */
#endif
#ifndef MAXSPUR
#define MAXSPUR 2                           /* spurious returns from a park, in all */
#endif
#ifdef TIMER_CAN_FAIL
#define MAXTIMERFAIL 1                      /* DeadlineTimer.insert failures (A5) */
#else
#define MAXTIMERFAIL 0
#endif

/* Wake actions (IdleWorkers.WakeAction): .signal carries the worker taken out of the idle line (SIG0 + w). */
#define NONE  0
#define SPAWN 1
#define SIG0  2
#define ISSIG(a) ((a) >= SIG0)

/* The hint word's bits (IdleHints). */
#define COMING_BIT   1                          /* takerComingBit: a worker spins, or a woken one is on its way */
#define PARKED_BIT   2
#define CANSPAWN_BIT 4

/* Operation states (ghost identity; A3). */
#define O_NEW   0
#define O_INBOX 1
#define O_READY 2
#define O_TAKEN 3

/* ---- Shared state. Under `mtx` (QueueCore.lock) except inbox (nin and the O_INBOX marks: lock-free pushes),
 * hint (the IdleHints word) and token (each parker's futex word: atomics). ---- */
bool mtx = false;                           /* QueueCore.lock held (A1) */
#ifdef RAISE_WIDTH
byte limit = 1;                             /* slots.limit: 1, raised to LIMIT by widener() */
#else
byte limit = LIMIT;                         /* slots.limit */
#endif
byte nin = 0;                               /* operations in the inbox */
byte nready = 0;                            /* ready.count */
byte running = 0;                           /* slots.running */
byte threads = 0;                           /* idle.threads.count */
byte starting = 0;                          /* idle.starting */
byte parked = 0;                            /* idle.parked */
byte wakeups = 0;                           /* idle.wakeupsInFlight */
bool spinning = false;                      /* idle.spinning */
bool retryPending = false;                  /* idle.retryPending */
byte hint = CANSPAWN_BIT;                   /* [H_INIT] the published word */
byte retries = 0;                           /* SpawnRetry entries on the process timer, not yet fired */
bool inLine[LIMIT];                         /* worker w in the idle line (parked, not taken by a wake decision) */
bool token[LIMIT];                          /* worker w's parker holds a notification (A2) */
#ifdef BROKEN_WAKE_ONLY_SLEEPERS
bool asleep[LIMIT];                         /* worker w inside futex_wait (the broken variant only) */
#endif
byte opst[NOPS];                            /* each operation's place: O_NEW, O_INBOX, O_READY, O_TAKEN */
byte k = 0;                                 /* scratch index, used only inside atomic steps, left at 0 */

/* ---- Ghost state (bounds and properties). ---- */
byte nworkers = 0;                          /* worker processes created (threads never exit: A3) */
byte added = 0;                             /* operations pushed */
byte ntaken = 0;                            /* operations taken by a worker */
byte stuck = 0;                             /* operations taken that never finish (their worker stays busy) */
byte fails = 0;                             /* thread starts failed */
byte spur = 0;                              /* spurious returns from a park happened */
byte timerFails = 0;                        /* timer inserts failed (-DTIMER_CAN_FAIL only) */
bool workerDrops = false;                   /* a worker whose start failed left the retry ([I_DROP]) */

#define THREADCOUNT (threads + starting)
#define CANDISPATCH (nready > 0 && running < limit)              /* [SL_CANDISPATCH] (never suspended) */
/* [Q_PUBLISH] IdleWorkers.hintWord: [I_HCOMING] [I_HPARKED] [I_HCANSPAWN] */
#define INLINE (inLine[0] + (LIMIT == 2 -> inLine[LIMIT - 1] : 0))   /* idle.idleCount */
#define HINTW (((spinning || wakeups > 0) -> COMING_BIT : 0) | (INLINE > 0 -> PARKED_BIT : 0) | \
               ((THREADCOUNT < limit && !retryPending) -> CANSPAWN_BIT : 0))
#ifdef BROKEN_NO_WAKE_AFTER_PUSH
/* The adder ignores the parked bit: it takes the lock only when a thread may be started. */
#define NEEDS_WAKE ((hint & COMING_BIT) == 0 && (hint & CANSPAWN_BIT) != 0)
#else
#define NEEDS_WAKE ((hint & COMING_BIT) == 0 && (hint & (PARKED_BIT | CANSPAWN_BIT)) != 0)   /* [H_TEST] */
#endif
/* Progress: every operation added has been taken, unless every slot is held by one that never finishes. */
#ifdef TIMER_CAN_FAIL
#define ALL_RAN (ntaken == NOPS || stuck == limit || (workerDrops && threads > 0 && stuck == threads))
#else
#define ALL_RAN (ntaken == NOPS || stuck == limit)
#endif

/* S1: IdleWorkers.check() ([I_CHECK1] [I_CHECKLINE] [I_CHECK2]) and the slot and counter bounds, after every
 * locked step.
 * Counters are bytes: one going below zero wraps to 255 and fails the upper bounds here (besides the
 * preconditions asserted before each decrement, as in the Swift code). */
inline inv() {
    assert(wakeups <= parked);
    assert(INLINE == parked - wakeups);
    assert(parked + (spinning -> 1 : 0) <= THREADCOUNT);
    assert(running <= limit);
    assert(THREADCOUNT <= limit && parked <= LIMIT && starting <= LIMIT && nin <= NOPS && nready <= NOPS);
    assert(nin + nready + ntaken == added)    /* S2: every operation added is in exactly one place */
}

/* drainInboxLocked: [Q_DRAINQ] [IB_EMPTY], then [Q_DRAINALL] [IB_TAKEALL]: admit everything (A3: admitted is
 * ready). One access to the inbox (a push between the isEmpty and the exchange is taken by the exchange). */
inline drainInbox() {
    if
    :: nin > 0 ->
        k = 0;
        do
        :: k < NOPS ->
            if
            :: opst[k] == O_INBOX -> opst[k] = O_READY; nready++
            :: else -> skip
            fi;
            k++
        :: else -> break
        od;
        nin = 0; k = 0
    :: else -> skip
    fi
}

/* IdleWorkers.wakeOrSpawn, called by wakeOrSpawnLocked ([D_CALL]); wanted = running + ready.count. The hand-off
 * rule ([I_COMING] [I_TAKERCOMING]): nothing while a worker spins or `below` or more woken workers are on their way
 * (below: 1 for one event's operation, the room for a batch). */
#define TAKER_COMING(below) (spinning || wakeups >= (below))
inline wakeOrSpawn(a, below) {
    if
    :: CANDISPATCH && !TAKER_COMING(below) && inLine[0] ->   /* [I_GUARD] [I_COMING] [I_PARKEDQ] */
        inLine[0] = false; wakeups++; a = SIG0               /* [I_POP] [I_SIGNAL] */
#if LIMIT == 2
    :: CANDISPATCH && !TAKER_COMING(below) && inLine[1] ->
        inLine[1] = false; wakeups++; a = SIG0 + 1
#endif
    :: CANDISPATCH && !TAKER_COMING(below) && INLINE == 0 && THREADCOUNT < limit && THREADCOUNT < running + nready && !retryPending ->
        /* [I_SPAWNQ] */
        starting++; a = SPAWN                                /* [I_RESERVE] */
    :: else -> a = NONE
    fi
}

/* collectWakeActionsLocked: [C_ROOM] room = min(ready, limit - running), then [C_EACH] one decision per
 * operation that may start, stopping at the first .none ([C_NONE]). Each decision that acts publishes
 * ([D_PUBLISH] [H_STORE]): a step of its own, so an adder may read the word between two decisions. */
inline collect(sigs, nspawn) {
    atomic { room = (nready < limit - running -> nready : limit - running); below = room }  /* [SL_ROOM] */
    do
    :: atomic {
        room > 0 ->
        wakeOrSpawn(act2, below);                            /* [C_EACH]: inFlightBelow: the room */
        if
        :: act2 == NONE -> room = 0
        :: ISSIG(act2) -> sigs = sigs | (1 << (act2 - SIG0)); room--; hint = HINTW
        :: act2 == SPAWN -> nspawn++; room--; hint = HINTW
        fi;
        act2 = NONE; inv() }
    :: room == 0 -> break
    od
}

/* ThreadParker.unpark (cshim_parker_unpark, [C_UNPARK]), after unlocking: leaves a notification with worker w,
 * which wakes it if it sleeps, or lets its next park return at once (A2). */
inline unpark(w) {
#ifdef BROKEN_WAKE_ONLY_SLEEPERS
    /* A wake that only reaches a worker already asleep (a bare futex_wake, no notification kept): one sent
     * between the worker's unlock and its sleep is lost. */
    atomic { if :: asleep[w] -> asleep[w] = false; token[w] = true :: else -> skip fi }
#else
    atomic { token[w] = true }
#endif
}

/* WakePlan.unparkAll, after unlocking: each worker in the plan's bitmask, one step each. */
inline unparkAll(sigs) {
    if :: (sigs & 1) != 0 -> unpark(0) :: else -> skip fi;
#if LIMIT == 2
    if :: (sigs & 2) != 0 -> unpark(1) :: else -> skip fi;
#endif
    sigs = 0
}

/* threadFailedToStart: the failure path. */
inline spawnFailed() {
#ifdef BROKEN_SPAWN_FAILURE_STRANDS
    /* The code before the fix: give the place back, and nothing else (no retryPending, no drain, no wake, no
     * retry). Work added while the start was pending, and the work the start was for, is left to the next
     * event. */
    atomic { !mtx -> mtx = true; assert(starting > 0); starting--; hint = HINTW; inv(); mtx = false }
#else
    atomic {
        !mtx -> mtx = true;                                  /* [F_LOCK] */
        assert(starting > 0); starting--;                    /* [F_FREE] [I_FAILFREE] */
        retryPending = true;                                 /* [I_RETRYSET] */
        drainInbox();                                        /* [F_DRAIN] */
        inv()
    };
    collect(fsig, fspawn);                                   /* [F_COLLECT] */
    assert(fspawn == 0);                                     /* no thread is started while the retry is pending */
    atomic { hint = HINTW; inv(); mtx = false };             /* [F_PUBLISH], unlock */
    unparkAll(fsig);                                         /* [F_PERFORM] signals only */
    if
    :: atomic { timerFails < MAXTIMERFAIL -> timerFails++ }; /* the timer's thread could not start: [F_REMOVE] */
        atomic {
            !mtx -> mtx = true;                              /* [F_REFUSEDLOCK] */
#ifndef BROKEN_TIMER_FAILURE_STRANDS
            if
#ifndef BROKEN_ADDER_LEAVES_RETRY
            :: threads == 0 || !isWorker -> retries++        /* [F_CALLER] [I_INPLACEQ] [F_INPLACE] [S_RETRYINPLACE] (A5) */
            :: else -> retryPending = false; workerDrops = true  /* [I_DROP] a worker comes back, or the next event */
#else
            :: threads == 0 -> retries++                     /* the code before: in place only with no worker */
            :: else -> retryPending = false; workerDrops = isWorker
#endif
            fi;
#else
            retryPending = false;                            /* the old code: always dropped */
#endif
            hint = HINTW; inv(); mtx = false                 /* [F_REFUSEDPUBLISH], unlock */
        }
    :: atomic { retries++ }                                  /* [F_INSERT] */
    fi
#endif
}

/* spawnWorker, after unlocking ([P_SPAWN] [PP_SPAWNS]). */
inline spawnWorker() {
    if
    :: atomic { fails < MAXFAIL -> fails++ };                /* [S_SPAWN] throws */
        spawnFailed()                                        /* [S_FAILED] */
    :: atomic { assert(nworkers < LIMIT); run worker(nworkers); nworkers++ };   /* [S_SPAWN] the thread runs */
        atomic {
            !mtx -> mtx = true;                              /* [S_LOCK] */
            assert(starting > 0); starting--; threads++;     /* [S_STARTED] [I_STARTED] [I_THREADS] */
            hint = HINTW; inv();                             /* [S_PUBLISH] */
            mtx = false
        }
    fi
}

/* perform(action), after unlocking. */
inline perform(a) {
    if
    :: ISSIG(a) -> unpark(a - SIG0)                          /* [P_SIGNAL] [PA_SIGNAL] */
    :: a == SPAWN -> spawnWorker()                           /* [P_SPAWN] [PA_SPAWN] */
    :: else -> skip
    fi;
    a = NONE
}

/* ---------------------------------------------------------------------------------------------------------
 * worker(me): QueueCore.workerLoop, for ever (no shutdown: A3). Locked stretches are atomic steps with mtx
 * held throughout, cut after each access to the inbox or the hint word (A1). Every path that goes back to the
 * loop head ends with the head's drain ([W_LOOP] [W_DRAIN]) in its last locked step. */
proctype worker(byte me) {
    bool isWorker = true;                   /* ThreadContext.workerOf === this queue ([F_CALLER]) */
    byte act = NONE, act2 = NONE, room = 0, below = 0, fsig = 0, fspawn = 0, op = 0;
    bool maySpin = true, fin = false, drops = false, waits = false, forever = false, notified = false, popped = false;

    atomic { !mtx -> mtx = true; drainInbox(); inv() };       /* [W_LOCK] [W_LOOP] [W_DRAIN] */
    do
    :: atomic {
        CANDISPATCH ->                                       /* [W_CANDISPATCH]: BUSY */
        k = 0;                                               /* [W_TAKE] [TAKE_POP] (A3: the lowest ready id) */
        do :: opst[k] != O_READY -> k++ :: else -> break od;
        op = k; k = 0;
        assert(opst[op] == O_READY);                         /* S2: no operation taken twice */
        opst[op] = O_TAKEN; nready--; ntaken++;
        running++;                                           /* [TAKE_SLOT] [SL_TAKE] */
        if                                                   /* finishes, or never does (A3) */
        :: forever = false
#ifndef NO_FOREVER
        :: forever = true; stuck++
#endif
        fi;
#ifdef BROKEN_NO_HANDOFF_CHAIN
        act = NONE;                                          /* the woken worker does not decide the next wake */
#else
        wakeOrSpawn(act, 1);                                 /* [W_CHAIN] */
#endif
        if :: act != NONE -> hint = HINTW :: else -> skip fi;   /* [D_PUBLISH] */
        inv();
        maySpin = true; op = 0;                              /* [W_GOTWORK]; fin kept: [W_PERFORM] retires, [W_RELEASE] drops */
        mtx = false }                                        /* [W_UNLOCK] */
        perform(act);                                        /* [W_PERFORM] */
        if
        :: forever ->
end_busy:   false                                            /* [W_RUN] runs for ever: its slot stays taken */
        :: else -> skip                                      /* [W_RUN] finishes here (deferredFinish) */
        fi;
        atomic {
            !mtx -> mtx = true;                              /* [W_RELOCK] */
            assert(running > 0); running--;                  /* [W_UNLINK] [Q_FREESLOT] [SL_FREE] */
            fin = true; drops = true;                        /* [W_FINISHED] [W_DROPS] */
            drainInbox(); inv()                              /* continue: [W_DRAIN] */
        }
    :: !CANDISPATCH && fin ->                                /* [W_RELEASEQ] */
        atomic { fin = false; mtx = false };                 /* [W_RELEASE] unlocked */
        atomic { !mtx -> mtx = true; drainInbox(); inv() }   /* [W_RELEASELOCK], continue: [W_DRAIN] */
    :: !CANDISPATCH && !fin && maySpin && !spinning ->       /* [W_SPINQ]: width 1, budget > 0 (A4; any width here) */
        atomic {
            spinning = true;                                 /* [I_BEGINSPIN] */
            maySpin = false;                                 /* [W_SPINONCE] */
            hint = HINTW; inv();                             /* [W_SPINPUB] */
            mtx = false                                      /* [W_SPINUNLOCK] */
        };
        /* SPINNING: [W_SPIN] [W_SPINPOLL] without the lock, for any number of polls (A4): the relock below
         * may come at any point of the other processes' steps. */
        atomic {
            !mtx -> mtx = true;                              /* [W_SPINRELOCK] */
            assert(spinning); spinning = false;              /* [W_ENDSPIN] [I_ENDSPIN] */
            hint = HINTW; inv()                              /* [W_ENDSPINPUB] */
        };
        atomic { drainInbox(); inv() }                       /* [W_LOOKAGAIN] continue: [W_DRAIN] */
    :: !CANDISPATCH && !fin && drops ->                      /* no spin (budget 0, or another worker spins) */
        atomic { drops = false; mtx = false };               /* [W_DROPSQ] [W_DROPOUT] unlocked */
        atomic { !mtx -> mtx = true; drainInbox(); inv() }   /* [W_DROPLOCK], continue: [W_DRAIN] */
    :: !CANDISPATCH && !fin && !drops ->                     /* no spin: PARKED */
        atomic {
            assert(!token[me]);                              /* S3: no stale notification when joining the line */
            parked++; inLine[me] = true; hint = HINTW; inv() };   /* [W_PARKING] [I_PARKING] [I_JOINLINE] [W_PARKPUB] */
        atomic {
#ifdef BROKEN_NO_RECHECK
            waits = true;                                    /* parks without looking at the inbox again */
#else
            waits = (nin == 0);                              /* [W_RECHECK] [IB_EMPTY] */
#endif
            if
            :: waits -> mtx = false                          /* [W_PARKUNLOCK] */
            :: else -> skip
            fi
        };
        if
        :: waits ->
            /* [W_PARK] cshim_parker_park: [C_PARKFAULT] a spurious return, or [C_PARK] [C_PARKWAIT] [C_PARKTAKE]
             * take the notification, sleeping until there is one. */
#ifdef BROKEN_WAKE_ONLY_SLEEPERS
            atomic { asleep[me] = true };
#endif
end_park:   if
            :: atomic { token[me] -> token[me] = false; notified = true
#ifdef BROKEN_WAKE_ONLY_SLEEPERS
                        ; asleep[me] = false
#endif
                      }
            :: atomic { spur < MAXSPUR -> spur++; notified = false
#ifdef BROKEN_WAKE_ONLY_SLEEPERS
                        ; asleep[me] = false
#endif
                      }
            fi;
            atomic { !mtx -> mtx = true }                    /* [W_PARKRELOCK] */
        :: else -> notified = true                           /* [W_NOTIFIEDQ]: no park, nothing to take */
        fi;
        atomic {
            popped = !inLine[me];
            assert(parked > 0); parked--;                    /* [W_UNPARKED] [I_UNPARK] */
#ifdef BROKEN_SPURIOUS_COUNTS_AS_SIGNAL
            /* Every return from a park taken as a wakeup decided for this worker. */
            if :: inLine[me] -> inLine[me] = false :: else -> skip fi;
            assert(wakeups > 0); wakeups--;
#else
            if
            :: inLine[me] -> inLine[me] = false              /* [I_NOTPOPPED] [I_LEAVELINE]: not signalled */
            :: else -> assert(wakeups > 0); wakeups--        /* [I_CONSUME]: taken by a wake decision */
            fi;
#endif
            hint = HINTW; inv()                              /* [W_UNPARKPUB] */
        };
#ifndef BROKEN_STALE_NOTIFICATION
        if
        :: popped && !notified ->                            /* [W_ABSORBQ]: popped, but the park was spurious */
            atomic { mtx = false };                          /* [W_ABSORBUNLOCK] */
            atomic { token[me] -> token[me] = false };       /* [W_ABSORB]: park until the waker's notification */
            atomic { !mtx -> mtx = true }                    /* [W_ABSORBRELOCK] */
        :: else -> skip
        fi;
#endif
        atomic { maySpin = true; waits = false; notified = false; popped = false; drainInbox(); inv() }   /* [W_WOKE], continue: [W_DRAIN] */
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * adder(first, n): n calls of addOperation (the lock-free hot path, pushClaimed), operations first..first+n-1. */
proctype adder(byte first; byte n) {
    bool isWorker = false;
    byte i = 0, act = NONE, act2 = NONE, room = 0, below = 0, fsig = 0, fspawn = 0;
    do
    :: i < n ->
        atomic { assert(opst[first + i] == O_NEW); opst[first + i] = O_INBOX; nin++; added++; i++ };  /* [A_PUSH] [IB_CAS] */
        if
        :: NEEDS_WAKE ->                                     /* [A_NEEDS] [H_LOAD] */
            atomic { !mtx -> mtx = true; drainInbox(); inv() };                 /* [A_LOCK] [Q_LOCKADMIT] */
            atomic {
                wakeOrSpawn(act, 1);                         /* [A_DECIDE] */
                if :: act != NONE -> hint = HINTW :: else -> skip fi;           /* [D_PUBLISH] */
                inv();
                mtx = false                                  /* [A_UNLOCK] */
            };
            perform(act)                                     /* [A_PERFORM] */
        :: else -> skip
        fi
    :: else -> break
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * timer(): the process timer's thread, as far as this queue goes: fires each scheduled SpawnRetry, at any time
 * after it was inserted (A5). */
proctype timer() {
    bool isWorker = false;
    byte act = NONE, act2 = NONE, room = 0, below = 0, fsig = 0, fspawn = 0, nsig = 0, nspawn = 0;
end_idle:
    do
    :: atomic {
        retries > 0 && !mtx -> retries--;                    /* [T_FIRE] */
        mtx = true;                                          /* [R_LOCK] */
        retryPending = false;                                /* [R_STARTED] [I_RETRYSTARTED] */
#ifndef BROKEN_RETRY_DRAIN_BEFORE_PUBLISH
        hint = HINTW; inv()                                  /* [R_PUBLISH_FIRST] publish, then drain */
       };
       atomic {
#endif
        drainInbox(); inv()                                  /* [R_DRAIN] */
       };
       collect(nsig, nspawn);                                /* [R_COLLECT] */
       atomic { hint = HINTW; inv(); mtx = false };          /* [R_PUBLISH], unlock */
       unparkAll(nsig);                                      /* [R_PERFORM] [PP_SIGNALS] */
       do                                                    /* [PP_SPAWNS] */
       :: nspawn > 0 -> spawnWorker(); nspawn--
       :: else -> break
       od
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * quiescence(): runs once nothing else can move (`timeout`: adders done, timer idle with no retry scheduled,
 * every worker parked or busy for ever) and checks P1. */
active proctype quiescence() {
    timeout ->
    atomic {
        assert(!mtx);
        assert(added == NOPS);
        assert(ALL_RAN)                                      /* P1 */
    }
}

#ifdef RAISE_WIDTH
/* ---------------------------------------------------------------------------------------------------------
 * widener(): one call of setMaxConcurrentOperationCount raising the width from 1 to LIMIT (-DRAISE_WIDTH). */
proctype widener() {
    bool isWorker = false;
    byte act2 = NONE, room = 0, below = 0, nsig = 0, nspawn = 0, fsig = 0, fspawn = 0;
    atomic { !mtx -> mtx = true; drainInbox(); inv() };      /* [WD_ADMIT] lockAndAdmit: lock, drain */
    atomic { limit = LIMIT; hint = HINTW; inv() };           /* [WD_SET] [WD_PUBLISH] */
#ifndef BROKEN_WIDTH_DRAIN_BEFORE_PUBLISH
    atomic { drainInbox(); inv() };                          /* [WD_DRAIN] adds that saw the old hint */
#endif
    collect(nsig, nspawn);                                   /* [WD_COLLECT] */
    atomic { mtx = false };
    unparkAll(nsig);                                         /* [WD_PERFORM] [PP_SIGNALS] */
    do                                                       /* [PP_SPAWNS] */
    :: nspawn > 0 -> spawnWorker(); nspawn--
    :: else -> break
    od
}
#endif

init {
    atomic {
#ifdef RAISE_WIDTH
        run widener();
#endif
        run timer();
        run adder(0, OPS0);
#if ADDERS == 2
        run adder(OPS0, OPS1);
#endif
    }
}

/* P2, for the progress run (pan -a): all runs are finite, so this checks each run's final (stuttering) state. */
ltl all_run { <> [] ALL_RAN }
