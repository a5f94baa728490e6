#define _GNU_SOURCE
#include "CMallocCounter.h"

#include <stdatomic.h>
#include <stddef.h>
#include <errno.h>
#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CM_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CM_SANITIZED 1
#endif

#ifdef CM_SANITIZED
int cm_available(void) { return 0; }
void cm_thread_begin(void) {}
long cm_thread_end(void) { return -1; }
void cm_tag_thread(void) {}
void cm_global_begin(void) {}
long cm_global_end(void) { return -1; }
long cm_usable_size(const void *p) { (void)p; return -1; }
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread int thread_counting;
static __thread long thread_count;
static __thread int thread_tagged;
static atomic_int global_counting;
static atomic_long global_count;

static inline void count_one(void) {
    if (thread_counting) thread_count++;
    if (thread_tagged && atomic_load_explicit(&global_counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&global_count, 1, memory_order_relaxed);
}

void *malloc(size_t n) { count_one(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count_one(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count_one(); return __libc_realloc(p, n); }
void *aligned_alloc(size_t align, size_t n) { count_one(); return __libc_memalign(align, n); }
void *memalign(size_t align, size_t n) { count_one(); return __libc_memalign(align, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    count_one();
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void free(void *p) { __libc_free(p); }

int cm_available(void) { return 1; }
void cm_thread_begin(void) { thread_count = 0; thread_counting = 1; }
long cm_thread_end(void) { thread_counting = 0; return thread_count; }
void cm_tag_thread(void) { thread_tagged = 1; }
long cm_usable_size(const void *p) { return (long)malloc_usable_size((void *)p); }
void cm_global_begin(void) {
    atomic_store(&global_count, 0);
    atomic_store(&global_counting, 1);
}
long cm_global_end(void) {
    atomic_store(&global_counting, 0);
    return atomic_load(&global_count);
}
#endif
