/// A gated operation's gate: its conditions and exclusivity categories, and its place in `ExclusivityController`.
/// Lives in the operation's side object (`OperationExtras.gate`), created by the first `addCondition` or
/// `addExclusivityCategory`; an operation without a gate has none and pays nothing for it.
///
/// Guards (two locks, for two halves that never mix):
/// - `conditions`, `categories`, `enqueuedUnready`, `barrierAhead`, `produced`, `produceFailure`: the owning
///   operation's `lockWord` (the queue writes `barrierAhead` while it also holds its own lock). `conditions` and
///   `categories` change only while the operation is `idle` (`OperationState.gating`); once it is enqueued they are
///   fixed, and the gate's steps read them under that lock, then act outside it.
/// - `phase`, `order`, `held`, `operation`, `controller`, `lineNext`, `linePrev`: `ExclusivityController.lock`.
///
/// State machine (`phase`, under the controller's lock; forward only):
/// - `outside`: not known to the controller (its gate has not opened yet, or it has no category).
///   → `holding` / `waiting`: its gate opened and it asked for its categories (`ExclusivityController.acquire`).
///   → `done`: cancelled or finished first (a late `acquire` then does nothing).
/// - `waiting`: holds `order[0..<held]`, queued in the line of `order[held]`.
///   → `waiting` (a later category) / `holding`: that category's holder released it and handed it over.
///   → `done`: cancelled (its `cancel()`, or found cancelled when its turn came); what it held is handed on.
/// - `holding`: holds every category of `order`. → `done`: finished, or cancelled before it began executing.
/// - `done`: holds nothing, in no line, and `operation` is nil (the reference cycle operation → side object →
///   gate → operation, which exists only while the controller knows the gate, is broken).
final class OperationGate {
    enum Phase: Equatable {
        case outside, waiting, holding, done
    }

    // Under the owning operation's lock.
    @exclusivity(unchecked) var conditions: [any SpindleOperationCondition] = []
    /// Sorted, without duplicates: the order in which the categories are acquired.
    @exclusivity(unchecked) var categories: [String] = []
    /// Set when it was enqueued, if taking the gate's hold made it not ready (then `isReady → false` is reported).
    @exclusivity(unchecked) var enqueuedUnready = false
    /// The barrier it was held behind when its queue admitted it (retained until the gate takes it).
    @exclusivity(unchecked) var barrierAhead: SpindleOperation? = nil
    /// During an add: the dependencies its conditions produced (taken back if the add fails), and the first
    /// failure to adopt one (applied once the add succeeded).
    @exclusivity(unchecked) var produced: [SpindleOperation] = []
    @exclusivity(unchecked) var produceFailure: (condition: String, error: any Error)? = nil

    // Under `ExclusivityController.lock`.
    @exclusivity(unchecked) var phase = Phase.outside
    /// `categories` as they were when it entered the controller.
    @exclusivity(unchecked) var order: [String] = []
    /// How many of `order` it holds (a prefix).
    @exclusivity(unchecked) var held = 0
    /// The operation, retained while the controller knows the gate (`waiting` or `holding`), so that a grant can
    /// continue its gate on another thread.
    @exclusivity(unchecked) var operation: SpindleOperation? = nil
    /// The controller that knows it (a forked child has its own: see `ExclusivityController`).
    @exclusivity(unchecked) var controller: ObjectIdentifier? = nil
    /// The next gate in the line it waits in (retained by the line).
    @exclusivity(unchecked) var lineNext: OperationGate? = nil
    @exclusivity(unchecked) var linePrev: Unmanaged<OperationGate>? = nil

    /// Adds `category` to `categories`, keeping them sorted and distinct. Under the operation's lock.
    func insertCategory(_ category: String) {
        var low = 0
        var high = self.categories.count
        while low < high {
            let mid = (low + high) / 2
            if self.categories[mid] < category { low = mid + 1 } else { high = mid }
        }
        if low < self.categories.count && self.categories[low] == category { return }
        self.categories.insert(category, at: low)
    }
}
