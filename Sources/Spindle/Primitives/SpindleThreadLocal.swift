import Glibc
import Synchronization

/// A value per thread, for the threads that touch it; each thread's value is released when that thread exits.
///
/// Guards: nothing shared; each thread only ever sees its own slot: a `pthread_key_t` of its own, or, once the
/// process has run out of keys (glibc allows 1,024), an entry in the thread's own `ThreadContext`
/// (`overflowLocals`, keyed by a number unique to this thread-local) instead of trapping. The key is created in
/// `init` and deleted in `deinit` (values still held by live threads are then leaked by POSIX; keep thread-locals
/// alive as long as the threads that use them, normally forever as `static let`); overflow entries are released
/// when their thread exits.
public final class SpindleThreadLocal<Value>: @unchecked Sendable {
    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    /// nil once the process ran out of keys: the values then live in each thread's `ThreadContext`.
    private let key: pthread_key_t?
    private let overflowID: UInt64
    private let initial: @Sendable () -> Value

    /// `initial` makes a thread's value the first time that thread reads it.
    public init(initial: @escaping @Sendable () -> Value) {
        self.initial = initial
        ThreadContext.makeKey()  // first: the overflow storage needs it once keys run out
        var key = pthread_key_t()
        let err = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<AnyObject>.fromOpaque(pointer).release()
        }
        if err == EAGAIN {  // out of keys: a condition callers can reach, not a bug of ours
            self.key = nil
            self.overflowID = ThreadLocalOverflow.nextID.wrappingAdd(1, ordering: .relaxed).newValue
        } else {
            checkPthread(err, "pthread_key_create")
            self.key = key
            self.overflowID = 0
        }
    }

    deinit {
        if let key = self.key { checkPthread(pthread_key_delete(key), "pthread_key_delete") }
    }

    private func box() -> Box {
        guard let key = self.key else { return self.overflowBox() }
        if let raw = pthread_getspecific(key) {
            return Unmanaged<Box>.fromOpaque(raw).takeUnretainedValue()
        }
        let box = Box(self.initial())
        checkPthread(pthread_setspecific(key, Unmanaged.passRetained(box as AnyObject).toOpaque()),
                     "pthread_setspecific")
        return box
    }

    /// The calling thread's box when this thread-local has no key of its own.
    private func overflowBox() -> Box {
        let context = ThreadContext.current
        if let box = context.overflowLocals[self.overflowID] { return unsafeDowncast(box, to: Box.self) }
        let box = Box(self.initial())  // before the insert: `initial` may read thread-locals of its own
        context.overflowLocals[self.overflowID] = box
        return box
    }

    /// The calling thread's value.
    public var value: Value {
        get { self.box().value }
        set { self.box().value = newValue }
    }
}

/// The numbers that key thread-locals made after the process ran out of pthread keys (see `SpindleThreadLocal`).
enum ThreadLocalOverflow {
    static let nextID = Atomic<UInt64>(0)
}
