import Glibc

/// A value per thread, for the threads that touch it; each thread's value is released when that thread exits.
///
/// Guards: nothing shared; each thread only ever sees its own slot (a `pthread_key_t`). The key is created in
/// `init` and deleted in `deinit` (values still held by live threads are then leaked by POSIX; keep thread-locals
/// alive as long as the threads that use them, normally forever as `static let`).
public final class SpindleThreadLocal<Value>: @unchecked Sendable {
    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private var key = pthread_key_t()
    private let initial: @Sendable () -> Value

    /// `initial` makes a thread's value the first time that thread reads it.
    public init(initial: @escaping @Sendable () -> Value) {
        self.initial = initial
        let err = pthread_key_create(&self.key) { pointer in
            guard let pointer else { return }
            Unmanaged<AnyObject>.fromOpaque(pointer).release()
        }
        checkPthread(err, "pthread_key_create")
    }

    deinit {
        checkPthread(pthread_key_delete(self.key), "pthread_key_delete")
    }

    private func box() -> Box {
        if let raw = pthread_getspecific(self.key) {
            return Unmanaged<Box>.fromOpaque(raw).takeUnretainedValue()
        }
        let box = Box(self.initial())
        checkPthread(pthread_setspecific(self.key, Unmanaged.passRetained(box as AnyObject).toOpaque()),
                     "pthread_setspecific")
        return box
    }

    /// The calling thread's value.
    public var value: Value {
        get { self.box().value }
        set { self.box().value = newValue }
    }
}
