// CShim: the thinnest layer over what Swift cannot do well itself on Linux.
//
// Rules of this file:
// - Every function is `cshim_` plus the name of the libc call it wraps, and says how it reports errors:
//   "pthread-style" returns 0 or an error number; "syscall-style" returns -1 and sets errno.
// - No policy: no retries, no defaults, no clamping. The Swift side decides.
// - One-liners are `static inline` here so Swift can inline them; the rest live in shim.c.
#ifndef CSHIM_H
#define CSHIM_H

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// MARK: - Fault seam (tests only)

// The calls below that can fail for reasons outside the caller's control ask `cshim_fault(site)` first. With no
// hook installed (always, unless a test installs one through Spindle's `SpindleFaults`) that is one acquire load
// of a null pointer and a branch that is never taken, beside a syscall. With a hook, a non-zero answer is the
// error the call reports instead of calling libc (for a condition wait: a spurious wakeup instead of waiting).
// The hook decides (Swift side); C only asks. It must be callable from any thread, under any lock, and must not
// wait on a condition itself.

/// The sites of the seam (mirrored by `SpindleFaults.Site`).
enum {
    CSHIM_FAULT_THREAD_CREATE = 0,   // pthread_create: the answer is returned (EAGAIN, as when out of threads)
    CSHIM_FAULT_STACK_SIZE = 1,      // pthread_attr_setstacksize (only when a size is asked): returned (EINVAL)
    CSHIM_FAULT_SET_NAME = 2,        // pthread_setname_np: returned (ERANGE, EPERM)
    CSHIM_FAULT_SET_PRIORITY = 3,    // setpriority: -1 with the answer in errno (EPERM, EACCES)
    CSHIM_FAULT_EVENTFD = 4,         // eventfd: -1 with the answer in errno (EMFILE, ENFILE)
    CSHIM_FAULT_COND_WAIT = 5,       // pthread_cond_(timed)wait: non-zero means wake spuriously
    CSHIM_FAULT_PARK = 6,            // cshim_parker_park: returned at once, no notification consumed (spurious)
    CSHIM_FAULT_SITE_COUNT = 7
};

/// The hook's type: `site` in, 0 (no fault) or an error number out.
typedef int (*cshim_fault_hook)(int site);

/// The installed hook, or NULL. Read with `cshim_fault`, written with `cshim_fault_install`.
extern cshim_fault_hook cshim_fault_hook_slot;

/// Installs `hook` (NULL removes it). Any thread; calls already past their check are not affected.
static inline void cshim_fault_install(cshim_fault_hook hook) {
    __atomic_store_n(&cshim_fault_hook_slot, hook, __ATOMIC_RELEASE);
}

/// The calling thread's fault scope (0: none). A hook may limit a schedule to the threads that carry its scope, so
/// one test can make its own calls fail while other tests run in the same process.
extern __thread uint64_t cshim_fault_thread_scope;
static inline uint64_t cshim_fault_scope_get(void) { return cshim_fault_thread_scope; }
static inline void cshim_fault_scope_set(uint64_t scope) { cshim_fault_thread_scope = scope; }

/// The seam's question: 0 to go on, or the error to report.
static inline int cshim_fault(int site) {
    cshim_fault_hook hook = __atomic_load_n(&cshim_fault_hook_slot, __ATOMIC_ACQUIRE);
    return hook == 0 ? 0 : hook(site);
}

// MARK: - Threads

/// The entry point a new thread runs: receives the context pointer given to `cshim_pthread_create`.
typedef void (*cshim_thread_entry)(void *context);

/// Wraps `pthread_attr_init`, `pthread_attr_setdetachstate`, `pthread_attr_setstacksize` and `pthread_create`.
/// The new thread runs `entry(context)`. `stack_size` of 0 keeps the default; otherwise it must already be at
/// least `cshim_stack_min()` and a multiple of the page size (the Swift side rounds). Pthread-style: returns 0 or
/// the error number of the first call that failed; on success `*out` holds the thread. Through the fault seam
/// (`CSHIM_FAULT_THREAD_CREATE`, and `CSHIM_FAULT_STACK_SIZE` when a size is asked).
int cshim_pthread_create(pthread_t *out, int detached, size_t stack_size, cshim_thread_entry entry, void *context);

/// `PTHREAD_STACK_MIN` (a macro in glibc, so Swift cannot read it directly).
static inline size_t cshim_stack_min(void) { return (size_t)PTHREAD_STACK_MIN; }

// The next three are GNU extensions: they live in shim.c, which is compiled with _GNU_SOURCE (a header that
// Swift imports is not), as swift-system does for the same reason.

/// Wraps `pthread_setname_np`. The name must be at most 15 bytes plus NUL. Pthread-style. Through the fault seam
/// (`CSHIM_FAULT_SET_NAME`).
int cshim_pthread_setname_np(pthread_t thread, const char *name);

/// Wraps `pthread_getname_np` into a buffer of `len` bytes (16 is enough on Linux). Pthread-style.
int cshim_pthread_getname_np(pthread_t thread, char *buf, size_t len);

/// Wraps `gettid` (the kernel thread id). Never fails.
pid_t cshim_gettid(void);

/// Wraps `setpriority(PRIO_PROCESS, tid, nice)`: on Linux this sets the nice value of one thread. Syscall-style.
/// Through the fault seam (`CSHIM_FAULT_SET_PRIORITY`).
int cshim_setpriority_thread(pid_t tid, int nice_value);

/// Wraps `getpriority(PRIO_PROCESS, tid)`. Syscall-style, but -1 is also a valid nice value: the function clears
/// errno first; the caller must check errno when it returns -1.
int cshim_getpriority_thread(pid_t tid);

/// Wraps `sched_getaffinity(0, ...)` and `CPU_COUNT`: the number of CPUs this process may run on.
/// Syscall-style: -1 and errno on failure.
int cshim_sched_getaffinity_count(void);

// MARK: - Mutexes and condition variables

/// The kinds `cshim_pthread_mutex_init` accepts (mirrors `PTHREAD_MUTEX_*`).
enum { CSHIM_MUTEX_NORMAL = 0, CSHIM_MUTEX_RECURSIVE = 1, CSHIM_MUTEX_ERRORCHECK = 2, CSHIM_MUTEX_ADAPTIVE = 3 };

/// Wraps `pthread_mutexattr_settype` and `pthread_mutex_init`. Pthread-style.
int cshim_pthread_mutex_init(pthread_mutex_t *mutex, int kind);

/// Wraps `pthread_condattr_setclock(CLOCK_MONOTONIC)` and `pthread_cond_init`, so timed waits take absolute
/// CLOCK_MONOTONIC deadlines. Pthread-style.
int cshim_pthread_cond_init_monotonic(pthread_cond_t *cond);

/// Wraps `pthread_cond_wait`. Pthread-style. Through the fault seam (`CSHIM_FAULT_COND_WAIT`).
int cshim_pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex);

/// Wraps `pthread_cond_timedwait` with an absolute CLOCK_MONOTONIC deadline in nanoseconds.
/// Pthread-style: 0, ETIMEDOUT, or another error number. Through the fault seam (`CSHIM_FAULT_COND_WAIT`).
int cshim_pthread_cond_timedwait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns);

// MARK: - Parker (one thread's futex word)
/// One thread's parking word: the futex protocol of Rust's std `Parker` (and of a Java `LockSupport` permit), and
/// nothing more. States: EMPTY (0), NOTIFIED (1), PARKED (UINT32_MAX). `cshim_parker_unpark` stores NOTIFIED
/// (release) and calls `futex_wake` only if the owner was PARKED; `cshim_parker_park` consumes a NOTIFIED at once,
/// or goes EMPTY → PARKED and sleeps in `futex_wait` until it can take NOTIFIED → EMPTY (acquire). So a
/// notification sent before the owner parks is kept (at most one), and nothing the unparking thread wrote before
/// unparking is missed by the parked one. Only the owning thread parks; any thread may unpark. The word must not
/// move while in use (allocate it; Swift's `ThreadParker` does). Who parks and whom to wake is the Swift side's.
typedef struct { uint32_t state; } cshim_parker;
/// Sets the word EMPTY. Not thread-safe (before first use).
static inline void cshim_parker_init(cshim_parker *parker) { __atomic_store_n(&parker->state, 0, __ATOMIC_RELAXED); }
/// Wraps `futex(FUTEX_WAIT_PRIVATE)` in the protocol above: returns 0 once a notification was consumed. Through the
/// fault seam (`CSHIM_FAULT_PARK`): a fault returns its answer at once, consuming nothing (a spurious return; the
/// caller must tell it apart by its own state).
int cshim_parker_park(cshim_parker *parker);
/// Makes one notification available to the owner and wakes it if it sleeps (`futex(FUTEX_WAKE_PRIVATE, 1)`).
/// Any thread; never blocks.
void cshim_parker_unpark(cshim_parker *parker);
// MARK: - fork()
/// How many `fork()`s separate this process from the one that first called `cshim_fork_generation_track`: 0 in
/// that process, incremented by a `pthread_atfork` child handler in each child. Spindle compares it with the
/// value an object recorded when it was made, to tell objects of a parent process (whose threads do not exist
/// here) from its own. Relaxed: only the child handler writes it, before any other thread of the child exists.
extern uint64_t cshim_fork_generation_value;
static inline uint64_t cshim_fork_generation(void) {
    return __atomic_load_n(&cshim_fork_generation_value, __ATOMIC_RELAXED);
}
/// Wraps `pthread_atfork(NULL, NULL, child)` (once per process, through `pthread_once`), where `child` increments
/// `cshim_fork_generation_value`. Pthread-style: 0, or the error of `pthread_atfork` (ENOMEM).
int cshim_fork_generation_track(void);
/// Wraps `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds. CLOCK_MONOTONIC cannot fail on Linux.
static inline uint64_t cshim_clock_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/// Wraps `sched_getcpu`: the CPU the calling thread runs on now (it may move right after), or -1 if unknown. A hint
/// for choosing among parked threads, never for correctness. Cheap: glibc reads it from the thread's rseq area.
int cshim_current_cpu(void);

/// Wraps `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: CPU time the calling thread used, in nanoseconds.
static inline uint64_t cshim_clock_thread_cputime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// MARK: - eventfd wakeups and poll

/// Wraps `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`. Syscall-style: the descriptor, or -1 and errno. Through the
/// fault seam (`CSHIM_FAULT_EVENTFD`).
static inline int cshim_eventfd_create(void) {
    int fault = cshim_fault(CSHIM_FAULT_EVENTFD);
    if (fault != 0) { errno = fault; return -1; }
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/// Wraps `eventfd_write(fd, 1)`: callable from any thread. Syscall-style (EAGAIN means the counter is full,
/// which still leaves the descriptor readable, so a wakeup is never lost).
static inline int cshim_eventfd_signal(int fd) { return eventfd_write(fd, 1); }

/// Wraps `eventfd_read`: resets the counter, storing its old value. Syscall-style (EAGAIN when it was zero).
static inline int cshim_eventfd_drain(int fd, uint64_t *value) { return eventfd_read(fd, value); }

/// Wraps `poll` on an array of descriptors with a timeout in milliseconds (-1 = forever). Syscall-style.
static inline int cshim_poll(struct pollfd *fds, nfds_t count, int timeout_ms) { return poll(fds, count, timeout_ms); }

/// The soft limit on open descriptors (RLIMIT_NOFILE), which also bounds how many entries one `poll` may watch
/// (more: EINVAL). INT64_MAX when unlimited; -1 if it cannot be read.
static inline int64_t cshim_nofile_soft_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > (rlim_t)INT64_MAX) return INT64_MAX;
    return (int64_t)limit.rlim_cur;
}

/// Wraps `close`. Syscall-style.
static inline int cshim_close(int fd) { return close(fd); }

/// `errno` of the calling thread (a macro in glibc).
static inline int cshim_errno(void) { return errno; }

/// One pointer-sized thread-local slot with the cheapest access the platform has (no pthread_getspecific call).
/// Spindle keeps its per-thread context object here; the object's lifetime is managed in Swift.
extern __thread void *cshim_tls_context;
static inline void *cshim_tls_context_get(void) { return cshim_tls_context; }
static inline void cshim_tls_context_set(void *value) { cshim_tls_context = value; }

/// A spin-wait hint to the CPU (`pause` on x86, `yield` on ARM): lets the sibling hyperthread run and saves power
/// while a thread polls for work. Not available from Swift itself.
static inline void cshim_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/// The Swift runtime's "retain unless already being destroyed" (exported by libswiftCore; Swift's own weak
/// references are built on it): returns `object` retained, or NULL once its deinit has begun. Swift has no public
/// spelling of it. Spindle uses it to reach an operation's dependents without weak references, whose side tables
/// would slow every later retain and release of those operations.
extern void *swift_tryRetain(void *object);
static inline void *cshim_try_retain(void *object) { return swift_tryRetain(object); }

#endif
