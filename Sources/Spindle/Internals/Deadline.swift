import CShim

/// A point in time on CLOCK_MONOTONIC, in nanoseconds. Every timed wait in Spindle takes one, or a
/// `Duration` that is turned into one here, so that huge, infinite and negative timeouts are handled in one
/// place: negative or zero means "now" (poll), anything past ~584 years saturates to `.distantFuture`.
public struct SpindleDeadline: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds on CLOCK_MONOTONIC.
    public let uptimeNanoseconds: UInt64

    /// The instant `uptimeNanoseconds` on CLOCK_MONOTONIC (compare with `now.uptimeNanoseconds`); `UInt64.max` is
    /// `distantFuture`. Any thread; throws nothing.
    public init(uptimeNanoseconds: UInt64) { self.uptimeNanoseconds = uptimeNanoseconds }

    /// The current time.
    public static var now: SpindleDeadline { SpindleDeadline(uptimeNanoseconds: cshim_clock_monotonic_ns()) }

    /// A deadline that never passes.
    public static let distantFuture = SpindleDeadline(uptimeNanoseconds: UInt64.max)

    /// `timeout` from now; negative or zero timeouts give `now`, huge ones saturate to `distantFuture`.
    public static func after(_ timeout: Duration) -> SpindleDeadline {
        let now = cshim_clock_monotonic_ns()
        let (seconds, attos) = timeout.clampedComponents
        if seconds < 0 || (seconds == 0 && attos <= 0) { return SpindleDeadline(uptimeNanoseconds: now) }
        if seconds >= Int64(UInt64.max / 1_000_000_000) { return .distantFuture }
        let ns = UInt64(seconds) * 1_000_000_000 + UInt64(attos / 1_000_000_000)
        let (sum, overflow) = now.addingReportingOverflow(ns)
        return overflow ? .distantFuture : SpindleDeadline(uptimeNanoseconds: sum)
    }

    /// `seconds` from now, for callers holding a floating-point timeout. NaN throws
    /// `SpindleError.invalidTimeout`; +infinity gives `distantFuture`; negative, zero and -infinity give `now`.
    public static func after(seconds: Double) throws(SpindleError) -> SpindleDeadline {
        if seconds.isNaN { throw .invalidTimeout }
        if seconds <= 0 { return .now }
        if seconds >= 1.8e10 { return .distantFuture }  // past ~570 years: saturate before converting
        let ns = UInt64(seconds * 1e9)
        let (sum, overflow) = cshim_clock_monotonic_ns().addingReportingOverflow(ns)
        return overflow ? .distantFuture : SpindleDeadline(uptimeNanoseconds: sum)
    }

    /// Whether the deadline has passed.
    public var hasPassed: Bool { self.uptimeNanoseconds <= cshim_clock_monotonic_ns() }

    /// Time left until the deadline, zero if it has passed.
    public var remaining: Duration {
        let now = cshim_clock_monotonic_ns()
        guard self.uptimeNanoseconds > now else { return .zero }
        let left = self.uptimeNanoseconds - now
        return .nanoseconds(Int64(clamping: left))
    }

    /// Whether `lhs` comes before `rhs` on the monotonic clock. Any thread; throws nothing.
    public static func < (lhs: SpindleDeadline, rhs: SpindleDeadline) -> Bool {
        lhs.uptimeNanoseconds < rhs.uptimeNanoseconds
    }

    /// "distantFuture", or "uptime N ns" (for diagnostics). Any thread; throws nothing.
    public var description: String {
        self == .distantFuture ? "distantFuture" : "uptime \(self.uptimeNanoseconds) ns"
    }
}

extension Duration {
    /// `components`, with the seconds clamped to `Int64`'s range first: a `Duration` holds up to about 1.7e20
    /// seconds either way, and `components` traps beyond `Int64.max` seconds. Every timeout and interval Spindle
    /// converts goes through this, so a huge one saturates instead of trapping.
    var clampedComponents: (seconds: Int64, attoseconds: Int64) {
        if self >= .seconds(Int64.max) { return (Int64.max, 0) }
        if self <= .seconds(Int64.min) { return (Int64.min, 0) }
        return self.components
    }
}
