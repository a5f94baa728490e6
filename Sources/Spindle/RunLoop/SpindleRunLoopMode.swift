extension SpindleRunLoop {
    /// A run-loop mode: a name that selects which sources, timers and performs a run serves.
    ///
    /// Sources are registered per mode. Running a mode serves the sources registered in it; sources registered
    /// in `.common` are also served in every mode of the loop's common set (which holds `.default` and whatever
    /// `SpindleRunLoop.addCommonMode(_:)` added). A plain value: any thread may make and compare modes.
    public struct Mode: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
        /// The mode's name; two modes are the same mode exactly when their names are equal.
        public let name: String

        /// A mode named `name`. Any thread.
        public init(_ name: String) { self.name = name }

        /// A mode from a string literal (`let tracking: SpindleRunLoop.Mode = "tracking"`). Any thread.
        public init(stringLiteral value: String) { self.name = value }

        /// The mode `run()` and `run(until:)` use, and a member of every loop's common set.
        public static let `default` = Mode("SpindleDefaultRunLoopMode")

        /// Not a mode that is run but a set: a source added in `.common` is served in every common mode of its
        /// loop (`.default` plus those given to `addCommonMode`).
        public static let common = Mode("SpindleCommonRunLoopModes")

        /// The mode's name. Any thread.
        public var description: String { self.name }
    }
}
