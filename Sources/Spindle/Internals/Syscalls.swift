import CShim
import Glibc

// The one place where raw pthread and libc return codes are checked. Programmer errors (a pthread call that
// can only fail when Spindle itself is wrong, or EBADF/EFAULT on a descriptor) trap with the call's name;
// conditions a caller can meet (EAGAIN from pthread_create, EPERM from setpriority) come back as errors.

/// Traps unless a pthread-style call returned 0. For calls that fail only on a bug in Spindle.
@usableFromInline @inline(__always)
func checkPthread(_ result: Int32, _ function: StaticString = #function, file: StaticString = #fileID,
                  line: UInt = #line) {
    precondition(result == 0, "\(function): pthread call failed with error \(result)", file: file, line: line)
}

/// Runs a syscall-style call, retrying on EINTR; traps on EBADF and EFAULT (a bug, not a condition).
/// Returns the result, or throws `SpindleError.system` with errno.
@inline(__always)
func retryingOnEINTR(_ name: StaticString, _ body: () -> Int32) throws(SpindleError) -> Int32 {
    while true {
        let result = body()
        if result != -1 { return result }
        let err = cshim_errno()
        if err == EINTR { continue }
        precondition(err != EBADF && err != EFAULT, "\(name): unacceptable errno \(err) (a bug in Spindle)")
        throw .system(function: "\(name)", errno: err)
    }
}

/// The number of CPUs this process may run on (its affinity mask), at least 1.
public func spindleActiveProcessorCount() -> Int {
    let n = cshim_sched_getaffinity_count()
    if n > 0 { return Int(n) }
    let online = sysconf(Int32(_SC_NPROCESSORS_ONLN))
    return online > 0 ? online : 1
}
