/* semaphore.pml: the wake protocol of SpindleSemaphore (blocking waiters), checked with SPIN 6.5.
 *
 * WHAT IS MODELLED
 *   WAITERS waiter processes make ROUNDS0 (waiter 0) or ROUNDS (the others) calls of wait(until:);
 *   SIGNALLERS signaller processes each make SROUNDS calls of signal(). The semaphore starts at 0 permits.
 *   State: permits, permitHint, the line `parked` (array of node ids + parkedHead), each node's `granted`,
 *   and the condition variable.
 *
 * ABSTRACTIONS (everything the model leaves out or simplifies)
 *   A1 Mutex: every stretch of code run while holding condition.mutex is ONE atomic step (Promela `atomic`).
 *      Sound: outside the mutex only permitHint (stored once per section, read by a spinner that re-checks under
 *      the mutex) and the condition variable's wake flags are touched. pthread_cond_wait's "release the mutex
 *      and sleep" is the last action of such an atomic step; its "wake, then re-acquire" is a separate wake step
 *      followed by a new atomic step.
 *   A2 Condition variable: cvwait[w] is set when waiter w starts waiting and cleared by broadcast (all flags)
 *      or by its timeout. A broadcast reaches only threads already waiting, like pthread_cond_broadcast. It
 *      wakes every sleeper, so the ungranted ones already take the path of a spurious wakeup (back round
 *      `while !me.granted`). Genuine spurious wakeups (at most one per wait, to stay finite) are in the model
 *      under -DSPURIOUS; that run also passes (15,038,726 states safety, 27,304,768 progress) but is too big
 *      for CI.
 *   A3 Time and deadlines: no clock. Each wait picks nondeterministically between wait() (distantFuture: never
 *      times out) and a timed wait. For a timed wait "the deadline has passed" may become true at any
 *      deadline check ([W_EXPIRED], the spin's .deadlinePassed, [W_PASSED], the timed condition wait) and stays
 *      true once seen (local `passed`; a timed condition wait with a past deadline returns false at once).
 *      A timed condition wait may report a timeout even when a broadcast also reached it (the POSIX race):
 *      that is the grant-versus-timeout race of [W_RACE].
 *   A4 Spin: SpinPolicy's arithmetic (estimate, misses, budgetNanos, workArrived, spinMissed) is left out: at
 *      each wait the budget is nondeterministically 0 (COLD) or not (WARM), which covers every policy state.
 *      SpinPolicy.spin is one nondeterministic step: .seen or .budgetSpent (one branch: both lead to the same
 *      re-lock and differ only for the policy; .budgetSpent may come at any time, the budget being abstracted,
 *      so the hint's value does not restrict the branch) or .deadlinePassed (timed waits only). The time it
 *      spins is the interleaving of the other processes while the waiter is at that step. grantedAt,
 *      idleSince and the policy reports ([W_MISSED], [W_REPORT], [S_STAMP], workArrived after a spin) only
 *      feed the policy: abstracted away.
 *   A5 Waiter nodes: node id w*MAXR+r+1 for waiter w's round r (a fresh node per wait, as `Waiter()` at
 *      [W_NODE]); `===` is id equality. The array is `parked[CAP]` + `count` (parked.count); slots past
 *      `count` are kept 0. removeAll/removeFirst/remove(at:) are written as the element moves they perform.
 *   A6 compactAfter (64 in Swift, [K_AFTER]) is COMPACT_AFTER (default 1), so that the batch branch
 *      ([C_BATCHQ]) is reached with 3 waiters. The bound checked is the one the Swift doc states, with that
 *      constant.
 *   A7 Left out: async waiters (wait() async, continuations, cancellation; their cancel path calls the same
 *      removeParkedLocked as a timeout, modelled here), init(value:) > 0, the `value` getter, errors.
 *   A8 Bounds (defaults): WAITERS 3 (waiter 0 makes ROUNDS0 = 2 waits, the others ROUNDS = 1: 4 waits, enough
 *      for a removal to trigger the batch branch, which needs 4 nodes in the array), SIGNALLERS 2 making
 *      SROUNDS = 1 signal each (fewer signals than waits, so that some untimed waiter may be left asleep at the
 *      end; timed waits that time out leave free permits), COMPACT_AFTER 1; override with -D (ROUNDS0 and
 *      ROUNDS at most 2, WAITERS at most 3 for the ltl formula).
 *
 * PROPERTIES
 *   Safety (assertions, run with -DSAFETY, plus invalid end states):
 *     S1 at the end of every mutex section: parkedHead <= parked.count; parkedHead <= max(COMPACT_AFTER, live)
 *        and parked.count <= max(COMPACT_AFTER, live) + live (live = count - head: the array-length bound);
 *        permits == 0 || nobody in line;  permitHint == permits.
 *     S2 no waiter both granted and timed out: a wait that returns false holds no grant.
 *     S3 at quiescence (`timeout`: nothing can move, all signallers done): permits + consumed == sent
 *        (no lost or invented signal), every waiter not done is parked in the condition wait, ungranted, in the
 *        line, and no permit is free (no waiter sleeps forever with a grant or a free permit).
 *   Progress (LTL, run with -a, no fairness needed: every process is finite, so the only infinite runs are
 *   the stutter of a final state):
 *     ltl grant_returns: every waiter that was granted a signal eventually returns with it
 *        [] (pendGrant[w] -> <> !pendGrant[w]) for each waiter w.
 *
 * BROKEN VARIANTS (each must make pan report errors)
 *   -DBROKEN_NO_BATCH_COMPACT      the code before issue 23: the served prefix is dropped only when a signal
 *                                  empties the line, never in batches and never after a removal (S1 bound).
 *   -DBROKEN_TIMEOUT_DROPS_GRANT   [W_RACE] missing: a waiter granted just as it timed out returns false and
 *                                  the grant is lost (S2, S3, grant_returns).
 *   -DBROKEN_NO_RECHECK            [W_RECHECK] missing: after a spin the waiter parks without re-checking
 *                                  permits, so a permit signalled during its spin is stranded (S1, S3).
 *
 * STEPS AND THE SWIFT LINES THEY STAND FOR (checked by .ci/check-models)
 */
/* [W_LOCK]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:105 "self.condition.lock()" */
/* [W_UNLOCK]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:106 "defer { self.condition.unlock() }" */
/* [W_FAST]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:107 "if self.permits > 0 {" */
/* [W_TAKE]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:108 "self.takePermitLocked()" */
/* [TAKE1]       PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:179 "self.permits -= 1" */
/* [TAKE2]       PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:180 "self.permitHint.store(self.permits, ordering: .relaxed)" */
/* [W_EXPIRED]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:113 "if deadline.uptimeNanoseconds <= idleSince { return false }" */
/* [W_BUDGET]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:114 "let budget = self.spinPolicy.budgetNanos" */
/* [W_SPINQ]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:115 "if budget > 0 && self.parkedHead == self.parked.count {" */
/* [W_SPINUNL]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:116 "self.condition.unlock()" */
/* [W_SPIN]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:117 "let end = SpinPolicy.spin(from: idleSince, budget: budget, until: deadline.uptimeNanoseconds) {" */
/* [W_HINT]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:118 "self.permitHint.load(ordering: .relaxed) > 0" */
/* [SP_SEEN]     PIN Sources/Spindle/Primitives/SpinPolicy.swift:105 "if arrived() { return .seen }" */
/* [SP_DEADLINE] PIN Sources/Spindle/Primitives/SpinPolicy.swift:111 "if now >= deadline { return .deadlinePassed }" */
/* [SP_BUDGET]   PIN Sources/Spindle/Primitives/SpinPolicy.swift:112 "if now &- start >= budget { return .budgetSpent }" */
/* [W_RELOCK]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:120 "self.condition.lock()" */
/* [W_RECHECK]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:121 "if self.permits > 0 {" */
/* [W_RETAKE]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:122 "self.takePermitLocked()" */
/* [W_MISSED]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:127 "if end == .budgetSpent { self.spinPolicy.spinMissed() }" */
/* [W_PASSED]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:128 "if deadline.hasPassed { return false }" */
/* [W_NODE]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:130 "let me = Waiter()" */
/* [W_APPEND]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:131 "self.parked.append(me)" */
/* [W_LOOP]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:132 "while !me.granted {" */
/* [W_CONDWAIT]  PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:133 "if !self.condition.wait(until: deadline) {" */
/* [CV_FOREVER]  PIN Sources/Spindle/Primitives/SpindleCondition.swift:49 "self.wait()" */
/* [CV_TIMED]    PIN Sources/Spindle/Primitives/SpindleCondition.swift:52 "let err = cshim_pthread_cond_timedwait_ns(self.cond, self.mutex.raw, deadline.uptimeNanoseconds)" */
/* [CV_TIMEOUT]  PIN Sources/Spindle/Primitives/SpindleCondition.swift:53 "if err == ETIMEDOUT { return false }" */
/* [W_RACE]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:134 "if me.granted { break }  // granted just as we timed out: take it" */
/* [W_REMOVE]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:135 "self.removeParkedLocked(me)" */
/* [W_FALSE]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:136 "return false" */
/* [W_REPORT]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:140 "self.spinPolicy.workArrived(afterIdleNanos: me.grantedAt > idleSince ? me.grantedAt - idleSince : 0)" */
/* [W_TRUE]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:141 "return true" */
/* [S_LOCK]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:148 "self.condition.lock()" */
/* [S_ANY]       PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:149 "if self.parkedHead < self.parked.count {" */
/* [S_OLDEST]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:150 "let waiter = self.parked[self.parkedHead]" */
/* [S_GRANT]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:151 "waiter.granted = true" */
/* [S_ADVANCE]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:152 "self.parkedHead += 1" */
/* [S_COMPACT]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:153 "self.compactParkedLocked()" */
/* [S_STAMP]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:163 "waiter.grantedAt = cshim_clock_monotonic_ns()" */
/* [S_UNLOCK1]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:164 "self.condition.unlock()" */
/* [S_BCAST]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:165 "self.condition.broadcast()" */
/* [S_PERMIT]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:168 "self.permits += 1" */
/* [S_HINT]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:169 "self.permitHint.store(self.permits, ordering: .relaxed)" */
/* [S_UNLOCK2]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:170 "self.condition.unlock()" */
/* [R_FIND]      PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:186 "if let index = self.parked[self.parkedHead...].firstIndex(where: { $0 === waiter }) {" */
/* [R_REMOVE]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:187 "self.parked.remove(at: index)" */
/* [R_COMPACT]   PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:188 "self.compactParkedLocked()" */
/* [C_EMPTY]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:198 "if self.parkedHead == self.parked.count {" */
/* [C_ANY]       PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:199 "if self.parkedHead > 0 {" */
/* [C_CLEAR]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:200 "self.parked.removeAll(keepingCapacity: true)" */
/* [C_HEAD0]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:201 "self.parkedHead = 0" */
/* [C_BATCHQ]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:203 "} else if self.parkedHead > SpindleSemaphore.compactAfter && self.parkedHead * 2 > self.parked.count {" */
/* [C_BATCH]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:204 "self.parked.removeFirst(self.parkedHead)" */
/* [C_BHEAD0]    PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:205 "self.parkedHead = 0" */
/* [K_AFTER]     PIN Sources/Spindle/Primitives/SpindleSemaphore.swift:58 "static let compactAfter = 64" */

#ifndef WAITERS
#define WAITERS 3
#endif
#ifndef ROUNDS0
#define ROUNDS0 2                           /* waits of waiter 0 */
#endif
#ifndef ROUNDS
#define ROUNDS 1                            /* waits of every other waiter */
#endif
#define MAXR (ROUNDS0 > ROUNDS -> ROUNDS0 : ROUNDS)
#ifndef SIGNALLERS
#define SIGNALLERS 2
#endif
#ifndef SROUNDS
#define SROUNDS 1
#endif
#ifndef COMPACT_AFTER
#define COMPACT_AFTER 1                     /* [K_AFTER] 64 in Swift (A6) */
#endif

#define NODES (WAITERS * 2 + 1)             /* node ids 1..WAITERS*MAXR (MAXR <= 2); 0 = empty slot */
/* Room past the correct bound (max(C, live) + live <= C + 2*WAITERS), so that a broken variant trips the bound
 * assertion before it could index out of the array. */
#define CAP (COMPACT_AFTER + 2 * WAITERS + 2)

/* Waiter states, for the quiescence check. */
#define RUNNING 0
#define PARKED  1                           /* in the condition wait (cvwait set or being woken) */
#define DONE    2

/* ---- Shared state, all protected by condition.mutex except permitHint and cvwait (A1). ---- */
byte permits = 0;                           /* free permits */
byte permitHint = 0;                        /* atomic mirror of permits, read by spinners */
byte parked[CAP];                           /* the line: node ids, parked[head..count-1] still waiting */
byte count = 0;                             /* parked.count */
byte head = 0;                              /* parkedHead */
bool granted[NODES];                        /* Waiter.granted, per node */
bool cvwait[WAITERS];                       /* waiter w sleeps in the condition wait, not yet woken (A2) */
byte k = 0;                                 /* scratch index, used only inside atomic steps, left at 0 */

/* ---- Ghost state for the properties. ---- */
byte sent = 0;                              /* signal() calls completed (mutex section done) */
byte consumed = 0;                          /* waits that returned true (a permit or a grant) */
byte wstate[WAITERS];                       /* RUNNING / PARKED / DONE */
byte wnode[WAITERS];                        /* the node of waiter w's current wait (0 if none) */
bool pendGrant[WAITERS];                    /* waiter w was granted and has not yet returned with it */

#define LIVE (count - head)
#define BOUND ((COMPACT_AFTER > LIVE -> COMPACT_AFTER : LIVE) + LIVE)

/* S1: the invariants every mutex section must leave behind. */
inline invariants() {
    assert(head <= count);
    assert(head <= (COMPACT_AFTER > LIVE -> COMPACT_AFTER : LIVE));   /* "Keeps parkedHead <= max(compactAfter, live)" */
    assert(count <= BOUND);                 /* array-length bound stated in SpindleSemaphore's doc comment */
    assert(permits == 0 || head == count);  /* permits only while nobody is in line (ditto) */
    assert(permitHint == permits)
}

/* compactParkedLocked(). */
inline compact() {
    if
    :: head == count ->                                      /* [C_EMPTY] */
        if
        :: head > 0 ->                                       /* [C_ANY] */
            k = 0;                                           /* [C_CLEAR] removeAll */
            do :: k < count -> parked[k] = 0; k++ :: else -> break od;
            count = 0; k = 0;
            head = 0                                         /* [C_HEAD0] */
        :: else -> skip
        fi
#ifndef BROKEN_NO_BATCH_COMPACT
    :: head != count && head > COMPACT_AFTER && head * 2 > count ->   /* [C_BATCHQ] */
        k = 0;                                               /* [C_BATCH] removeFirst(head): move the live tail */
        do :: k + head < count -> parked[k] = parked[k + head]; k++ :: else -> break od;
        do :: k < count -> parked[k] = 0; k++ :: else -> break od;
        count = count - head; k = 0;
        head = 0                                             /* [C_BHEAD0] */
#endif
    :: else -> skip
    fi
}

/* removeParkedLocked(node): search parked[head...], remove(at:), compact. */
inline removeParked(node) {
    k = head;                                                /* [R_FIND] */
    do :: k < count && parked[k] != node -> k++ :: else -> break od;
    if
    :: k < count ->
        do :: k + 1 < count -> parked[k] = parked[k + 1]; k++ :: else -> break od;   /* [R_REMOVE] */
        parked[count - 1] = 0; count--; k = 0;
#ifndef BROKEN_NO_BATCH_COMPACT
        compact()                                            /* [R_COMPACT] (the old code had none) */
#endif
    :: else -> k = 0
    fi
}

/* The end of a wait that returned true (a free permit or its grant). */
inline returnTrue() {
    consumed++;                                              /* [W_TRUE] */
    pendGrant[w] = false;
    wstate[w] = DONE
}

/* ---------------------------------------------------------------------------------------------------------
 * waiter(w): ROUNDS0 (w == 0) or ROUNDS calls of wait(until:), each wait() or a timed wait (A3).
 * Outcome codes of one mutex section: */
#define GOT      1      /* returned true */
#define TIMEDOUT 2      /* returned false */
#define SPIN     3      /* unlocked to spin */
#define SLEEP    4      /* in the condition wait */
proctype waiter(byte w) {
    byte r = 0;
    byte node;
    byte res;
    bool timed, passed, spurious, woke;
    do
    :: r < (w == 0 -> ROUNDS0 : ROUNDS) ->
        node = w * MAXR + r + 1;
        if :: timed = false :: timed = true fi;              /* wait() or wait(timeout:) (A3) */
#ifdef SPURIOUS
        spurious = true;                                     /* one spurious wakeup allowed per wait (A2) */
#endif
        /* First mutex section: [W_LOCK] ... up to [W_SPINUNL], or up to the condition wait. */
        atomic {
            wstate[w] = RUNNING;
            if
            :: permits > 0 ->                                /* [W_FAST] */
                permits--; permitHint = permits;             /* [W_TAKE] [TAKE1] [TAKE2] */
                returnTrue(); res = GOT
            :: else ->
                if
                :: timed -> passed = true; res = TIMEDOUT    /* [W_EXPIRED] deadline already passed */
                :: true ->
                    if                                       /* [W_BUDGET] WARM or COLD (A4) */
                    :: head == count -> res = SPIN           /* [W_SPINQ] WARM, nobody in line */
                    :: true -> res = SLEEP                   /* COLD, or someone in line */
                    fi
                fi
            fi;
            if
            :: res == SLEEP ->
                wnode[w] = node;                             /* [W_NODE] */
                parked[count] = node; count++;               /* [W_APPEND] */
                /* [W_LOOP] !granted (a fresh node): wait. pthread_cond_wait releases the mutex. */
                cvwait[w] = true; wstate[w] = PARKED         /* [W_CONDWAIT] */
            :: res == TIMEDOUT -> wstate[w] = DONE           /* [W_UNLOCK] by the defer */
            :: else -> skip                                  /* GOT: [W_UNLOCK]; SPIN: [W_SPINUNL] */
            fi;
            invariants()
        };
        if
        :: res == SPIN ->
            /* The spin, without the mutex: one nondeterministic step (A4). [W_SPIN] [W_HINT] */
            if
            :: true -> skip                                  /* [SP_SEEN] (permitHint > 0) or [SP_BUDGET] ([W_MISSED]: policy only) */
            :: timed -> passed = true                        /* [SP_DEADLINE] */
            fi;
            /* Second mutex section: [W_RELOCK] ... */
            atomic {
#ifndef BROKEN_NO_RECHECK
                if
                :: permits > 0 ->                            /* [W_RECHECK] */
                    permits--; permitHint = permits;         /* [W_RETAKE] */
                    returnTrue(); res = GOT
                :: else -> skip
                fi;
#endif
                if
                :: res == GOT -> skip
                :: else ->
                    if                                       /* [W_PASSED] */
                    :: passed -> res = TIMEDOUT
                    :: timed && !passed -> passed = true; res = TIMEDOUT
                    :: !passed -> res = SLEEP
                    fi
                fi;
                if
                :: res == SLEEP ->
                    wnode[w] = node;                         /* [W_NODE] */
                    parked[count] = node; count++;           /* [W_APPEND] */
                    cvwait[w] = true; wstate[w] = PARKED     /* [W_LOOP] [W_CONDWAIT] */
                :: res == TIMEDOUT -> wstate[w] = DONE
                :: else -> skip
                fi;
                invariants()
            }
        :: else -> skip
        fi;
        /* The condition-wait loop ([W_LOOP]). Each turn: a wake step, then a mutex section. */
        do
        :: res == SLEEP ->
end_condwait:                                                /* an untimed waiter may sleep forever (S3 says when that is fine) */
            if
            :: !cvwait[w] -> woke = true                     /* broadcast reached it: [CV_FOREVER]/[CV_TIMED] return true */
#ifdef SPURIOUS
            :: spurious -> spurious = false; cvwait[w] = false; woke = true
#endif
            :: timed -> passed = true; cvwait[w] = false; woke = false    /* [CV_TIMEOUT] */
            fi;
            /* pthread re-acquires the mutex; the section runs to the next wait or the return. */
            atomic {
                if
                :: woke ->
                    if
                    :: granted[node] -> returnTrue(); res = GOT            /* [W_LOOP] exits; [W_REPORT] policy only */
                    :: else -> cvwait[w] = true                            /* [W_CONDWAIT] again */
                    fi
                :: else ->
#ifndef BROKEN_TIMEOUT_DROPS_GRANT
                    if
                    :: granted[node] -> returnTrue(); res = GOT            /* [W_RACE] take the grant */
                    :: else ->
#endif
                        removeParked(node);                                /* [W_REMOVE] */
                        assert(!granted[node]);                            /* S2: not both granted and timed out */
                        wstate[w] = DONE; res = TIMEDOUT                   /* [W_FALSE] */
#ifndef BROKEN_TIMEOUT_DROPS_GRANT
                    fi
#endif
                fi;
                woke = false;
                invariants()
            }
        :: else -> break
        od;
        /* Back to a canonical local state before the next round (keeps the state space small). */
        atomic { r++; res = 0; node = 0; timed = false; passed = false; spurious = false; wnode[w] = 0 }
    :: else -> break
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * signaller(): SROUNDS calls of signal(). */
proctype signaller() {
    byte i = 0;
    byte n;
    bool wake;
    do
    :: i < SROUNDS ->
        atomic {                                             /* [S_LOCK] */
            if
            :: head < count ->                               /* [S_ANY] */
                n = parked[head];                            /* [S_OLDEST] */
                granted[n] = true;                           /* [S_GRANT] */
                pendGrant[(n - 1) / MAXR] = true;
                head++;                                      /* [S_ADVANCE] */
                compact();                                   /* [S_COMPACT]; [S_STAMP] is policy only (A4) */
                wake = true                                  /* [S_UNLOCK1] */
            :: else ->
                permits++;                                   /* [S_PERMIT] */
                permitHint = permits;                        /* [S_HINT] */
                wake = false                                 /* [S_UNLOCK2] */
            fi;
            sent++; n = 0;
            invariants()
        };
        if
        :: wake ->                                           /* [S_BCAST], after unlocking */
            d_step { k = 0; do :: k < WAITERS -> cvwait[k] = false; k++ :: else -> break od; k = 0; wake = false }
        :: else -> skip
        fi;
        i++
    :: else -> break
    od
}

/* ---------------------------------------------------------------------------------------------------------
 * quiescence(): runs once nothing else can move (Promela `timeout`) and checks S3. */
active proctype quiescence() {
    byte w = 0, sleeping = 0;
    timeout ->
    atomic {
        assert(permits + consumed == sent);                  /* no signal lost or invented */
        do
        :: w < WAITERS ->
            assert(wstate[w] == DONE || wstate[w] == PARKED);
            if
            :: wstate[w] == PARKED ->
                sleeping++;
                assert(!granted[wnode[w]]);                  /* not asleep on a grant */
                assert(permits == 0)                         /* not asleep beside a free permit */
            :: else -> skip
            fi;
            w++
        :: else -> break
        od;
        assert(LIVE == sleeping)                             /* the line holds exactly the sleepers */
    }
}

init {
    byte i;
    atomic {
        for (i : 0 .. WAITERS - 1) { run waiter(i) }
        for (i : 0 .. SIGNALLERS - 1) { run signaller() }
    }
}

/* Progress: every waiter granted a signal returns with it (pendGrant is cleared only by a wait returning true). */
#if WAITERS == 3
ltl grant_returns { [] ((pendGrant[0] -> <> !pendGrant[0]) && (pendGrant[1] -> <> !pendGrant[1]) && (pendGrant[2] -> <> !pendGrant[2])) }
#elif WAITERS == 2
ltl grant_returns { [] ((pendGrant[0] -> <> !pendGrant[0]) && (pendGrant[1] -> <> !pendGrant[1])) }
#else
ltl grant_returns { [] (pendGrant[0] -> <> !pendGrant[0]) }
#endif
