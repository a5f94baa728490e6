/* runloop-wakeup.pml: the wakeup protocol of SpindleRunLoop (RunLoopWakeup: eventfd + poll, with a spin on the
 * `signals` counter before poll, the `firstSignalAt` stamp, and the descriptor opened lazily: a signal() that
 * finds it not open yet skips the eventfd write), checked with SPIN 6.5.
 *
 * WHAT IS MODELLED
 *   RunLoopWakeup.init's open() succeeds or fails (EMFILE). One owner process runs the loop: run() calls
 *   prepareToRun (open() unless open; a failed open throws and the owner calls run() again), then runPasses
 *   forever (deadline distantFuture): drain the eventfd, plan under the state lock (take the pending
 *   performs), run them, or else wait: arm `firstSignalAt`, maybe spin on `signals`, poll the eventfd, disarm
 *   `firstSignalAt`. PRODUCERS producer processes each make NSIG calls of perform(_:) (publish a perform under
 *   the state lock, then wakeUp() -> RunLoopWakeup.signal(): stamp, count, load the descriptor, write unless
 *   it is not open).
 *
 * ABSTRACTIONS (everything the model leaves out or simplifies)
 *   A1 The state lock: each `state.withLock` body is one atomic step (the only shared state it guards here is
 *      the count of pending performs, `pending`). The atomics (`signals`, `firstSignalAt`, `descriptorStorage`)
 *      and the eventfd calls are one step each, sequentially consistent (SPIN explores interleavings, not weak
 *      memory; the Swift orderings, e.g. the relaxed spin load and stamp, are not checked here).
 *   A2 The eventfd: a counter `efd`, saturating at EFDMAX (2 here, 0xfffffffffffffffe in the kernel): a write
 *      at EFDMAX fails with EAGAIN ([S_EAGAIN]) and writes nothing, the descriptor being readable already. A read
 *      (drain) zeroes it, or fails with EAGAIN when it is 0: both are `efd = 0`. poll on it returns when
 *      efd > 0; it is the only descriptor polled.
 *   A3 Time: no clock and no deadlines. The run's deadline is distantFuture and the mode has no timers, so poll
 *      waits with timeout -1: the worst case for a lost wakeup (a finite deadline or a timer only bounds the
 *      sleep). idleSince, the stamp's time value, timeoutMilliseconds and the .deadlinePassed spin outcome
 *      are left out; `firstSignalAt` is NOTIDLE / IDLE (idleUnstamped) / STAMPED (any time value).
 *   A4 Spin: SpinPolicy's arithmetic is left out: at each wait the budget is nondeterministically 0 (COLD) or
 *      not (WARM); `watched` is empty (a port source, no descriptor source), and a non-empty `watched` is the
 *      COLD case. SpinPolicy.spin is one nondeterministic step: .seen only if signals != seenAtDrain when
 *      read, .budgetSpent at any time. reportWait's policy update (workArrived/spinMissed) is left out; its
 *      exchange of `firstSignalAt` back to notIdle is modelled.
 *   A5 The mode: one mode holding one port with no messages (so hasWork is true and the loop sleeps when no
 *      perform is pending, instead of returning .empty); performs are all for that mode; a plan takes every
 *      pending perform (makePlan). Left out: timers, ports' messages, descriptor sources, retiring ports,
 *      stop(), nested runs, modes, perform order. They publish under the state lock and call wakeUp() like
 *      perform, so they follow the same protocol as the modelled producer. Left out with descriptor sources:
 *      the zero-timeout poll of the mode's descriptors after a pass that handled something (inside
 *      [P_HANDLED]); it neither blocks nor touches the eventfd. Left out too: the owning thread's exit
 *      (SpindleRunLoop.ownerDidExit); the modelled loop never exits, so perform's check of `ownerExited`
 *      under the lock ([PF_LOCK]) always passes and [PF_WAKE] always signals (perform signals the eventfd
 *      itself, as wakeUp() does). Left out as well: a forked child, where a loop made in the parent refuses
 *      perform before taking its lock (`isInherited`) and wakeUp() writes nothing.
 *   A6 Opening the descriptor: `fdOpen` is `descriptorStorage >= 0`; it only goes from false to true. init's
 *      open may fail, and the owner's open in prepareToRun may fail at most OPEN_FAILS times (1) before it
 *      succeeds (the run throws and the thread runs again: bounded so that the model stays finite; failing
 *      forever means the loop never runs, which the Swift code reports by throwing). Errors other than EAGAIN
 *      and EINTR, deinit and close are left out.
 *   A7 Bounds (defaults): PRODUCERS 3, NSIG 2 (6 signals in all), EFDMAX 2, OPEN_FAILS 1; override with -D.
 *
 * PROPERTIES
 *   Safety (assertions, run with -DSAFETY, plus invalid end states):
 *     S1 no eventfd write is skipped when the sleeper needs it: wherever a signal() writes nothing (EAGAIN, or
 *        the broken skip), the descriptor is already readable or the owner has not yet looked for work.
 *     S2 at quiescence (`timeout`: producers done and nothing can move): the owner sleeps in poll with no
 *        pending perform and every perform run: a signal sent while the loop was about to sleep was not lost.
 *        (`pending` stands for any state published under the lock before a wakeUp(): performs, port messages,
 *        stop, retiring ports.)
 *   Finding F1 (Models/README.md), not a lost wakeup and not checked by CI: a signal counted between the two
 *   steps of drain() ([D_SEEN] and [D_READ]) is consumed by that drain, its work is found by the plan that
 *   follows, yet `signals != seenAtDrain` stays true: the next WARM spin returns .seen at once for nothing (an
 *   extra pass, and reportWait feeds the policy a gap of ~0). -DFINDING_F1 asserts that a spin's .seen always
 *   follows a signal counted after the drain's read; SPIN refutes it.
 *   Progress (LTL, run with -a; no fairness needed: producers are finite and the owner cannot loop without
 *   blocking in poll once they are done, so the only infinite runs end in the stutter of a final state):
 *     ltl no_lost_wakeup: [] (pending > 0 -> <> pending == 0): every published perform is eventually run.
 *
 * BROKEN VARIANTS (each must make pan report errors)
 *   -DBROKEN_SKIP_WRITE              signal() skips the eventfd write while firstSignalAt is notIdle ("the owner
 *                                    is not in wait, it will look at its sources anyway"): the owner between
 *                                    its plan and [W_ARM] then sleeps with the perform pending (S1, S2).
 *   -DBROKEN_DRAIN_AFTER_CHECK       the pass looks for work first and drains after ([R_DRAIN] moved
 *                                    below [P_PLAN]): a signal between the two is drained and lost (S2).
 *   -DBROKEN_SIGNAL_BEFORE_PUBLISH   perform(_:) wakes the loop before appending the perform ([PF_WAKE]
 *                                    before [PF_APPEND]): the loop may look before the perform is there and
 *                                    sleep (S2).
 *   -DBROKEN_OPEN_LATE               the descriptor is opened at the first wait (just before poll) instead of
 *                                    in prepareToRun: a signal() between the plan and the open skips its
 *                                    write and the loop sleeps with the perform pending (S1, S2).
 *
 * STEPS AND THE SWIFT LINES THEY STAND FOR (checked by .ci/check-models)
 */
/* [INIT_OPEN]   PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:63 "init() { try? self.open() }" */
/* [R_PREP]      PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:39 "try self.prepareToRun()" */
/* [PREP_OPEN]   PIN Sources/Spindle/RunLoop/SpindleRunLoop.swift:133 "try self.wakeup.open()" */
/* [O_ISOPEN]    PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:80 "if self.descriptorStorage.load(ordering: .relaxed) >= 0 { return }" */
/* [O_CREATE]    PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:81 "let fd = try retryingOnEINTR("eventfd") { cshim_eventfd_create() }" */
/* [O_STORE]     PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:82 "self.descriptorStorage.store(fd, ordering: .sequentiallyConsistent)" */
/* [PF_LOCK]     PIN Sources/Spindle/RunLoop/SpindleRunLoop.swift:318 "let queued = self.state.withLock { state -> Bool in" */
/* [PF_APPEND]   PIN Sources/Spindle/RunLoop/SpindleRunLoop.swift:320 "state.performs.append(RunLoopPerform(modes: modes, order: order, sequence: state.takeSequence()," */
/* [PF_WAKE]     PIN Sources/Spindle/RunLoop/SpindleRunLoop.swift:324 "if queued { self.wakeup.signal() }" */
/* [WAKEUP]      PIN Sources/Spindle/RunLoop/SpindleRunLoop.swift:339 "public func wakeUp() { if !self.isInherited { self.wakeup.signal() } }" */
/* [S_LOAD]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:87 "if self.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.idleUnstamped {" */
/* [S_CAS]       PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:88 "_ = self.firstSignalAt.compareExchange(" */
/* [S_CAS2]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:89 "expected: RunLoopWakeup.idleUnstamped, desired: cshim_clock_monotonic_ns(), ordering: .relaxed)" */
/* [S_COUNT]     PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:91 "self.signals.add(1, ordering: .sequentiallyConsistent)" */
/* [S_FD]        PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:92 "let fd = self.descriptorStorage.load(ordering: .sequentiallyConsistent)" */
/* [S_NOFD]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:93 "guard fd >= 0 else { return }  // not open: the owner's drain sees the count (see above)" */
/* [S_WRITE]     PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:95 "_ = try retryingOnEINTR("eventfd_write") { cshim_eventfd_signal(fd) }" */
/* [S_EAGAIN]    PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:98 "guard case .system(_, let err) = error, err == EAGAIN else {" */
/* [R_LOOP]      PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:120 "while true {" */
/* [R_DRAIN]     PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:123 "self.wakeup.drain()" */
/* [D_SEEN]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:106 "self.seenAtDrain = self.signals.load(ordering: .sequentiallyConsistent)" */
/* [D_READ]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:109 "_ = try retryingOnEINTR("eventfd_read") { cshim_eventfd_drain(self.descriptor, &value) }" */
/* [P_LOCK]      PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:126 "let start = self.state.withLock { state -> RunLoopPassStart in" */
/* [P_HASWORK]   PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:133 "guard heldOpen || state.hasWork(for: mode, inService: inService) else { return .empty }" */
/* [P_PLAN]      PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:134 "return .plan(state.makePlan(for: mode, now: now, inService: inService, performsBefore: performsBefore))" */
/* [P_TAKE]      PIN Sources/Spindle/RunLoop/RunLoopState.swift:232 "self.performs = kept" */
/* [P_RUN]       PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:154 "perform.block()" */
/* [P_HANDLED]   PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:167 "if handled {" */
/* [R_AGAIN]     PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:44 "case .handled where !deadline.hasPassed: continue" */
/* [R_WAIT]      PIN Sources/Spindle/RunLoop/SpindleRunLoop+Running.swift:190 "ThreadContext.current.blocking { self.wakeup.wait(watching: &watched, until: wakeAt) }" */
/* [W_ARM]       PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:124 "self.firstSignalAt.store(RunLoopWakeup.idleUnstamped, ordering: .relaxed)" */
/* [W_DEFER]     PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:125 "defer { self.reportWait(idleSince: idleSince) }" */
/* [W_BUDGET]    PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:126 "let budget = self.spinPolicy.budgetNanos" */
/* [W_SPINQ]     PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:127 "if watched.isEmpty && budget > 0 {" */
/* [W_SPIN]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:128 "let end = SpinPolicy.spin(from: idleSince, budget: budget, until: deadline.uptimeNanoseconds) {" */
/* [W_ARRIVED]   PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:129 "self.signals.load(ordering: .relaxed) != self.seenAtDrain" */
/* [SP_SEEN]     PIN Sources/Spindle/Primitives/SpinPolicy.swift:105 "if arrived() { return .seen }" */
/* [SP_BUDGET]   PIN Sources/Spindle/Primitives/SpinPolicy.swift:112 "if now &- start >= budget { return .budgetSpent }" */
/* [W_SEEN]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:132 "case .seen: return" */
/* [W_MISSED]    PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:133 "case .budgetSpent: self.spinPolicy.spinMissed()" */
/* [W_POLL]      PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:139 "_ = RunLoopWakeup.poll(&fds, until: deadline)" */
/* [W_DISARM]    PIN Sources/Spindle/RunLoop/RunLoopWakeup.swift:146 "let stamp = self.firstSignalAt.exchange(RunLoopWakeup.notIdle, ordering: .relaxed)" */

#ifndef PRODUCERS
#define PRODUCERS 3
#endif
#ifndef NSIG
#define NSIG 2                              /* perform(_:) calls per producer */
#endif
#ifndef EFDMAX
#define EFDMAX 2                            /* the eventfd counter's maximum (A2) */
#endif
#ifndef OPEN_FAILS
#define OPEN_FAILS 1                        /* failed opens in prepareToRun before one succeeds (A6) */
#endif

/* firstSignalAt (A3) */
#define NOTIDLE 0                           /* RunLoopWakeup.notIdle */
#define IDLE    1                           /* RunLoopWakeup.idleUnstamped */
#define STAMPED 2                           /* a signaller's time */

/* Ghost: where the owner is, for S1. AWAKE: from the end of a wait (or the start) until its plan found nothing;
 * it will still look for work. SLEEPY: from that plan until its wait returns; only a wake brings it back. */
#define AWAKE   0
#define SLEEPY  1

#ifdef BROKEN_SKIP_WRITE
#define SKIP_WRITE (fsa == NOTIDLE)         /* the broken "owner not waiting, no need to write" */
#else
#define SKIP_WRITE false                    /* the Swift code never skips a write */
#endif

/* ---- Shared state ---- */
byte efd = 0;                               /* the eventfd counter (A2) */
byte signals = 0;                           /* RunLoopWakeup.signals */
byte seenAtDrain = 0;                       /* owner only in Swift; global so that the checks can read it */
byte fsa = NOTIDLE;                         /* firstSignalAt */
byte pending = 0;                           /* performs appended under the state lock, not yet planned */
bool fdOpen = false;                        /* descriptorStorage >= 0 (A6) */

/* ---- Ghost state for the properties ---- */
byte phase = AWAKE;
byte published = 0;                         /* performs appended */
byte ran = 0;                               /* performs run by the owner */
#ifdef FINDING_F1
byte countAtRead = 0;                       /* signals at the drain's eventfd read */
#endif

/* S1, at every signal() that writes nothing. */
inline noNeededWriteSkipped() {
    assert(efd > 0 || phase == AWAKE)
}

/* perform(_:): append under the state lock (A1). */
inline publish() {
    atomic { pending++; published++ }                       /* [PF_LOCK] [PF_APPEND] */
}

/* ---------------------------------------------------------------------------------------------------------
 * producer(): NSIG calls of perform(_:) from another thread: publish, then wakeUp() -> RunLoopWakeup.signal(). */
proctype producer() {
    byte i = 0;
    do
    :: i < NSIG ->
#ifndef BROKEN_SIGNAL_BEFORE_PUBLISH
        publish();
#endif
        /* [PF_WAKE] [WAKEUP] signal(): */
        if
        :: fsa == IDLE ->                                    /* [S_LOAD] the owner waits, unstamped */
            atomic {                                         /* [S_CAS] [S_CAS2] compare-and-exchange */
                if :: fsa == IDLE -> fsa = STAMPED :: else -> skip fi
            }
        :: else -> skip
        fi;
        signals++;                                           /* [S_COUNT] */
        if
        :: fdOpen ->                                         /* [S_FD] the descriptor is open */
            atomic {                                         /* [S_WRITE] eventfd_write(fd, 1) */
                if
                :: efd < EFDMAX && !SKIP_WRITE -> efd++
                :: else -> noNeededWriteSkipped()            /* [S_EAGAIN] counter full (or the broken skip) */
                fi
            }
        :: atomic { !fdOpen -> noNeededWriteSkipped() }      /* [S_FD] [S_NOFD] not open: no write (checked as loaded) */
        fi;
#ifdef BROKEN_SIGNAL_BEFORE_PUBLISH
        publish();
#endif
        i++
    :: else -> break
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * owner(): the loop's thread in run(): prepareToRun, then runPasses forever. */
proctype owner() {
    bool took = false;
    byte fails = 0;
#ifndef BROKEN_OPEN_LATE
    /* run(): [R_PREP] prepareToRun: [PREP_OPEN] open(). */
    do
    :: fdOpen -> break                                       /* [O_ISOPEN] open already */
    :: !fdOpen && fails < OPEN_FAILS -> fails++              /* [O_CREATE] EMFILE: the run throws; run() again */
    :: !fdOpen -> fdOpen = true; break                       /* [O_CREATE] [O_STORE] */
    od;
    fails = 0;
#endif
pass:                                                        /* [R_LOOP] [R_AGAIN] */
#ifndef BROKEN_DRAIN_AFTER_CHECK
    /* RunLoopWakeup.drain(). [R_DRAIN] */
    seenAtDrain = signals;                                   /* [D_SEEN] */
#ifdef FINDING_F1
    atomic { efd = 0; countAtRead = signals };
#else
    efd = 0;                                                 /* [D_READ] read, or EAGAIN when it was 0 */
#endif
#endif
    atomic {                                                 /* [P_LOCK] [P_HASWORK] [P_PLAN] [P_TAKE] */
        if
        :: pending > 0 -> ran = ran + pending; pending = 0; took = true   /* [P_RUN] the blocks, after unlocking */
        :: else -> phase = SLEEPY   /* the loop always has something to wait for (a port; or held open) */
        fi
    };
#ifdef BROKEN_DRAIN_AFTER_CHECK
    seenAtDrain = signals;
    efd = 0;
#endif
    if
    :: took -> took = false; goto pass                       /* [P_HANDLED], then run() goes on: [R_AGAIN] */
    :: else -> skip
    fi;
    /* RunLoopWakeup.wait(watching:until:). [R_WAIT] */
    fsa = IDLE;                                              /* [W_ARM] */
#ifdef BROKEN_OPEN_LATE
    fdOpen = true;                                           /* the broken late open, before the first poll */
#endif
    if                                                       /* [W_BUDGET] [W_SPINQ] (A4) */
    :: true ->                                               /* WARM: [W_SPIN] one step */
        if
        :: signals != seenAtDrain ->                         /* [W_ARRIVED] [SP_SEEN] */
#ifdef FINDING_F1
            assert(signals != countAtRead);                  /* F1: fails, the count it saw was already drained */
#endif
            goto disarm                                      /* [W_SEEN] return without poll */
        :: true -> skip                                      /* [SP_BUDGET] [W_MISSED] */
        fi
    :: true -> skip                                          /* COLD */
    fi;
end_poll:                                                    /* asleep for good is fine only if nothing is pending (S2) */
    efd > 0;                                                 /* [W_POLL] returns when the eventfd is readable */
disarm:
    atomic { fsa = NOTIDLE; phase = AWAKE };                 /* [W_DEFER] reportWait: [W_DISARM] */
    goto pass
}

/* ---------------------------------------------------------------------------------------------------------
 * quiescence(): runs once nothing else can move (Promela `timeout`) and checks S2. */
active proctype quiescence() {
    timeout ->
    atomic {
        assert(pending == 0);                                /* no perform left behind by a sleeping loop */
        assert(ran == published);
        assert(efd == 0 && phase == SLEEPY)                  /* it is asleep in poll */
    }
}

init {
    byte i;
    atomic {
        if :: fdOpen = true :: fdOpen = false fi;            /* [INIT_OPEN] open() in init: success or EMFILE */
        run owner();
        for (i : 1 .. PRODUCERS) { run producer() }
    }
}

ltl no_lost_wakeup { [] (pending > 0 -> <> (pending == 0)) }
