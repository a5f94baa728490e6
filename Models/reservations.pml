/* reservations.pml: the queue's reservation protocol (FastPath/Reservations: a worker that takes an operation
 * reserves the next few for its own slot and runs them after it without the lock; reserved operations are taken
 * back when a slot comes free) and how it meets suspension, width changes, shutdown's resume and operations that
 * finish on another thread, checked with SPIN 6.5.
 *
 * WHAT IS MODELLED
 *   An adder adds OPS0 operations in one batch (addOperations, default 3), then OPS1 one by one (default 0):
 *   NOPS = 3. The width starts at WIDTH = 2. Worker threads are started by the wake decisions, up to the width
 *   (at most MAXW = 3, after a width change to 3). A worker takes the best ready operation, decides whom to wake
 *   for what is left, and, if that decision woke or started nobody, reserves up to RESLIMIT = 2 more; after
 *   unlocking it runs the one it took, then claims the reserved ones one by one (without the lock), then relocks
 *   to settle its reservation and its operations. Each operation it takes either finishes on it, or never returns
 *   (the worker stays busy for ever and keeps its slot), or is a concurrent operation whose start() returns while
 *   it still executes, finishing later on another thread (a finisher process: operationDidFinish) or never; a
 *   reserved one (a plain block operation) finishes on the worker or never. A controller process makes the
 *   user's calls in any order, at most NEVENTS = 2 of them in all: isSuspended = true (NSUSPEND = 1), then maybe
 *   isSuspended = false, one setMaxConcurrentOperationCount to 1 or 3 (NWIDTH = 1), one shutdown(.drain)
 *   (NSHUT = 1), at any time, then stops.
 *   State: ready.count, slots (running, limit, suspended), the lifecycle's draining bit, the thread count, the idle
 *   line and wakeupsInFlight, reservationHolders, each worker's Reservation (slots, count, next, epoch,
 *   mayHold), batchEpoch, and each operation's place (ghost).
 *
 * ABSTRACTIONS (everything the model leaves out or simplifies)
 *   A1 Mutex and atomics: QueueCore.lock is `mtx`; each locked stretch is one atomic step. Lock-free accesses:
 *      Reservation.next (the owner's compare-and-swap, the reclaimer's exchange under the lock) and batchEpoch (the
 *      owner's load before each claim, the events' increments under the lock). claimReserved's load of next, its
 *      epoch check and its compare-and-swap are one step ([CL_LOAD] [CL_EPOCHQ] [CL_CAS]): the interleavings
 *      this leaves out reach the same states (an increment or a reclaim between the check and the swap makes the
 *      swap succeed, as before the increment, or fail, as after the reclaim; next is reset only by its owner, so
 *      no ABA). Its give-way path takes the lock in the same step as the epoch check (if a reclaim came in
 *      between, the return finds nothing, as it would). Sequentially consistent; Swift's orderings are not
 *      checked.
 *   A2 Adds: each add is one locked step (the batch: admitBatchLocked and collectWakeActionsLocked; a single add:
 *      pushedToInbox's lockAndAdmit and one wake decision). The lock-free inbox and the IdleHints word that decide
 *      whether an add locks at all are queue-workers.pml's (an add that does not lock leaves a worker that will
 *      look, or a taker on its way, to admit it). Adds after the shutdown are refused (the inbox is closed).
 *   A3 Idle, park and wake (queue-workers.pml checks them): a parked worker is in the idle line until a decision
 *      takes it out (any one of the line: FIFO with a CPU preference in Swift); the unpark after unlocking is
 *      merged into the decision (the worker may come back at any later time, which covers every interleaving of a
 *      separate unpark); no spurious returns, no spinning (only at width 1; a spin looks again under the lock
 *      before parking, which can only help), no park-time inbox recheck. The unlocked gaps a worker takes before
 *      parking (releasing finished operations, dropping outstanding counts) are left out: each is followed by
 *      another look under the lock ([W_RECLAIM] included), which can only help. Thread starts never fail (no
 *      retryPending, no SpawnRetry; see finding R2 below). Workers never exit (shutdown's stopping, wakeAll and
 *      joins are left out: they come only once the queue has no members, when nothing is left to strand).
 *   A4 Reservations: plain, identical operations (no priorities, so noteAdded/noteReadyLocked, the floor and the
 *      epoch bumps they make are left out; a worker takes and reserves the lowest-numbered ready ones). Which
 *      operations qualify (plain SpindleBlockOperations, no waiters, not barriers) and the backlog threshold are
 *      one nondeterministic choice: a worker reserves any number up to RESLIMIT ([RV_LOOP]) while more operations
 *      are ready than slots are free after its take (limit - running). That is the Swift threshold (16 x limit)
 *      scaled down to what it guarantees: what the worker leaves in the buckets can fill every other free slot,
 *      so the wake chain (each worker that takes an operation wakes the next) reaches every free slot before the
 *      buckets run dry. With a threshold of 0 the model strands reserved operations behind a worker whose wake
 *      decision counted on a taker that then took a later add; with the Swift threshold that needs a backlog
 *      shorter than the slots, which cannot be reserved from. batchSize (8: 7 reserved) is RESLIMIT + 1.
 *   A5 Running: an operation's run is not a step of its own: it finishes (or goes concurrent, or blocks for ever)
 *      in the step that starts it (the take's unlock, or the claim); the worker's relock is a step of its own, so
 *      every event may come between an operation's end and its worker's bookkeeping. Dependencies, readiness
 *      (admitted = ready), barriers, cancellation, shutdown(.cancel) (and the `cancelling` guard before
 *      reserveLocked), bounded queues, batch waits, hooks, statistics, references and the outstanding count
 *      are left out.
 *   A6 Lifecycle: shutdown(.drain) only: it closes the inbox (later adds are refused), and resumes a suspended
 *      queue ([SD_SUSPENDEDQ]). A suspension after the shutdown is ignored (but still bumps the epoch), as in
 *      Swift.
 *   A7 Ghost state: each operation's place (new, ready, reserved, running, concurrent, finished, done, refused),
 *      the counts of reserved and executing operations. A reservation's count, next and epoch are set back to 0
 *      when its owner settles it (empty either way: next == count).
 *   A8 Bounds (defaults): OPS0 3, OPS1 0, WIDTH 2, RESLIMIT 2, NEVENTS 2 (of NSUSPEND 1, NWIDTH 1, NSHUT 1). Each
 *      of the four stranding bugs needs 3 operations and at most 2 calls. Larger bounds that also pass are in
 *      Models/README.md.
 *
 * RULE R1 (the fix of finding R1): a worker reserves only behind a taken operation that is a plain block operation
 *   ([RV_PLAIN]: `reserveLocked(_:behind:afterWaking:)`), which always finishes on the worker that starts it. The
 *   take chooses what it took: a plain block operation (finishes on the worker, or never) or any other operation
 *   (also: a concurrent one whose start() returns while it still executes, finishing later on another thread or
 *   never); only the first may reserve. -DBROKEN_RESERVE_BEHIND_ANY is the code before the fix (fails S1).
 *
 * PROPERTIES
 *   Safety (assertions; run with -DSAFETY, plus invalid end states):
 *     S1 after every locked step and every claim: every operation executing holds a slot (nexec <= running: a
 *        reserved operation runs in its worker's slot, held by the operation the worker took);
 *        reservationHolders is the number of reservations that may hold; no counter wraps.
 *     S2 no operation runs twice or is lost: a worker takes only a ready operation and claims only one still
 *        reserved; a return gives back only reserved ones; after every locked step the counts of ready, reserved
 *        and executing operations match the operations' states.
 *     P1 "a free slot runs a ready or reserved operation even if other operations never finish", at quiescence
 *        (`timeout`: the adder and the controller done, every worker parked or busy for ever, every finisher
 *        done): every operation was added (or refused), and none is ready or reserved unless the queue is
 *        suspended or all `limit` slots are taken. S3 there: running == executing operations (each slot is held
 *        by one that runs for ever).
 *        Valid end states: a worker parked (end_park), a worker busy for ever (end_busy).
 *   Progress (LTL; pan -a, no fairness needed: every run is finite, so the formula is checked on each run's
 *   final state, stutter-extended):
 *     ltl free_slot_runs: <> [] ALL_OK (P1 as a formula).
 *
 * FINDING R1 (a real bug, found here and by a code review at the same time; fixed by RULE R1; test:
 *   QueueReservationLimitsTests.nothingIsReservedBehindAnOperationThatHoldsItsSlot): runNextUnlocking claimed and
 *   ran the reserved operations whether or not the operation it took finished on the worker. A concurrent operation whose start() returned still holds the one slot the batch runs in, so the
 *   batch's operations run beside it: more operations execute than the width (on a serial queue, up to 7 block
 *   operations run while a concurrent one executes), and when the concurrent one finishes elsewhere
 *   operationDidFinish frees that slot while the batch still runs in it, so yet more can start. Needs a taken
 *   concurrent operation with a backlog of more than 16 x width ready behind it. -DBROKEN_RESERVE_BEHIND_ANY
 *   prints the trace.
 *
 * FINDING R2 (not modelled: needs a thread start that fails; fixed: spawnRetried now calls
 *   reclaimForFreeSlotLocked after its admission): spawnRetried did not reclaim: a worker that reserved while the retry was pending (its wake decision started nobody), busy for
 *   ever, with the other live workers also busy for ever and the ready buckets empty, keeps its reservation past
 *   the retry, whose collectWakeActionsLocked sees nothing ready and starts no thread although a slot is free.
 *
 * OPTIONS
 *   -DRESERVE_AFTER_WAKING      reserveLocked ignores its wake: a take that woke or started a worker reserves too
 *                               ([RV_WOKE] missing). Passes: the guard is about latency (BENCHMARKS.md, "A burst's
 *                               reserved operations"), not liveness. With the threshold of A4 it changes nothing
 *                               below 4 operations; at -DOPS0=1 -DOPS1=3 it reserves after waking and passes.
 *   STALLED RECLAIM (not modelled): since the review that found R1, every take first takes back another worker's
 *   reservation whose owner claimed nothing since the previous take looked (reclaimStalledReservationsLocked). It
 *   is one more caller of the return checked here ([RC_EACH]'s returnRes), under the lock, so it can only take
 *   reserved work back sooner; leaving it out keeps the reclaims this model must prove enough on their own.
 *   -DOPS0, -DOPS1, -DWIDTH, -DRESLIMIT, -DNSUSPEND, -DNWIDTH, -DNSHUT, -DNEVENTS: the bounds (A8).
 *
 * BROKEN VARIANTS (each must make pan report errors)
 *   -DBROKEN_NO_RECLAIM_ON_FINISH           operationDidFinish does not reclaim ([OF_RECLAIM] missing): a
 *                                           concurrent operation finishing on another thread frees a slot while
 *                                           the other worker is parked (it parked with no slot free) and the only
 *                                           work left is reserved behind a worker busy for ever.
 *   -DBROKEN_NO_RECLAIM_ON_RESUME           the resume does not reclaim ([SC_RECLAIM] missing): a worker whose
 *                                           operation finished while the queue was suspended parked without
 *                                           reclaiming (no free slot while suspended).
 *   -DBROKEN_NO_RECLAIM_ON_WIDTH            a width change does not reclaim ([WC_RECLAIM] missing): the width
 *                                           raised to 3 with both workers busy (one for ever with an operation
 *                                           reserved): nothing is ready, so no third thread starts.
 *   -DBROKEN_NO_RECLAIM_ON_SHUTDOWN_RESUME  shutdown's resume does not reclaim ([SD_RECLAIM] missing): as the
 *                                           resume.
 *   -DBROKEN_NO_IDLE_RECLAIM                a worker with nothing ready parks without taking back the others'
 *                                           reservations ([W_RECLAIM] missing).
 *   -DBROKEN_RESERVE_BEHIND_ANY             RULE R1 missing (finding R1): a reservation behind a concurrent
 *                                           operation runs beside it, in the slot it still holds (S1; safety
 *                                           only: nothing is stranded).
 *   -DBROKEN_CLAIM_NOT_ATOMIC               the claim loads next and stores next + 1 (no compare-and-swap): a
 *                                           reclaim in between puts the operation back in the buckets while its
 *                                           owner runs it (S2; safety only: it runs twice, nothing is stranded).
 *   The four reclaim bugs and the idle one are caught by P1 in the safety run and by free_slot_runs in the
 *   progress run with assertions off (pan -a -A).
 *
 * STEPS AND THE SWIFT LINES THEY STAND FOR (checked by .ci/check-models)
 */
/* [AB_LOCK]         PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:154 "core.lockAndAdmit()" */
/* [AB_REFUSE]       PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:155 "guard core.lifecycle.acceptsWork else {" */
/* [AB_ADMIT]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:54 "self.admitBatchLocked(operations)  // 1. member list, gate, buckets, statistics" */
/* [AB_COLLECT]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:55 "after.wake = self.collectWakeActionsLocked()  // 2. one wake per operation that can start now" */
/* [A_PUSH]          PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:273 "guard core.pushToInbox(operation) else { return false }" */
/* [A_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:25 "self.lockAndAdmit()  // 1. admit the inbox, the push among it" */
/* [A_DECIDE]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:26 "let wake = self.wakeOrSpawnLocked()  // 2. whom to wake" */
/* [D_CALL]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:18 "let action = self.idle.wakeOrSpawn(" */
/* [C_ROOM]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:33 "let room = self.slots.room(ready: self.ready.count)" */
/* [C_EACH]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:35 "let action = self.wakeOrSpawnLocked(inFlightBelow: room)" */
/* [C_NONE]          PIN Sources/Spindle/Queue/QueueCore+Wake.swift:36 "if action == .none { break }" */
/* [I_GUARD]         PIN Sources/Spindle/Queue/State/IdleWorkers.swift:133 "guard canDispatch, !shuttingDown else { return .none }" */
/* [I_COMING]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:145 "if self.takerComing(inFlightBelow: inFlightBelow) { return .none }" */
/* [I_PARKEDQ]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:146 "if let first = self.popIdle(preferring: wakerCPU) {" */
/* [I_SIGNAL]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:147 "self.wakeupsInFlight += 1" */
/* [I_SPAWNQ]        PIN Sources/Spindle/Queue/State/IdleWorkers.swift:151 "if count < limit && count < wanted && !self.retryPending {" */
/* [I_RESERVE]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:152 "self.starting += 1  // reserved now, so concurrent decisions do not overshoot" */
/* [I_CONSUME]       PIN Sources/Spindle/Queue/State/IdleWorkers.swift:265 "self.wakeupsInFlight -= 1" */
/* [SL_HASFREE]      PIN Sources/Spindle/Queue/State/DispatchSlots.swift:29 "var hasFreeSlot: Bool { self.running < self.limit && !self.suspended }" */
/* [SL_CANDISPATCH]  PIN Sources/Spindle/Queue/State/DispatchSlots.swift:33 "func canDispatch(ready: Int) -> Bool { ready > 0 && self.hasFreeSlot }" */
/* [SL_ROOM]         PIN Sources/Spindle/Queue/State/DispatchSlots.swift:36 "func room(ready: Int) -> Int { self.suspended ? 0 : max(0, min(ready, self.limit - self.running)) }" */
/* [SL_TAKE]         PIN Sources/Spindle/Queue/State/DispatchSlots.swift:41 "self.running += 1" */
/* [SL_FREE]         PIN Sources/Spindle/Queue/State/DispatchSlots.swift:48 "self.running -= 1" */
/* [W_LOCK]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:47 "self.lock.lock()" */
/* [W_REGISTER]      PIN Sources/Spindle/Queue/QueueCore+Workers.swift:48 "self.reservations.append(worker.reservation)" */
/* [W_LOOP]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:49 "while !self.shuttingDown {" */
/* [W_CANDISPATCH]   PIN Sources/Spindle/Queue/QueueCore+Workers.swift:51 "if self.canDispatchLocked {" */
/* [W_RUNNEXT]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:52 "self.runNextUnlocking(&worker, context)  // BUSY; back under the lock after" */
/* [W_RECLAIM]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:55 "if self.slots.hasFreeSlot && self.reclaimReservationsLocked() {" */
/* [W_PARK]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:79 "self.parkUnlocking(&worker)  // PARKED; back under the lock after" */
/* [W_TAKE]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:94 "let op = self.takeNextLocked()  // 1. the queue's reference is ours now" */
/* [W_DECIDE]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:96 "let wake = self.wakeOrSpawnLocked()  // 2. whom to wake for what is left" */
/* [W_RESERVE]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:97 "if !cancelling { self.reserveLocked(worker.reservation, behind: op, afterWaking: wake) }  // 3. the next few, maybe" */
/* [W_UNLOCK]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:99 "self.lock.unlock()" */
/* [W_RUN]           PIN Sources/Spindle/Queue/QueueCore+Workers.swift:106 "let deferredFinish = self.runOnWorker(op, context)" */
/* [W_CLAIM]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:110 "while let next = self.claimReserved(worker.reservation, unlessWaitedOn: justRan, lateSince: lateSeen) {" */
/* [W_RUNRESERVED]   PIN Sources/Spindle/Queue/QueueCore+Workers.swift:112 "let done = self.runOnWorker(next, context)" */
/* [W_RESDONE]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:113 "precondition(done, "QueueCore: a reserved block operation did not finish on its worker")" */
/* [W_RELOCK]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:125 "self.lock.lock()" */
/* [W_SETTLE]        PIN Sources/Spindle/Queue/QueueCore+Workers.swift:126 "self.settleReservationLocked(worker.reservation)" */
/* [W_SETTLERUN]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:127 "self.settleRunLocked(op, finishedHere: deferredFinish, into: &worker.pending)" */
/* [W_UNLINKRES]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:132 "_ = self.unlinkFinishedLocked(x, freesSlot: false, into: &worker.pending)" */
/* [PK_LINE]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:168 "self.idle.parking(parker)" */
/* [PK_UNLOCK]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:172 "self.lock.unlock()" */
/* [PK_PARK]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:173 "notified = parker.park()" */
/* [PK_RELOCK]       PIN Sources/Spindle/Queue/QueueCore+Workers.swift:174 "self.lock.lock()" */
/* [PK_UNPARKED]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:176 "let signalled = self.idle.unparked(parker)" */
/* [SR_FINISHED]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:205 "_ = op._withUnsafeGuaranteedRef { self.unlinkFinishedLocked($0, into: &after) }" */
/* [SR_HANDBACK]     PIN Sources/Spindle/Queue/QueueCore+Workers.swift:208 "} else if !op._withUnsafeGuaranteedRef({ QueueCore.handBackLocked($0) }) {" */
/* [TK_POP]          PIN Sources/Spindle/Queue/QueueCore+Workers.swift:218 "let link = self.ready.popHighest()!" */
/* [TK_SLOT]         PIN Sources/Spindle/Queue/QueueCore+Workers.swift:219 "self.stats.noteRunning(self.slots.take())" */
/* [W_DEFER]         PIN Sources/Spindle/Operations/SpindleOperation.swift:309 "context.deferredFinish = true" */
/* [Q_FREESLOT]      PIN Sources/Spindle/Queue/QueueCore.swift:304 "if freesSlot { self.slots.free() }" */
/* [RV_WOKE]         PIN Sources/Spindle/Queue/FastPath/Reservations.swift:82 "guard wake == .none else { return }" */
/* [RV_PLAIN]        PIN Sources/Spindle/Queue/FastPath/Reservations.swift:85 "type(of: $0) == SpindleBlockOperation.self && !$0.hasWaiters.load(ordering: .relaxed)" */
/* [RV_THRESHOLD]    PIN Sources/Spindle/Queue/FastPath/Reservations.swift:90 "guard self.ready.count > threshold else { return }" */
/* [RV_LOOP]         PIN Sources/Spindle/Queue/FastPath/Reservations.swift:93 "while count < QueueCore.batchSize - 1 && self.ready.count > threshold, let link = self.ready.peekHighest() {" */
/* [RV_REMOVE]       PIN Sources/Spindle/Queue/FastPath/Reservations.swift:101 "self.ready.remove(link)" */
/* [RV_MOVE]         PIN Sources/Spindle/Queue/FastPath/Reservations.swift:103 "op.placement.move(to: .reserved)  // the reservation holds the queue's reference now" */
/* [RV_COUNT]        PIN Sources/Spindle/Queue/FastPath/Reservations.swift:112 "reservation.count = count" */
/* [RV_EPOCH]        PIN Sources/Spindle/Queue/FastPath/Reservations.swift:113 "reservation.epoch = self.batchEpoch.load(ordering: .sequentiallyConsistent)" */
/* [RV_PUBLISH]      PIN Sources/Spindle/Queue/FastPath/Reservations.swift:114 "reservation.next.store(0, ordering: .releasing)" */
/* [RV_MAYHOLD]      PIN Sources/Spindle/Queue/FastPath/Reservations.swift:116 "reservation.mayHold = true" */
/* [RV_HOLDERS]      PIN Sources/Spindle/Queue/FastPath/Reservations.swift:117 "self.reservationHolders += 1" */
/* [W_WAITER]        PIN Sources/Spindle/Queue/FastPath/Reservations.swift:138 "if QueueCore.someoneWaits(onJustRun: justRan, lateSince: lateSeen) { return nil }" */
/* [CL_LOAD]         PIN Sources/Spindle/Queue/FastPath/Reservations.swift:135 "let index = reservation.next.load(ordering: .acquiring)" */
/* [CL_EMPTY]        PIN Sources/Spindle/Queue/FastPath/Reservations.swift:136 "guard index < reservation.count else { return nil }" */
/* [CL_EPOCHQ]       PIN Sources/Spindle/Queue/FastPath/Reservations.swift:139 "if self.batchEpoch.load(ordering: .sequentiallyConsistent) != reservation.epoch {" */
/* [CL_GIVEWAY]      PIN Sources/Spindle/Queue/FastPath/Reservations.swift:140 "self.lock.withLock { self.returnReservationLocked(reservation) }" */
/* [CL_CAS]          PIN Sources/Spindle/Queue/FastPath/Reservations.swift:143 "let (won, _) = reservation.next.compareExchange(" */
/* [CL_WON]          PIN Sources/Spindle/Queue/FastPath/Reservations.swift:145 "guard won, let link = reservation.slots[index] else { return nil }" */
/* [CL_DISPATCH]     PIN Sources/Spindle/Queue/FastPath/Reservations.swift:146 "link._withUnsafeGuaranteedRef { QueueCore.markDispatching($0) }" */
/* [RT_MAYHOLD]      PIN Sources/Spindle/Queue/FastPath/Reservations.swift:153 "if reservation.mayHold {" */
/* [RT_HOLDERS]      PIN Sources/Spindle/Queue/FastPath/Reservations.swift:155 "self.reservationHolders -= 1" */
/* [RT_EXCHANGE]     PIN Sources/Spindle/Queue/FastPath/Reservations.swift:157 "let from = reservation.next.exchange(reservation.count, ordering: .acquiringAndReleasing)" */
/* [RT_PUSHFRONT]    PIN Sources/Spindle/Queue/FastPath/Reservations.swift:164 "self.ready.pushFront(link, level: op.queuePriority.bucket)" */
/* [RC_HOLDERSQ]     PIN Sources/Spindle/Queue/FastPath/Reservations.swift:174 "guard self.reservationHolders > 0 else { return false }" */
/* [RC_EACH]         PIN Sources/Spindle/Queue/FastPath/Reservations.swift:175 "for reservation in self.reservations where reservation.mayHold {" */
/* [RF_COND]         PIN Sources/Spindle/Queue/FastPath/Reservations.swift:187 "if self.reservationHolders > 0 && self.slots.hasFreeSlot { _ = self.reclaimReservationsLocked() }" */
/* [ST_SETTLE]       PIN Sources/Spindle/Queue/FastPath/Reservations.swift:215 "if reservation.mayHold { self.returnReservationLocked(reservation) }" */
/* [INV_EPOCH]       PIN Sources/Spindle/Queue/FastPath/Reservations.swift:221 "self.batchEpoch.add(1, ordering: .sequentiallyConsistent)" */
/* [OF_FINISH]       PIN Sources/Spindle/Operations/SpindleOperation.swift:313 "queue._withUnsafeGuaranteedRef { $0.core.operationDidFinish(self) }" */
/* [OF_LOCK]         PIN Sources/Spindle/Queue/QueueCore+Events.swift:115 "self.lock.lock()" */
/* [OF_UNLINK]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:116 "let dropsReference = self.unlinkFinishedLocked(op, into: &after)  // 1. the finish bookkeeping" */
/* [OF_RECLAIM]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:118 "self.reclaimForFreeSlotLocked()  // its slot is free: reserved operations may take it" */
/* [OF_DECIDE]       PIN Sources/Spindle/Queue/QueueCore+Events.swift:119 "after.wake.add(self.wakeOrSpawnLocked())  // 2. whom to wake" */
/* [SC_CALL]         PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:348 "self.core.perform(self.core.suspensionChanged(to: newValue))" */
/* [SC_ADMIT]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:197 "self.lockAndAdmit()  // 1. admit the inbox" */
/* [SC_SET]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:199 "if !(suspended && self.lifecycle.isShutDown) { self.slots.setSuspended(suspended) }" */
/* [SC_INVALIDATE]   PIN Sources/Spindle/Queue/QueueCore+Events.swift:200 "self.invalidateReservations()  // 3. reserved operations give way" */
/* [SC_RESUMEQ]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:201 "if !suspended {  // 4. resuming: reserved operations come back if a slot is free, then whom to wake" */
/* [SC_RECLAIM]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:202 "self.reclaimForFreeSlotLocked()" */
/* [SC_COLLECT]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:203 "after.wake = self.collectWakeActionsLocked()" */
/* [WC_CALL]         PIN Sources/Spindle/Queue/SpindleOperationQueue.swift:338 "self.core.perform(self.core.widthChanged(requested: value))" */
/* [WC_ADMIT]        PIN Sources/Spindle/Queue/QueueCore+Events.swift:183 "self.lockAndAdmit()  // 1. admit the inbox" */
/* [WC_SET]          PIN Sources/Spindle/Queue/QueueCore+Events.swift:184 "self.slots.setWidth(requested: requested, resolved: QueueCore.resolve(requested))  // 2. the slots" */
/* [WC_INVALIDATE]   PIN Sources/Spindle/Queue/QueueCore+Events.swift:185 "self.invalidateReservations()  // 3. reserved operations give way, and come back if a slot is free" */
/* [WC_RECLAIM]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:186 "self.reclaimForFreeSlotLocked()" */
/* [WC_COLLECT]      PIN Sources/Spindle/Queue/QueueCore+Events.swift:189 "after.wake = self.collectWakeActionsLocked()  // 6. one wake per operation that can start now" */
/* [SD_CALL]         PIN Sources/Spindle/Queue/SpindleOperationQueue+Lifecycle.swift:38 "let (cancel, after) = core.shutdownRequested(mode == .drain ? .drain : .cancel)" */
/* [SD_ADMIT]        PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:20 "self.lockAndAdmit()  // 1. admit the inbox" */
/* [SD_CLOSE]        PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:21 "self.admitInboxChainLocked(self.inbox.closeTakingAll())  // 2. close it: later pushes fail" */
/* [SD_REQUEST]      PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:22 "if self.lifecycle.request(mode) {  // 3. running → draining/cancelling, draining → cancelling" */
/* [SD_SUSPENDEDQ]   PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:25 "if self.slots.suspended {  // 5. a suspended queue resumes (reserved operations come back if a slot is free)" */
/* [SD_RESUME]       PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:26 "self.slots.setSuspended(false)" */
/* [SD_INVALIDATE]   PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:27 "self.invalidateReservations()" */
/* [SD_RECLAIM]      PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:28 "self.reclaimForFreeSlotLocked()" */
/* [SD_COLLECT]      PIN Sources/Spindle/Queue/QueueCore+Lifecycle.swift:41 "after.wake = self.collectWakeActionsLocked()  // 7. whom to wake for what can start now" */

#ifndef OPS0
#define OPS0 3                              /* operations added in one batch (addOperations) */
#endif
#ifndef OPS1
#define OPS1 0                              /* operations added one by one after it */
#endif
#define NOPS (OPS0 + OPS1)                  /* 3 or 4 (ALL_OK below names each one) */
#if NOPS < 3 || NOPS > 4
#error "reservations.pml: OPS0 + OPS1 must be 3 or 4"
#endif
#ifndef WIDTH
#define WIDTH 2                             /* the width to begin with (maxConcurrentOperationCount) */
#endif
#ifndef RESLIMIT
#define RESLIMIT 2                          /* operations a worker may reserve (batchSize - 1 in Swift: 7) */
#endif
#ifndef NSUSPEND
#define NSUSPEND 1                          /* suspensions (isSuspended = true), each may be followed by a resume */
#endif
#ifndef NWIDTH
#define NWIDTH 1                            /* width changes, each to 1 or 3 */
#endif
#ifndef NSHUT
#define NSHUT 1                             /* shutdown(.drain) calls: 0 or 1 */
#endif
#ifndef NEVENTS
#define NEVENTS 2                           /* the controller's calls in all */
#endif
#define MAXW 3                              /* the widest width, so the most threads */
#define NOP 255                             /* no operation */

/* Operation states (ghost identity; A4). */
#define O_NEW     0                         /* not added yet */
#define O_READY   1                         /* in the ready buckets (placement ready) */
#define O_RESV    2                         /* in a worker's reservation, unclaimed (placement reserved) */
#define O_RUN     3                         /* taken or claimed by a worker, executing on it (start() not returned) */
#define O_ASYNC   4                         /* a concurrent operation whose start() returned: executing elsewhere */
#define O_FIN     5                         /* finished on its worker, which has not done its bookkeeping yet */
#define O_DONE    6                         /* finished and unlinked */
#define O_REFUSED 7                         /* added after the shutdown: refused (the inbox is closed) */

/* ---- Shared state, under `mtx` (QueueCore.lock) except rnext (Reservation.next: atomic) and epoch
 * (batchEpoch: atomic). ---- */
bool mtx = false;                           /* QueueCore.lock held (A1) */
byte limit = WIDTH;                         /* slots.limit */
bool suspended = false;                     /* slots.suspended */
byte running = 0;                           /* slots.running */
byte nready = 0;                            /* ready.count */
byte nresv = 0;                             /* operations reserved and not claimed (ghost) */
bool shut = false;                          /* lifecycle: draining (shutdown(.drain) requested; A6) */
byte nthreads = 0;                          /* idle.threadCount: worker threads started (none ever exit: A6) */
bool inLine[MAXW];                          /* worker w parked in the idle line, not taken by a wake decision */
byte wakeups = 0;                           /* idle.wakeupsInFlight: workers taken by a decision, not back yet */
byte holders = 0;                           /* reservationHolders */
bool rmay[MAXW];                            /* reservation w's mayHold */
byte rcount[MAXW];                          /* reservation w's count */
byte rnext[MAXW];                           /* reservation w's next (atomic) */
byte repoch[MAXW];                          /* reservation w's epoch */
byte rslot[MAXW * RESLIMIT];                /* reservation w's slots: operation ids */
byte epoch = 0;                             /* batchEpoch (atomic) */
byte opst[NOPS];                            /* each operation's state (ghost) */

/* ---- Scratch, used only inside atomic steps and left at 0. ---- */
byte k = 0, j = 0, room = 0, below = 0, act = 0, from = 0;

/* ---- Ghost state. ---- */
byte nexec = 0;                             /* operations executing: O_RUN + O_ASYNC */
byte nadded = 0;                            /* adds made (accepted or refused) */

#define HASFREE     (running < limit && !suspended)                  /* [SL_HASFREE] */
#define CANDISPATCH (nready > 0 && HASFREE)                         /* [SL_CANDISPATCH] [W_CANDISPATCH] */
#define FREESLOTS   (running < limit -> limit - running : 0)       /* A4: the threshold, scaled down */
#define INLINE      (inLine[0] + inLine[1] + inLine[2])              /* idle.idleCount */
#ifndef BROKEN_NO_IDLE_RECLAIM
#define IDLE_RECLAIMS (HASFREE && holders > 0)                       /* [W_RECLAIM] */
#else
#define IDLE_RECLAIMS false                                          /* the worker parks without reclaiming */
#endif

/* S1, after every locked step. */
inline inv() {
    assert(nexec <= running);               /* every operation executing holds a slot (a batch runs in its worker's) */
    assert(holders == rmay[0] + rmay[1] + rmay[2]);
    assert(wakeups + INLINE <= nthreads && nthreads <= MAXW);
    assert(nready + nresv <= NOPS && running <= NOPS);  /* no counter wrapped below zero */
    /* S2: the counts match the operations' states: none lost, none in two places */
    k = 0; j = 0; from = 0; room = 0;
    do
    :: k < NOPS ->
        if
        :: opst[k] == O_READY -> j++
        :: opst[k] == O_RESV -> from++
        :: opst[k] == O_RUN || opst[k] == O_ASYNC -> room++
        :: else -> skip
        fi;
        k++
    :: else -> break
    od;
    assert(j == nready && from == nresv && room == nexec);
    k = 0; j = 0; from = 0; room = 0
}

/* IdleWorkers.wakeOrSpawn via wakeOrSpawnLocked ([D_CALL]): wake a parked worker (any one in the line: A3), or start
 * a thread, or nothing; the hand-off rule ([I_COMING]): nothing while `below` or more woken workers are on their
 * way. The unpark after unlocking is merged in (A3): the worker leaves its park when it is out of the line. */
inline wakeOrSpawn(a, bl) {
    if
    :: CANDISPATCH && wakeups < bl && inLine[0] -> inLine[0] = false; wakeups++; a = 1   /* [I_GUARD] [I_PARKEDQ] [I_SIGNAL] */
    :: CANDISPATCH && wakeups < bl && inLine[1] -> inLine[1] = false; wakeups++; a = 1
    :: CANDISPATCH && wakeups < bl && inLine[2] -> inLine[2] = false; wakeups++; a = 1
    :: CANDISPATCH && wakeups < bl && INLINE == 0 && nthreads < limit && nthreads < running + nready ->
        run worker(nthreads); nthreads++; a = 1                 /* [I_SPAWNQ] [I_RESERVE] (A3: the start never fails) */
    :: else -> a = 0
    fi
}

/* collectWakeActionsLocked: [C_ROOM] [SL_ROOM], then [C_EACH] one decision per operation that may start, counting
 * those on their way (inFlightBelow: the room), stopping at the first .none ([C_NONE]). */
inline collect() {
    room = (suspended -> 0 : (running >= limit -> 0 : (nready < limit - running -> nready : limit - running)));
    below = room;
    do
    :: room > 0 ->
        wakeOrSpawn(act, below);
        if :: act == 0 -> room = 0 :: else -> room-- fi
    :: else -> break
    od;
    act = 0; below = 0
}

/* returnReservationLocked(w): [RT_MAYHOLD] [RT_HOLDERS], the exchange [RT_EXCHANGE] (one access to next), and the
 * unclaimed operations back to the buckets ([RT_PUSHFRONT]). */
inline returnRes(w) {
    if :: rmay[w] -> rmay[w] = false; holders-- :: else -> skip fi;
    from = rnext[w]; rnext[w] = rcount[w];
    do
    :: from < rcount[w] ->
        j = rslot[w * RESLIMIT + from];
        assert(opst[j] == O_RESV);                               /* S2: each reserved operation goes back once */
        opst[j] = O_READY; nready++; nresv--; rslot[w * RESLIMIT + from] = NOP; from++
    :: else -> break
    od;
    from = 0; j = 0
}

/* reclaimReservationsLocked: [RC_HOLDERSQ], then every reservation that may hold operations ([RC_EACH]). */
inline reclaimAll() {
    if
    :: holders > 0 ->
        if :: rmay[0] -> returnRes(0) :: else -> skip fi;
        if :: rmay[1] -> returnRes(1) :: else -> skip fi;
        if :: rmay[2] -> returnRes(2) :: else -> skip fi
    :: else -> skip
    fi
}

/* reclaimForFreeSlotLocked ([RF_COND]). */
inline reclaimForFreeSlot() {
    if :: holders > 0 && HASFREE -> reclaimAll() :: else -> skip fi
}

/* reserveLocked(reservation me): [RV_THRESHOLD] [RV_LOOP] any number of the ready operations, up to RESLIMIT (A4),
 * out of the buckets into the reservation, which is empty ([W_SETTLE] emptied it). */
inline reserve() {
    assert(!rmay[me] && rnext[me] == rcount[me]);
    cnt = 0;
    do
    :: cnt < RESLIMIT && nready > FREESLOTS ->   /* A4: threshold */
        k = 0;
        do :: opst[k] != O_READY -> k++ :: else -> break od;
        opst[k] = O_RESV; nready--; nresv++;                       /* [RV_REMOVE] [RV_MOVE] */
        rslot[me * RESLIMIT + cnt] = k; cnt++; k = 0
    :: break
    od;
    if
    :: cnt > 0 ->
        rcount[me] = cnt; repoch[me] = epoch;                /* [RV_COUNT] [RV_EPOCH] */
        rnext[me] = 0;                                       /* [RV_PUBLISH] */
        rmay[me] = true; holders++                           /* [RV_MAYHOLD] [RV_HOLDERS] */
    :: else -> skip
    fi;
    cnt = 0
}

/* ---------------------------------------------------------------------------------------------------------
 * worker(me): QueueCore.workerLoop, for ever (A6), with runNextUnlocking and claimReserved. */
proctype worker(byte me) {
    byte op = NOP, cl = NOP, cnt = 0;
    bool async = false;
    bool plain = false;                                      /* the taken operation is a plain block operation */
    byte ran = 0;                                            /* bitmask: the reserved operations this batch ran */

    atomic { !mtx -> mtx = true; inv() };                    /* [W_LOCK] [W_REGISTER] [W_LOOP] */
    do
    :: atomic {
        CANDISPATCH ->                                       /* [W_CANDISPATCH] BUSY: [W_RUNNEXT] */
        k = 0;                                               /* [W_TAKE] [TK_POP]: the lowest ready id (A4) */
        do :: opst[k] != O_READY -> k++ :: else -> break od;
        op = k; k = 0;
        assert(opst[op] == O_READY);                         /* S2: no operation taken twice */
        opst[op] = O_RUN; nready--; nexec++;
        running++;                                           /* [TK_SLOT] [SL_TAKE] */
        wakeOrSpawn(act, 1);                                 /* [W_DECIDE] */
        if :: plain = true :: plain = false fi;              /* what it took (RULE R1) */
#ifdef BROKEN_RESERVE_BEHIND_ANY
        plain = true;                                        /* reserves behind anything: the code before R1 */
#endif
#ifndef RESERVE_AFTER_WAKING
        if :: act == 0 && plain -> reserve() :: else -> skip fi;   /* [W_RESERVE] [RV_WOKE] [RV_PLAIN] */
#else
        if :: plain -> reserve() :: else -> skip fi;         /* even after waking or starting a worker */
#endif
        act = 0; inv();
        mtx = false;                                         /* [W_UNLOCK] */
        /* [W_RUN] the operation runs (A5: its run is not a step of its own): it finishes on this worker, never
         * returns, or (a concurrent operation) its start() returns while it still executes, to finish later on
         * another thread or never. */
        if
        :: opst[op] = O_FIN; nexec--                         /* [W_DEFER] */
        :: goto end_busy
#ifndef BROKEN_RESERVE_BEHIND_ANY
        :: !plain -> opst[op] = O_ASYNC; async = true; run finisher(op)
        :: !plain -> opst[op] = O_ASYNC; async = true
#else
        :: opst[op] = O_ASYNC; async = true; run finisher(op)   /* "plain" was forced: any operation */
        :: opst[op] = O_ASYNC; async = true
#endif
        fi
       };
       /* [W_CLAIM] the reserved operations, one by one (claimReserved), without the lock. */
       do
       :: rnext[me] >= rcount[me] -> break                   /* [CL_LOAD] [CL_EMPTY]: none left */
       :: break                                              /* [W_WAITER]: a thread waits on the batch: stop */
       :: atomic { rnext[me] < rcount[me] && epoch != repoch[me] && !mtx ->   /* [CL_EPOCHQ]: they must give way */
           mtx = true; returnRes(me); inv(); mtx = false };  /* [CL_GIVEWAY] (A1) */
           break
#ifndef BROKEN_CLAIM_NOT_ATOMIC
       :: atomic {                                           /* [CL_LOAD] [CL_EPOCHQ] [CL_CAS] [CL_WON] (A1) */
           rnext[me] < rcount[me] && epoch == repoch[me] ->
           cl = rslot[me * RESLIMIT + rnext[me]]; rslot[me * RESLIMIT + rnext[me]] = NOP; rnext[me]++;
#else
       :: atomic { rnext[me] < rcount[me] && epoch == repoch[me] ->
           /* A load of next, then a plain store of next + 1 (no compare-and-swap): a reclaim in between is missed. */
           cnt = rnext[me]; cl = rslot[me * RESLIMIT + cnt] };
           atomic { rnext[me] = cnt + 1; cnt = 0;
#endif
           assert(opst[cl] == O_RESV);                       /* S2: claimed once */
           opst[cl] = O_RUN; nexec++; nresv--;               /* [CL_DISPATCH] */
           assert(nexec <= running);                         /* S1: in its worker's slot */
           if                                            /* [W_RUNRESERVED] [W_RESDONE]: finishes here, or never */
           :: opst[cl] = O_FIN; nexec--; ran = ran | (1 << cl); cl = NOP
           :: goto end_busy
           fi
          }
       od;
settle:
       atomic {
           !mtx -> mtx = true;                               /* [W_RELOCK] */
           if :: rmay[me] -> returnRes(me) :: else -> skip fi;   /* [W_SETTLE] [ST_SETTLE] */
           rnext[me] = 0; rcount[me] = 0; repoch[me] = 0;    /* empty (A7: normalised) */
           if
           :: !async ->                                      /* [W_SETTLERUN] [SR_FINISHED] [Q_FREESLOT] [SL_FREE] */
               assert(opst[op] == O_FIN); opst[op] = O_DONE; assert(running > 0); running--
           :: else -> skip                                   /* [SR_HANDBACK]: its finish frees the slot */
           fi;
           k = 0;                                            /* [W_UNLINKRES]: freesSlot false */
           do
           :: k < NOPS -> if :: (ran & (1 << k)) != 0 -> assert(opst[k] == O_FIN); opst[k] = O_DONE :: else -> skip fi; k++
           :: else -> break
           od;
           k = 0; ran = 0; op = NOP; async = false; plain = false;
           inv()
       }
    :: atomic { !CANDISPATCH && IDLE_RECLAIMS -> reclaimAll(); inv() }   /* [W_RECLAIM] [RC_HOLDERSQ] [RC_EACH] */
    :: atomic { !CANDISPATCH && !IDLE_RECLAIMS ->    /* PARKED: [W_PARK] */
        inLine[me] = true; inv(); mtx = false };             /* [PK_LINE] [PK_UNLOCK] */
end_park:
       atomic { !inLine[me] && !mtx -> mtx = true; assert(wakeups > 0); wakeups--; inv() }   /* [PK_PARK] [PK_RELOCK] [PK_UNPARKED] [I_CONSUME] */
    od;
end_busy:
    false                                                    /* runs for ever: its slot stays taken */
}

/* ---------------------------------------------------------------------------------------------------------
 * finisher(o): the thread that finishes concurrent operation o (its finish path calls operationDidFinish). */
proctype finisher(byte o) {
    atomic {
        !mtx -> mtx = true;                                  /* [OF_FINISH] [OF_LOCK] */
        assert(opst[o] == O_ASYNC); opst[o] = O_DONE; nexec--;   /* [OF_UNLINK] */
        assert(running > 0); running--;                      /* [Q_FREESLOT] [SL_FREE] */
#ifndef BROKEN_NO_RECLAIM_ON_FINISH
        reclaimForFreeSlot();                                /* [OF_RECLAIM] */
#endif
        wakeOrSpawn(act, 1); act = 0;                        /* [OF_DECIDE] */
        inv(); mtx = false
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * adder(): one batch of OPS0 operations (addOperations: admitClaimedBatchUnlocking, then one wake per operation
 * that can start), then OPS1 single adds (pushedToInbox: one wake decision), each one locked step (A2); refused
 * after the shutdown (the inbox is closed). */
proctype adder() {
    byte i = 0;
    atomic {
        !mtx -> mtx = true;                                  /* [AB_LOCK] */
        if
        :: shut -> do :: i < OPS0 -> opst[i] = O_REFUSED; i++ :: else -> break od   /* [AB_REFUSE] */
        :: else ->
            do :: i < OPS0 -> opst[i] = O_READY; nready++; i++ :: else -> break od;   /* [AB_ADMIT] */
            collect()                                        /* [AB_COLLECT] */
        fi;
        nadded = OPS0; inv(); mtx = false
    };
    do
    :: i < NOPS ->
        atomic {
            !mtx -> mtx = true;                              /* [A_PUSH] [A_LOCK] */
            if
            :: shut -> opst[i] = O_REFUSED
            :: else -> opst[i] = O_READY; nready++; wakeOrSpawn(act, 1); act = 0   /* [A_DECIDE] */
            fi;
            i++; nadded++; inv(); mtx = false
        }
    :: else -> break
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * controller(): the user's calls, in any order, each at most as often as the bound says, then stops. */
proctype controller() {
    byte nsusp = 0, nres = 0, nwid = 0, nev = 0;
    bool nshut = false;
    do
    :: atomic {                                              /* [SC_CALL] isSuspended = true */
        nsusp < NSUSPEND && !mtx && nev < NEVENTS -> nsusp++; nev++; mtx = true;     /* [SC_ADMIT] */
        if :: !shut -> suspended = true :: else -> skip fi;  /* [SC_SET] */
        epoch++;                                             /* [SC_INVALIDATE] [INV_EPOCH] */
        inv(); mtx = false }
    :: atomic {                                              /* [SC_CALL] isSuspended = false */
        nres < nsusp && !mtx && nev < NEVENTS -> nres++; nev++; mtx = true;          /* [SC_ADMIT] */
        suspended = false;                                   /* [SC_SET] */
        epoch++;                                             /* [SC_INVALIDATE] */
#ifndef BROKEN_NO_RECLAIM_ON_RESUME
        reclaimForFreeSlot();                                /* [SC_RESUMEQ] [SC_RECLAIM] */
#endif
        collect();                                           /* [SC_COLLECT] */
        inv(); mtx = false }
    :: atomic {                                              /* [WC_CALL] setMaxConcurrentOperationCount(1 or 3) */
        nwid < NWIDTH && !mtx && nev < NEVENTS -> nwid++; nev++; mtx = true;         /* [WC_ADMIT] */
        if :: limit != 1 -> limit = 1 :: limit != 3 -> limit = 3 fi;   /* [WC_SET] */
        epoch++;                                             /* [WC_INVALIDATE] */
#ifndef BROKEN_NO_RECLAIM_ON_WIDTH
        reclaimForFreeSlot();                                /* [WC_RECLAIM] */
#endif
        collect();                                           /* [WC_COLLECT] */
        inv(); mtx = false }
    :: atomic {                                              /* [SD_CALL] shutdown(.drain) */
        NSHUT > 0 && !nshut && !mtx && nev < NEVENTS -> nshut = true; nev++; mtx = true;          /* [SD_ADMIT] */
        shut = true;                                         /* [SD_CLOSE] [SD_REQUEST] */
        if
        :: suspended ->                                      /* [SD_SUSPENDEDQ] */
            suspended = false;                               /* [SD_RESUME] */
            epoch++;                                         /* [SD_INVALIDATE] */
#ifndef BROKEN_NO_RECLAIM_ON_SHUTDOWN_RESUME
            reclaimForFreeSlot()                             /* [SD_RECLAIM] */
#else
            skip
#endif
        :: else -> skip
        fi;
        collect();                                           /* [SD_COLLECT] */
        inv(); mtx = false }
    :: break
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * quiescence(): once nothing else can move (`timeout`), checks P1 and S3. */
#define STUCK_OK(s) ((s) != O_READY && (s) != O_RESV || suspended || running >= limit)
active proctype quiescence() {
    timeout ->
    atomic {
        assert(!mtx);
        assert(nadded == NOPS);
        k = 0;
        do
        :: k < NOPS ->
            assert(opst[k] != O_NEW);
            assert(STUCK_OK(opst[k]));                       /* P1 */
            k++
        :: else -> break
        od;
        k = 0;
        assert(running == nexec)                             /* S3: every slot taken is held by an operation executing */
    }
}

init {
    atomic { run adder(); run controller() }
}

/* P2 (progress, pan -a): every run is finite, so this checks each run's final (stuttering) state. */
#if NOPS == 3
#define ALL_OK (nadded == NOPS && STUCK_OK(opst[0]) && STUCK_OK(opst[1]) && STUCK_OK(opst[2]))
#else
#define ALL_OK (nadded == NOPS && STUCK_OK(opst[0]) && STUCK_OK(opst[1]) && STUCK_OK(opst[2]) && STUCK_OK(opst[3]))
#endif
ltl free_slot_runs { <> [] ALL_OK }
