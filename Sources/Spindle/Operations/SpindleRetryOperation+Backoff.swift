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

        /// The wait before attempt `attempt` (zero for the first). Any thread.
        public func delay(beforeAttempt attempt: Int) -> Duration {
            guard attempt >= 2 else { return .zero }
            let firstSeconds = Self.seconds(self.first), maximumSeconds = Self.seconds(self.maximum)
            var seconds = firstSeconds
            for _ in 0..<(attempt - 2) {
                seconds *= self.multiplier
                if seconds >= maximumSeconds { return self.maximum }
            }
            return seconds >= maximumSeconds ? self.maximum : .nanoseconds(Int64(seconds * 1e9))
        }

        /// "exponential from 0.1 s ×2 up to 30 s", "constant 1 s", "immediately". Any thread.
        public var description: String {
            if self.maximum == .zero { return "immediately" }
            if self.multiplier == 1 || self.first == self.maximum { return "constant \(self.first)" }
            return "exponential from \(self.first) ×\(self.multiplier) up to \(self.maximum)"
        }

        private static func seconds(_ duration: Duration) -> Double {
            let (s, attoseconds) = duration.components
            return Double(s) + Double(attoseconds) / 1e18
        }
    }
}
