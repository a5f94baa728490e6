// CShim: wrappers that cannot be static inline (attributes that need cleanup, GNU-only macros).
// Stateless but for the fault hook and the fork generation. Each says which libc calls it wraps; see CShim.h for
// the error style.
#ifndef _GNU_SOURCE
#error You must define _GNU_SOURCE (Package.swift passes it through cSettings)
#endif

#include "CShim.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>

cshim_fault_hook cshim_fault_hook_slot = 0;
__thread uint64_t cshim_fault_thread_scope = 0;

int cshim_pthread_create(pthread_t *out, int detached, size_t stack_size, cshim_thread_entry entry, void *context) {
    int fault = cshim_fault(CSHIM_FAULT_THREAD_CREATE);
    if (fault == 0 && stack_size != 0) fault = cshim_fault(CSHIM_FAULT_STACK_SIZE);
    if (fault != 0) return fault;
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err != 0) return err;
    err = pthread_attr_setdetachstate(&attr, detached ? PTHREAD_CREATE_DETACHED : PTHREAD_CREATE_JOINABLE);
    if (err == 0 && stack_size != 0) err = pthread_attr_setstacksize(&attr, stack_size);
    // The entry point type differs from pthread's (void return); the trampoline cast is the whole point of the
    // shim: Swift cannot name a C function pointer that returns void * and takes a context without boxing.
    if (err == 0) err = pthread_create(out, &attr, (void *(*)(void *))entry, context);
    int destroyErr = pthread_attr_destroy(&attr);
    return err != 0 ? err : destroyErr;
}

int cshim_pthread_setname_np(pthread_t thread, const char *name) {
    int fault = cshim_fault(CSHIM_FAULT_SET_NAME);
    return fault != 0 ? fault : pthread_setname_np(thread, name);
}

int cshim_pthread_getname_np(pthread_t thread, char *buf, size_t len) { return pthread_getname_np(thread, buf, len); }

pid_t cshim_gettid(void) { return gettid(); }

int cshim_setpriority_thread(pid_t tid, int nice_value) {
    int fault = cshim_fault(CSHIM_FAULT_SET_PRIORITY);
    if (fault != 0) { errno = fault; return -1; }
    return setpriority(PRIO_PROCESS, (id_t)tid, nice_value);
}

int cshim_getpriority_thread(pid_t tid) {
    errno = 0;
    return getpriority(PRIO_PROCESS, (id_t)tid);
}

__thread void *cshim_tls_context = 0;

int cshim_sched_getaffinity_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
    return CPU_COUNT(&set);
}

int cshim_pthread_mutex_init(pthread_mutex_t *mutex, int kind) {
    pthread_mutexattr_t attr;
    int err = pthread_mutexattr_init(&attr);
    if (err != 0) return err;
    int type = PTHREAD_MUTEX_NORMAL;
    if (kind == CSHIM_MUTEX_RECURSIVE) type = PTHREAD_MUTEX_RECURSIVE;
    else if (kind == CSHIM_MUTEX_ERRORCHECK) type = PTHREAD_MUTEX_ERRORCHECK;
    else if (kind == CSHIM_MUTEX_ADAPTIVE) type = PTHREAD_MUTEX_ADAPTIVE_NP;
    err = pthread_mutexattr_settype(&attr, type);
    if (err == 0) err = pthread_mutex_init(mutex, &attr);
    int destroyErr = pthread_mutexattr_destroy(&attr);
    return err != 0 ? err : destroyErr;
}

int cshim_pthread_cond_init_monotonic(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    int err = pthread_condattr_init(&attr);
    if (err != 0) return err;
    err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (err == 0) err = pthread_cond_init(cond, &attr);
    int destroyErr = pthread_condattr_destroy(&attr);
    return err != 0 ? err : destroyErr;
}

// A spurious wakeup as the kernel makes one: the mutex is released and taken again, and other threads may run
// in between, but nobody signalled.
static int cshim_spurious_wakeup(pthread_mutex_t *mutex) {
    int err = pthread_mutex_unlock(mutex);
    if (err != 0) return err;
    sched_yield();
    return pthread_mutex_lock(mutex);
}

int cshim_pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex) {
    if (cshim_fault(CSHIM_FAULT_COND_WAIT) != 0) return cshim_spurious_wakeup(mutex);
    return pthread_cond_wait(cond, mutex);
}

int cshim_pthread_cond_timedwait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns) {
    if (cshim_fault(CSHIM_FAULT_COND_WAIT) != 0) return cshim_spurious_wakeup(mutex);
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
    ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
    return pthread_cond_timedwait(cond, mutex, &ts);
}

#define CSHIM_PARKER_EMPTY 0u
#define CSHIM_PARKER_NOTIFIED 1u
#define CSHIM_PARKER_PARKED UINT32_MAX

int cshim_parker_park(cshim_parker *parker) {
    int fault = cshim_fault(CSHIM_FAULT_PARK);
    if (fault != 0) {
        sched_yield();
        return fault;
    }
    // NOTIFIED -> EMPTY (take it and return), or EMPTY -> PARKED.
    if (__atomic_fetch_sub(&parker->state, 1u, __ATOMIC_ACQUIRE) == CSHIM_PARKER_NOTIFIED) return 0;
    for (;;) {
        // Sleeps only while the word still says PARKED; EINTR and EAGAIN just look again.
        syscall(SYS_futex, &parker->state, FUTEX_WAIT_PRIVATE, CSHIM_PARKER_PARKED, NULL, NULL, 0);
        uint32_t expected = CSHIM_PARKER_NOTIFIED;
        if (__atomic_compare_exchange_n(&parker->state, &expected, CSHIM_PARKER_EMPTY, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_ACQUIRE))
            return 0;
    }
}

void cshim_parker_unpark(cshim_parker *parker) {
    if (__atomic_exchange_n(&parker->state, CSHIM_PARKER_NOTIFIED, __ATOMIC_RELEASE) == CSHIM_PARKER_PARKED)
        syscall(SYS_futex, &parker->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

uint64_t cshim_fork_generation_value = 0;
static pthread_once_t cshim_fork_once = PTHREAD_ONCE_INIT;
static int cshim_fork_track_error = 0;

static void cshim_fork_child(void) { __atomic_add_fetch(&cshim_fork_generation_value, 1, __ATOMIC_RELAXED); }

static void cshim_fork_register(void) { cshim_fork_track_error = pthread_atfork(NULL, NULL, cshim_fork_child); }

int cshim_fork_generation_track(void) {
    pthread_once(&cshim_fork_once, cshim_fork_register);
    return cshim_fork_track_error;
}

// The CPU the caller runs on, or -1 (see the header).
int cshim_current_cpu(void) { return sched_getcpu(); }
