import Benchmark

/// Every suite registers its scenarios here. Each scenario is measured for Spindle and, in the same run, for the
/// peers that have an equivalent: Foundation, Dispatch, NIOThreadPool and raw pthreads.
let benchmarks: @Sendable () -> Void = {
    registerThroughputBenchmarks()
    registerGraphBenchmarks()
    registerLatencyBenchmarks()
    registerRunLoopBenchmarks()
    registerPrimitiveBenchmarks()
    registerMemoryBenchmarks()
    registerAsyncBenchmarks()
    registerPacedBenchmarks()
    registerPoolBenchmarks()
}
