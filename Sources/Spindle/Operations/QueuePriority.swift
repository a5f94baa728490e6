extension SpindleOperation {
    /// Where an operation stands among the ready operations of its queue (NSOperationQueuePriority).
    public enum QueuePriority: Int, CaseIterable, Comparable, Sendable {
        case veryLow = -8, low = -4, normal = 0, high = 4, veryHigh = 8

        /// Any raw value, moved toward `normal` until it meets a level: ±10000 → veryHigh/veryLow, -6 → low,
        /// ±2 → normal, +6 → high (Apple's rounding).
        public static func rounding(_ raw: Int) -> QueuePriority {
            if raw >= 8 { return .veryHigh }
            if raw >= 4 { return .high }
            if raw > -4 { return .normal }
            if raw > -8 { return .low }
            return .veryLow
        }

        /// 0 (veryLow) … 4 (veryHigh): the queue's bucket index.
        var bucket: Int { (self.rawValue + 8) / 4 }

        /// Whether `a` is a lower priority than `b` (`veryLow` < `low` < `normal` < `high` < `veryHigh`). Any thread;
        /// throws nothing.
        public static func < (a: QueuePriority, b: QueuePriority) -> Bool { a.rawValue < b.rawValue }
    }
}
