// Test-only allocation counter: overrides malloc and friends in the test executable and counts calls, so tests
// can assert how many allocations an operation or an enqueue costs. Under a sanitizer that owns malloc
// (ThreadSanitizer, AddressSanitizer) nothing is overridden and `cm_available()` returns 0.
#ifndef CMALLOC_COUNTER_H
#define CMALLOC_COUNTER_H

/// 1 when counting works in this build, 0 under sanitizers.
int cm_available(void);
/// Starts counting allocations made by the calling thread only (resets its count).
void cm_thread_begin(void);
/// Stops counting on the calling thread and returns how many allocations it made since `cm_thread_begin`.
long cm_thread_end(void);
/// Marks the calling thread as one whose allocations the global count includes (tests run in parallel, so the
/// count must not include other tests' threads).
void cm_tag_thread(void);
/// Starts counting allocations made by every tagged thread (resets the global count).
void cm_global_begin(void);
/// Stops global counting and returns the count.
long cm_global_end(void);
/// glibc's usable size of a block it allocated (at least what was requested); -1 under sanitizers.
long cm_usable_size(const void *p);

#endif
