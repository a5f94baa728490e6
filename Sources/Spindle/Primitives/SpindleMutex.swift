import CShim
import Glibc

/// A pthread mutex on the heap, so it never moves.
///
/// Guards: nothing of its own; it is what callers use to guard their state. The pthread object is allocated in
/// `init` and destroyed in `deinit`; it must not be locked when the mutex is released.
///
/// Kinds: `.normal` (the fast default; relocking from the owner deadlocks, as POSIX says), `.recursive` (the owner
/// may lock again; unlock as often), `.errorChecking` (relocking or unlocking from a non-owner reports an error
/// instead of deadlocking: `lock`/`unlock` trap with the error number; `tryLock` by the owner returns false),
/// `.adaptive` (as `.normal`, but a contended `lock` spins briefly before sleeping: for short critical sections
/// taken by several threads at once). Debug builds use `.errorChecking` for `.normal` and `.adaptive` mutexes so
/// misuse is caught early.
public final class SpindleMutex: @unchecked Sendable {
    /// The pthread mutex types.
    public enum Kind: Sendable { case normal, recursive, errorChecking, adaptive }

    @usableFromInline let raw: UnsafeMutablePointer<pthread_mutex_t>
    /// The kind given to `init` (debug builds may run a `.normal` mutex as `.errorChecking`).
    public let kind: Kind

    /// A new, unlocked mutex of `kind` (see the type). Any thread. Traps only if pthread cannot create it (out of
    /// memory); throws nothing.
    public init(_ kind: Kind = .normal) {
        self.kind = kind
        self.raw = .allocate(capacity: 1)
        var cKind: Int32
        switch kind {
        case .normal:
            cKind = Int32(CSHIM_MUTEX_NORMAL)
            assert({ cKind = Int32(CSHIM_MUTEX_ERRORCHECK); return true }())
        case .adaptive:
            cKind = Int32(CSHIM_MUTEX_ADAPTIVE)
            assert({ cKind = Int32(CSHIM_MUTEX_ERRORCHECK); return true }())
        case .recursive: cKind = Int32(CSHIM_MUTEX_RECURSIVE)
        case .errorChecking: cKind = Int32(CSHIM_MUTEX_ERRORCHECK)
        }
        checkPthread(cshim_pthread_mutex_init(self.raw, cKind), "pthread_mutex_init")
    }

    deinit {
        checkPthread(pthread_mutex_destroy(self.raw), "pthread_mutex_destroy")
        self.raw.deallocate()
    }

    /// Locks, blocking until the mutex is free. Traps on misuse of an error-checking mutex (relocking).
    @inlinable public func lock() {
        let err = pthread_mutex_lock(self.raw)
        precondition(err == 0, "SpindleMutex.lock: pthread_mutex_lock failed with error \(err) (relocked?)")
    }

    /// Unlocks. Traps when an error-checking mutex is unlocked by a thread that does not own it.
    @inlinable public func unlock() {
        let err = pthread_mutex_unlock(self.raw)
        precondition(err == 0, "SpindleMutex.unlock: pthread_mutex_unlock failed with error \(err) (not owner?)")
    }

    /// Locks if free; returns whether it did. Never blocks.
    @inlinable public func tryLock() -> Bool {
        let err = pthread_mutex_trylock(self.raw)
        if err == 0 { return true }
        precondition(err == EBUSY || err == EDEADLK, "pthread_mutex_trylock failed with error \(err)")
        return false
    }

    /// Runs `body` with the mutex held and returns its result. The mutex is released even if `body` throws.
    @inlinable public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        self.lock()
        defer { self.unlock() }
        return try body()
    }
}
