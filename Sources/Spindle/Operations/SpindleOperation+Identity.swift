/// Operations and queues are reference objects with an identity, as `NSObject`s are in Foundation: two values are
/// equal when they are the same object, and hash by that identity. So `firstIndex(of:)`, `contains`, `Set` and
/// dictionary keys work as ported code expects. Subclasses cannot redefine equality (Foundation's `isEqual:`
/// overrides are rare for operations; compare a field of your own instead).
extension SpindleOperation: Hashable {
    /// Whether `a` and `b` are the same operation. Any thread; no lock.
    public static func == (a: SpindleOperation, b: SpindleOperation) -> Bool { a === b }

    /// Hashes the object's identity. Any thread; no lock.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension SpindleOperationQueue: Hashable {
    /// Whether `a` and `b` are the same queue. Any thread; no lock.
    public static func == (a: SpindleOperationQueue, b: SpindleOperationQueue) -> Bool { a === b }

    /// Hashes the object's identity. Any thread; no lock.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
