/// Where an operation is in its queue, and so who owns the one reference the queue holds to it (see `QueueCore`,
/// "References"). One byte in the operation, written only under its queue's lock.
///
/// States and transitions (each under the queue's lock, by the named path):
/// - `outside` → `held` | `pending`: admission (`QueueCore.admitLocked`): held if a barrier is pending ahead of it;
/// - `held` → `pending`: the barrier gate lets it go (`releaseHeldLocked`);
/// - `pending` → `ready`: it is scheduled and pushed into its bucket (`pushLocked`);
/// - `ready` → `pending`: its priority changed (out of its bucket, to be pushed into another at once);
/// - `ready` → `taken`: a worker takes it to run (`takeNextLocked`);
/// - `ready` → `reserved`: a worker reserves it to run next (`reserveLocked`); `reserved` → `ready`: given back
///   unclaimed (`returnReservationLocked`). A claimed reserved operation stays `reserved` until its worker's
///   bookkeeping unlinks it (claiming happens without the lock);
/// - `taken` → `handedBack`: its `start()` returned on the worker while it still executes (a concurrent operation);
/// - `taken` | `reserved` | `handedBack` → `outside`: it finished and was unlinked (`unlinkFinishedLocked`).
/// Nothing else moves it; an operation is a member of its queue exactly while it is not `outside`.
///
/// Who owns the queue's reference: the inbox while it is `outside` and pushed there (before admission); the member
/// list in `held`, `pending`, `ready` and `handedBack`; the worker that took or reserved it in `taken` and
/// `reserved`. Unlinking an operation the list owns hands its reference to the unlinking path, which drops it after
/// unlocking.
enum QueuePlacement: UInt8 {
    case outside
    case held
    case pending
    case ready
    case reserved
    case taken
    case handedBack

    /// A member of its queue (linked in the member list).
    @inline(__always)
    var isMember: Bool { self != .outside }

    /// Whether the state machine above allows `self` → `next`.
    func allows(_ next: QueuePlacement) -> Bool {
        switch (self, next) {
        case (.outside, .held), (.outside, .pending), (.held, .pending), (.pending, .ready), (.ready, .pending),
            (.ready, .taken), (.ready, .reserved), (.reserved, .ready), (.taken, .handedBack),
            (.taken, .outside), (.reserved, .outside), (.handedBack, .outside):
            return true
        default:
            return false
        }
    }

    /// Moves to `next`, checking the transition in debug builds. Caller holds the queue's lock.
    @inline(__always)
    mutating func move(to next: QueuePlacement) {
        assert(self.allows(next), "QueuePlacement: \(self) → \(next) is not a transition")
        self = next
    }

    /// The member list owns the queue's reference to it.
    @inline(__always)
    var listOwnsReference: Bool {
        switch self {
        case .held, .pending, .ready, .handedBack: return true
        case .outside, .reserved, .taken: return false
        }
    }
}
