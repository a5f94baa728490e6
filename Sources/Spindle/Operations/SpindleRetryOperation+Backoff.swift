import Glibc

extension SpindleRetryOperation {
    /// How long a retry waits before each attempt after the first: `first` before the second attempt, multiplied
    /// by `multiplier` for each one after, never more than `maximum`. Negative durations count as zero; a
    /// multiplier below 1 (or not a number) counts as 1.
    public struct Backoff: Sendable, Hashable, CustomStringConvertible {
        /// The wait before the second attempt.
        public let first: Duration
        /// The factor between one wait and the next.
        public let multiplier: Double
        /// The longest wait.
        public let maximum: Duration

        /// `first`, then `first × multiplier`, … up to `maximum`.
        public init(first: Duration, multiplier: Double, maximum: Duration) {
            self.first = max(first, .zero)
            self.multiplier = multiplier >= 1 ? multiplier : 1
            self.maximum = max(maximum, self.first)
        }

        /// No wait between attempts.
        public static let immediately = Backoff(first: .zero, multiplier: 1, maximum: .zero)

        /// The same wait before every attempt after the first.
        public static func constant(_ delay: Duration) -> Backoff {
            Backoff(first: delay, multiplier: 1, maximum: delay)
        }

        /// A wait that doubles (by default) from `first`, up to `maximum` (default 30 s).
        public static func exponential(first: Duration, multiplier: Double = 2,
                                       maximum: Duration = .seconds(30)) -> Backoff {
            Backoff(first: first, multiplier: multiplier, maximum: maximum)
        }

        /// The wait before attempt `attempt` (zero for the first). Any thread; O(1) for any attempt number, and no
        /// overflow however large the durations. Computed in `Double` seconds: exact to the nanosecond below about
        /// 104 days (2^53 ns), within a nanosecond per 2^53 beyond.
        public func delay(beforeAttempt attempt: Int) -> Duration {
            guard attempt >= 2, self.first > .zero else { return .zero }
            if self.multiplier == 1 { return self.first }
            // first × multiplier^(attempt − 2), in closed form: pow overflows to +infinity, never traps, and an
            // infinite multiplier reaches `maximum` from the third attempt on.
            let maximumSeconds = Self.seconds(self.maximum)
            let seconds = Self.seconds(self.first) * pow(self.multiplier, Double(attempt - 2))
            guard seconds < maximumSeconds else { return self.maximum }
            return Self.duration(seconds) ?? self.maximum
        }

        /// "exponential from 0.1 s ×2 up to 30 s", "constant 1 s", "immediately". Any thread.
        public var description: String {
            if self.maximum == .zero { return "immediately" }
            if self.multiplier == 1 || self.first == self.maximum { return "constant \(self.first)" }
            return "exponential from \(self.first) ×\(self.multiplier) up to \(self.maximum)"
        }

        /// `seconds` (finite, not negative) as a duration, nanosecond-exact; nil beyond `Int64.max` seconds (about
        /// 292 billion years), which the caller reads as `maximum`.
        private static func duration(_ seconds: Double) -> Duration? {
            let whole = seconds.rounded(.down)
            guard whole < 9.2e18 else { return nil }
            return .seconds(Int64(whole)) + .nanoseconds(Int64(((seconds - whole) * 1e9).rounded()))
        }

        private static func seconds(_ duration: Duration) -> Double {
            let (s, attoseconds) = duration.clampedComponents
            return Double(s) + Double(attoseconds) / 1e18
        }
    }
}
