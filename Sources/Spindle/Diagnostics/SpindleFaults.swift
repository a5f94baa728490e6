import CShim
import Glibc
import Synchronization

/// The fault seam: makes the calls that can fail for reasons outside Spindle's control fail on a schedule, so
/// tests and the stress binary exercise every failure path on purpose. For tests only: import it with
/// `@_spi(Faults) import Spindle`.
///
/// Why a hook in the C shim: every such call already goes through `CShim` (thread creation, stack size, names,
/// priorities, the run loop's eventfd, condition waits), so one check there covers them all, in-process, for one
/// test at a time and at the moment the test chooses, with nothing to rebuild. A compile-time flag (as
/// swift-system does for its mocking) would need a second build of the library for CI; an `LD_PRELOAD` library
/// would hit every `pthread_create` of the process (the test runner's, the Swift runtime's) and could not be
/// scoped to one scenario. When no schedule is set the hook is not installed, and each call pays one load of a
/// null pointer and a branch.
///
/// State: one `SiteState` per site, all atomics (the hook runs on any thread, under any lock of ours and inside
/// condition waits, so it takes no lock and never waits). Setting a schedule while other threads are calling is
/// allowed; which of the racing calls fails is then unspecified. The hook is installed by the first `inject` and
/// removed by `reset()`.
@_spi(Faults) public enum SpindleFaults {
    /// The calls the seam can make fail, and what a failure looks like there.
    public enum Site: Int, CaseIterable, Sendable {
        /// `pthread_create`: the thread is not created (default error EAGAIN).
        case threadCreate
        /// `pthread_attr_setstacksize`, when a stack size is asked (default error EINVAL).
        case stackSize
        /// `pthread_setname_np` (default error ERANGE).
        case threadName
        /// `setpriority` for one thread (default error EPERM).
        case threadPriority
        /// `eventfd`, when a run loop opens its wakeup descriptor (default error EMFILE).
        case eventDescriptor
        /// `pthread_cond_wait` / `pthread_cond_timedwait`: the wait returns at once, unsignalled (a spurious wakeup).
        case conditionWait
        /// A queue worker's park (`cshim_parker_park`): it returns at once, unnotified (a spurious wakeup).
        case park

        var defaultError: Int32 {
            switch self {
            case .threadCreate: EAGAIN
            case .stackSize: EINVAL
            case .threadName: ERANGE
            case .threadPriority: EPERM
            case .eventDescriptor: EMFILE
            case .conditionWait: 1
            case .park: 1
            }
        }
    }

    /// When a site fails.
    public enum Schedule: Sendable, Equatable {
        /// Never (the site is off).
        case never
        /// Every call, from now on.
        case always
        /// Every `n`th call from now on (the `n`th, the `2n`th…); `n` must be at least 1.
        case everyNth(Int)
        /// Each call with probability `p` (0…1), drawn from a stream seeded with `seed` (the draw depends on the
        /// call's number at this site, so one seed gives one pattern of failures over the calls).
        case probability(Double, seed: UInt64)
        /// The next `n` calls, then never again.
        case next(Int)
    }

    /// Makes `site` fail on `schedule` with `error` (nil: the site's default error), counting from now.
    ///
    /// `onlyOnThisThread`: only calls made by the calling thread count and fail (other threads' calls at this
    /// site go through untouched and uncounted). That is how a test in a process that runs other tests at the
    /// same time faults its own calls: a thread start that the test's own add triggers, a helper its own block
    /// operation asks for. Process-wide schedules are for a process of their own (the stress binary's fault pass).
    /// - Precondition: `everyNth` at least 1, `next` at least 0, a probability within 0…1.
    public static func inject(_ site: Site, _ schedule: Schedule, error: Int32? = nil, onlyOnThisThread: Bool = false) {
        var scope: UInt64 = 0
        if onlyOnThisThread {
            scope = cshim_fault_scope_get()
            if scope == 0 {
                scope = self.nextScope.wrappingAdd(1, ordering: .relaxed).newValue
                cshim_fault_scope_set(scope)
            }
        }
        let state = self.sites[site.rawValue]
        state.configure(schedule, error: error ?? site.defaultError, scope: scope)
        cshim_fault_install(spindleFaultHook)
    }

    /// Turns every site off, removes the hook and zeroes the counts.
    public static func reset() {
        cshim_fault_install(nil)
        for state in self.sites { state.configure(.never, error: 0, scope: 0) }
    }

    /// Failures injected at `site` since its schedule was set.
    public static func injected(_ site: Site) -> Int { self.sites[site.rawValue].injected.load(ordering: .relaxed) }

    /// Calls that asked at `site` since its schedule was set (failed or not).
    public static func calls(_ site: Site) -> Int { self.sites[site.rawValue].calls.load(ordering: .relaxed) }

    fileprivate static let sites: [SiteState] = Site.allCases.map { _ in SiteState() }
    private static let nextScope = Atomic<UInt64>(0)
}

/// One site's schedule and counts (atomics: see `SpindleFaults`).
private final class SiteState: Sendable {
    private static let never = 0, always = 1, everyNth = 2, probability = 3, next = 4

    let mode = Atomic<Int>(SiteState.never)
    let parameter = Atomic<UInt64>(0)  // n, the probability scaled to 2^32, or the calls left
    let seed = Atomic<UInt64>(0)
    let scope = Atomic<UInt64>(0)  // 0: every thread; else only threads whose `cshim_fault_scope_get()` is this
    let error = Atomic<Int32>(0)
    let calls = Atomic<Int>(0)
    let injected = Atomic<Int>(0)

    func configure(_ schedule: SpindleFaults.Schedule, error: Int32, scope: UInt64) {
        self.mode.store(SiteState.never, ordering: .sequentiallyConsistent)
        self.scope.store(scope, ordering: .relaxed)
        self.calls.store(0, ordering: .relaxed)
        self.injected.store(0, ordering: .relaxed)
        self.error.store(error, ordering: .relaxed)
        switch schedule {
        case .never: return
        case .always:
            self.mode.store(SiteState.always, ordering: .sequentiallyConsistent)
        case .everyNth(let n):
            precondition(n >= 1, "SpindleFaults: everyNth needs n >= 1")
            self.parameter.store(UInt64(n), ordering: .relaxed)
            self.mode.store(SiteState.everyNth, ordering: .sequentiallyConsistent)
        case .probability(let p, let seed):
            precondition(p >= 0 && p <= 1, "SpindleFaults: a probability is within 0...1")
            self.parameter.store(UInt64(p * 4_294_967_296), ordering: .relaxed)
            self.seed.store(seed, ordering: .relaxed)
            self.mode.store(SiteState.probability, ordering: .sequentiallyConsistent)
        case .next(let n):
            precondition(n >= 0, "SpindleFaults: next needs n >= 0")
            self.parameter.store(UInt64(n), ordering: .relaxed)
            self.mode.store(SiteState.next, ordering: .sequentiallyConsistent)
        }
    }

    /// The seam's answer for one call: 0, or the error to report.
    func decide() -> Int32 {
        let mode = self.mode.load(ordering: .sequentiallyConsistent)
        if mode == SiteState.never { return 0 }
        let scope = self.scope.load(ordering: .relaxed)
        if scope != 0 && cshim_fault_scope_get() != scope { return 0 }
        let call = UInt64(self.calls.wrappingAdd(1, ordering: .relaxed).oldValue) + 1
        let fails: Bool
        switch mode {
        case SiteState.always: fails = true
        case SiteState.everyNth: fails = call % max(self.parameter.load(ordering: .relaxed), 1) == 0
        case SiteState.probability:
            fails = SiteState.mix(self.seed.load(ordering: .relaxed) &+ call) >> 32
                < self.parameter.load(ordering: .relaxed)
        default:  // next: take one of the calls left, if any
            var left = self.parameter.load(ordering: .relaxed)
            var took = false
            while left > 0 {
                let (exchanged, original) = self.parameter.compareExchange(
                    expected: left, desired: left - 1, ordering: .relaxed)
                if exchanged {
                    took = true
                    break
                }
                left = original
            }
            fails = took
        }
        guard fails else { return 0 }
        self.injected.wrappingAdd(1, ordering: .relaxed)
        return self.error.load(ordering: .relaxed)
    }

    /// splitmix64's output function: a well-mixed 64-bit value for each input.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The hook the shim calls (a C function pointer: no captures).
private let spindleFaultHook: cshim_fault_hook = { site in
    guard site >= 0 && Int(site) < SpindleFaults.sites.count else { return 0 }
    return SpindleFaults.sites[Int(site)].decide()
}
