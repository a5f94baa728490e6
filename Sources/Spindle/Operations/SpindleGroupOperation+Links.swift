/// The link from a child to its group (`OperationExtras.parentGroup`, under the child's lock) and what follows it:
/// linking and unlinking a child, whether an operation is inside a group (waits from inside are refused), and
/// the cycle check of `addOperation`.
///
/// Who uncounts a child: whoever takes its link. The child's finish path takes it in `releaseWaiters` and tells the
/// group (`childDidSettle`); a failed add takes it back in `leaveGroup`. Both take it under the child's lock, so
/// exactly one of them does, and the group's count is released exactly once per child.
extension SpindleOperation {
    /// Links this operation to `group` as a child, and sets `hasWaiters` so its finish path looks for the link.
    /// Only an idle operation of no group can be linked; otherwise returns the error to throw (nothing changed).
    /// The inner queue's add, which follows, checks the lifecycle again atomically.
    final func joinGroup(_ group: SpindleGroupOperation) -> SpindleError? {
        let error = self.withLocked { l -> SpindleError? in
            let name = l.name ?? self.defaultName
            switch self.currentState.lifecycle {
            case .idle: break
            case .enqueued, .dispatching: return .operationAlreadyInQueue(name: name)
            case .executing: return .operationExecuting(name: name)
            case .finishing, .finished: return .operationFinished(name: name)
            }
            // Linked to a group but still idle: another thread is adding it to a group right now.
            if l.parentGroup != nil { return .operationAlreadyInQueue(name: name) }
            l.more.parentGroup = group
            return nil
        }
        // Before the inner queue's add publishes it to a worker, so the finish path (which runs after) sees it.
        if error == nil { self.hasWaiters.store(true, ordering: .sequentiallyConsistent) }
        return error
    }

    /// Undoes `joinGroup` after a failed add: returns true if it took the link back (the caller uncounts the
    /// child), false if the finish path took it first (and told the group, which uncounted it).
    final func leaveGroup(_ group: SpindleGroupOperation) -> Bool {
        self.withLocked { l -> Bool in
            guard let extras = l.extras, extras.parentGroup === group else { return false }
            extras.parentGroup = nil
            return true
        }
    }

    /// The group this operation is a child of, until its finish path is complete; nil otherwise.
    final var parentGroup: SpindleGroupOperation? { self.withLocked { $0.parentGroup } }
}

extension SpindleGroupOperation {
    /// Whether `operation` is this group or is inside it, at any depth (following the child → group links up, one
    /// operation's lock at a time). O(depth).
    final func encloses(_ operation: SpindleOperation?) -> Bool {
        var node = operation
        while let current = node {
            if current === self { return true }
            node = current.parentGroup
        }
        return false
    }
}
