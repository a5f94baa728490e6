/// An operation whose work ends after `start()` returns (the seeds' `MyOperation`): `start()` spawns a detached
/// Spindle thread that runs `main()`, and the operation stays executing until the subclass calls `finish()` —
/// from `main`, or later from any thread (a callback). `finish()` can happen once; a second call throws.
///
/// If `main` throws, the operation finishes at once with that error. In a queue it holds one concurrency slot
/// until it finishes, but gives the worker thread back as soon as `start()` returns.
///
/// Threading: `start()` from any thread; `main()` on the new thread; `finish()` from any thread.
open class SpindleConcurrentOperation: SpindleOperation, @unchecked Sendable {
    /// A concurrent operation: ready, not executing, not cancelled, normal priority. Any thread; throws nothing.
    public override init() { super.init() }

    /// Always true: the work ends when `finish()` is called, after `start()` has returned. Any thread.
    open override var isAsynchronous: Bool { true }

    /// Moves into `executing` and spawns the thread that runs `main`. A cancelled operation finishes unrun.
    /// - Throws: as `SpindleOperation.start()`, or `SpindleError.system` if no thread could be created (the
    ///   operation is then finished with that error, so nothing waits forever).
    open override func start() throws {
        guard try self.beginExecuting() else { return }
        do {
            try SpindleThread.detach(name: self.name ?? "spindle-op", entry: self)
        } catch {
            try? self.finish(throwing: error)
            throw error
        }
    }

    /// Reports the end of the work (see `SpindleOperation.finish(throwing:)`). Disfavoured, as that one is, so
    /// that a subclass's own `finish(_ errors: [Error] = [])` is what its plain `finish()` calls.
    @_disfavoredOverload
    public final func finish() throws(SpindleError) { try self.finish(throwing: nil) }
}

extension SpindleConcurrentOperation: SpawnedThreadEntry {
    /// The thread `start()` spawned runs this: `main`, then, if `main` threw, the finish with that error. The
    /// thread keeps the operation alive until it returns.
    final func runOnSpawnedThread() {
        self.runMainOnThisThread()
        if let error = self.error { try? self.finish(throwing: error) }
    }
}
