// The paced-load harness, shared by the benchmark suite (`Benchmarks/SpindleBenchmarks/Paced.swift`) and the
// standalone `spindle-paced` (`Benchmarks/SpindlePaced`): one thread hands items to a peer on a schedule, and a run
// reports the process's CPU per item and the items' start latency. See `runPacedLoad` for the method.

/// A load: `burst` items every `period` nanoseconds, `ops` items in all (a multiple of `burst`).
public struct PacedLoad: Sendable {
    public let period: Int
    public let burst: Int
    public let ops: Int

    public init(period: Int, burst: Int, ops: Int) {
        self.period = period
        self.burst = burst
        self.ops = ops
    }

    /// One item every `period`, as many as fit in about `seconds` (at least `minimum`, at most `maximum`).
    public static func steady(every period: Int, seconds: Double = 0.5, minimum: Int = 50, maximum: Int = .max)
        -> PacedLoad
    {
        PacedLoad(period: period, burst: 1, ops: min(maximum, max(minimum, Int(seconds * 1e9) / period)))
    }

    /// "50 µs", "2 ms".
    public var periodLabel: String {
        self.period % 1_000_000 == 0 ? "\(self.period / 1_000_000) ms" : "\(self.period / 1_000) µs"
    }
}

/// One peer, set up fresh for a run. `submit(i)` hands item `i` over to it, and the item's first act, on whatever
/// thread runs it, is `stamps.stamp(i)`. `tearDown` runs after the measurement.
public struct PacedTarget {
    public let submit: (Int) -> Void
    public var tearDown: () -> Void

    public init(submit: @escaping (Int) -> Void, tearDown: @escaping () -> Void = {}) {
        self.submit = submit
        self.tearDown = tearDown
    }
}

/// What one run measured, in nanoseconds.
public struct PacedResult: Sendable {
    /// The process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`, every thread) over the paced part, per item.
    public let cpuPerOp: Int
    /// Nearest-rank p50 and p99 of (first stamp inside the item) − (stamp before the hand-over).
    public let startP50: Int
    public let startP99: Int
    /// Wall clock of the paced part, per item: the pace achieved.
    public let wallPerOp: Int
    /// For a load in bursts: the median start latency at some positions in a burst (`runPacedLoad` picks 0, 1, 2,
    /// 4, 7, 8, 16, 32, 48 and the last); empty for one item per period.
    public let positions: [BurstPosition]
}

/// The median submit→start latency (ns) of the items at one position in their burst (0: each burst's first).
public struct BurstPosition: Sendable {
    public let position: Int
    public let medianStart: Int
}
