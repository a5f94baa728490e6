import Glibc
import Spindle

// spindle-stress: runs the stress scenarios of RELIABILITY.md B.3 (scaled for a small machine) against Spindle
// and reports operations, rates and invariant violations. Exit status: 0 clean, 1 violations, 2 usage error,
// 3 watchdog (a scenario made no progress for 20 s, or --watchdog SECONDS).

struct Scenario {
    let name: String
    let summary: String
    let invariants: [String]
    let run: (ScenarioContext) -> Void
}

let allScenarios: [Scenario] = [
    Scenario(name: "dag", summary: "random DAGs over 4 queues (widths 1, 2, ncpu, 8), adds from N threads",
             invariants: DagScenario.invariants, run: DagScenario.run),
    Scenario(name: "cancel", summary: "cancels at random moments from several threads, plus cancelAll",
             invariants: CancelScenario.invariants, run: CancelScenario.run),
    Scenario(name: "width", summary: "high-water mark of running ops vs widths 1, 2, 3, 8",
             invariants: WidthScenario.invariants, run: WidthScenario.run),
    Scenario(name: "priority", summary: "suspended serial queue, 5 levels shuffled: order on resume",
             invariants: PriorityScenario.invariants, run: PriorityScenario.run),
    Scenario(name: "barrier", summary: "barriers between segments of ops on two queues",
             invariants: BarrierScenario.invariants, run: BarrierScenario.run),
    Scenario(name: "concurrent", summary: "concurrent ops finishing from other threads, finish races",
             invariants: ConcurrentScenario.invariants, run: ConcurrentScenario.run),
    Scenario(name: "suspend", summary: "suspend/resume and limit changes (incl. 0) while a producer adds",
             invariants: SuspendScenario.invariants, run: SuspendScenario.run),
    Scenario(name: "semaphore", summary: "semaphore exactness, permit conservation, bad and huge timeouts",
             invariants: SemaphoreScenario.invariants, run: SemaphoreScenario.run),
    Scenario(name: "fork", summary: "fork() with a busy queue: the child is refused the parent's queue, runs its own",
             invariants: ForkScenario.invariants, run: ForkScenario.run),
    Scenario(name: "misuse", summary: "API misuse: typed errors, state unchanged",
             invariants: MisuseScenario.invariants, run: MisuseScenario.run),
    Scenario(name: "churn", summary: "queue create/destroy; threads and fds back to baseline",
             invariants: ChurnScenario.invariants, run: ChurnScenario.run),
    Scenario(name: "blocks", summary: "block operations with 1-200 blocks, on queues and by hand, cancels, racing adds",
             invariants: BlocksScenario.invariants, run: BlocksScenario.run),
    Scenario(name: "selfwait", summary: "waits on itself / its own queue throw; waits on others succeed",
             invariants: SelfWaitScenario.invariants, run: SelfWaitScenario.run),
    Scenario(name: "runloop", summary: "port and perform storms into one run loop; ops parked in their run loop",
             invariants: RunLoopScenario.invariants, run: RunLoopScenario.run),
    Scenario(name: "timers", summary: "one-shot and repeating timers: once, never early, none after invalidate",
             invariants: TimersScenario.invariants, run: TimersScenario.run),
    Scenario(name: "backpressure", summary: "bounded queues, 3 policies, timed/batch/async producers faster than the queue",
             invariants: BackpressureScenario.invariants, run: BackpressureScenario.run),
    Scenario(name: "shutdown", summary: "queues shut down (drain, cancel, escalate) while producers add and block",
             invariants: ShutdownScenario.invariants, run: ShutdownScenario.run),
    Scenario(name: "retry", summary: "retry operations with random plans, backoffs, cancels and deadlines",
             invariants: RetryScenario.invariants, run: RetryScenario.run),
    Scenario(name: "group", summary: "group operations (nested, cancelled, late adds, follow-ups) and produced operations",
             invariants: GroupScenario.invariants, run: GroupScenario.run),
    Scenario(name: "gate", summary: "conditions and exclusivity categories on 3 queues: overlaps, outcomes, cancels",
             invariants: GatedScenario.invariants, run: GatedScenario.run),
]

let usage = """
    usage: spindle-stress [options]
      --scenarios a,b,c   scenarios to run, in this order (default: all; see --list)
      --duration SECONDS  time per scenario (default 4.5; the default pass takes about 90 s)
      --ops N             cap on operations per scenario (default 2000000)
      --threads N         adder/canceller threads (default 4)
      --seed N            seed (decimal or 0x hex; default: random, printed at start)
      --json PATH         also write a JSON report to PATH
      --faults            the fault pass: thread starts fail (20 %), 1 % spurious condition wakeups, renames and
                          priority changes fail (30 %), a SIGUSR1 storm without SA_RESTART (see Faults.swift)
      --pool N            run every scenario queue on one shared SpindleThreadPool of N threads
      --watchdog SECONDS  stall limit: no progress for this long dumps the live queues, exit 3 (default 20)
      --list              list the scenarios and exit
      --help              this text
    exit status: 0 no violations, 1 violations (the seed is printed), 2 usage error, 3 watchdog (a scenario made
    no progress for the stall limit: live queues are dumped)
    """

@MainActor func usageError(_ message: String) -> Never {
    Output.error("spindle-stress: \(message)\n\(usage)")
    exit(2)
}

func parseSeed(_ s: String) -> UInt64? {
    if s.hasPrefix("0x") || s.hasPrefix("0X") { return UInt64(s.dropFirst(2), radix: 16) }
    return UInt64(s)
}

@MainActor func parseArguments() -> StressConfig {
    var config = StressConfig(scenarios: allScenarios.map(\.name), seed: UInt64.random(in: 1...UInt64.max))
    let argv = Array(CommandLine.arguments.dropFirst())
    var index = 0
    while index < argv.count {
        let arg = argv[index]
        index += 1
        var flag = arg
        var inline: String? = nil
        if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
            flag = String(arg[..<eq])
            inline = String(arg[arg.index(after: eq)...])
        }
        func v() -> String {
            if let inline { return inline }
            guard index < argv.count else { usageError("\(flag) needs a value") }
            index += 1
            return argv[index - 1]
        }
        switch flag {
        case "--help", "-h":
            Output.line(usage)
            exit(0)
        case "--list":
            for s in allScenarios { Output.line("\(s.name.padding(12)) \(s.summary)") }
            exit(0)
        case "--scenarios":
            let names = v().split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
            for n in names where !allScenarios.contains(where: { $0.name == n }) {
                usageError("unknown scenario '\(n)' (known: \(allScenarios.map(\.name).joined(separator: ", ")))")
            }
            if names.isEmpty { usageError("--scenarios needs at least one name") }
            config.scenarios = names
        case "--duration":
            guard let d = Double(v()), d.isFinite, d > 0, d <= 86_400 else { usageError("--duration needs seconds > 0") }
            config.duration = d
        case "--ops":
            guard let n = Int(v()), n > 0 else { usageError("--ops needs a positive integer") }
            config.opsCap = n
        case "--threads":
            guard let n = Int(v()), n > 0, n <= 256 else { usageError("--threads needs an integer in 1...256") }
            config.threads = n
        case "--seed":
            guard let s = parseSeed(v()) else { usageError("--seed needs an unsigned integer") }
            config.seed = s
        case "--json":
            config.jsonPath = v()
        case "--watchdog":
            guard let d = Double(v()), d.isFinite, d > 0 else { usageError("--watchdog needs seconds > 0") }
            config.stallSeconds = d
        case "--faults":
            config.faults = true
        case "--pool":
            guard let n = Int(v()), n > 0, n <= 256 else { usageError("--pool needs an integer in 1...256") }
            config.poolThreads = n
        default:
            usageError("unknown option '\(arg)'")
        }
    }
    return config
}

extension String {
    func padding(_ width: Int) -> String { self.count >= width ? self : self + String(repeating: " ", count: width - self.count) }
    func leftPadding(_ width: Int) -> String { self.count >= width ? self : String(repeating: " ", count: width - self.count) + self }
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
    var jsonEscaped: String {
        var out = "\""
        for u in self.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else { out.unicodeScalars.append(u) }
            }
        }
        return out + "\""
    }
}

// MARK: - Run

let config = parseArguments()
let startNs = nowNs()
let startThreads = threadCount()
let startFds = fdCount()
let startRss = residentBytes()
Output.line("spindle-stress: seed \(config.seed)  scenarios \(config.scenarios.joined(separator: ","))  "
    + "duration \(fmt(config.duration)) s each  ops cap \(config.opsCap)  threads \(config.threads)  ncpu \(config.ncpu)")
Watchdog.start(stallSeconds: config.stallSeconds)
if let threads = config.poolThreads {
    StressPool.start(threads: threads)
    Output.line("queues on one SpindleThreadPool of \(threads) threads")
}
if config.faults { FaultPass.start(seed: config.seed) }

var results: [ScenarioResult] = []
for (i, name) in config.scenarios.enumerated() {
    let scenario = allScenarios.first { $0.name == name }!
    let seed = SplitMix64.derive(config.seed, UInt64(i + 1) &* 0x100 &+ UInt64(allScenarios.firstIndex { $0.name == name }!))
        .seedValue
    let ctx = ScenarioContext(name: name, invariants: scenario.invariants + ["live-objects"], config: config, seed: seed)
    let rssBefore = residentBytes()
    let liveBefore = LiveObjects.snapshot
    Watchdog.setScenario(ctx)
    scenario.run(ctx)
    // Memory back to baseline: every operation and queue the scenario made must be freed (bounded wait).
    LiveObjects.settle(ctx, baseline: liveBefore)
    Watchdog.setScenario(nil)
    ctx.figure("rss", "\(mib(rssBefore))->\(mib(residentBytes())) MiB")
    var r = ctx.result()
    r.rssStart = rssBefore
    r.rssEnd = residentBytes()
    results.append(r)
    Output.clearProgress()
    Output.line("\(name.padding(10)) \(String(r.ops).leftPadding(9)) ops  \(fmt(Double(r.ops) / max(r.seconds, 1e-9), 0).leftPadding(9)) ops/s  "
        + "\(fmt(r.seconds))s  violations \(r.total)")
}
let faultSummary = config.faults ? FaultPass.stop() : nil
let totalSeconds = Double(nowNs() - startNs) / 1e9
let endRss = residentBytes()

// MARK: - Table

func detailText(_ r: ScenarioResult) -> String {
    var parts = ["\(r.violations.count) checked"]
    let bad = r.violations.filter { $0.1 > 0 }.map { "\($0.0)=\($0.1)" }
    if !bad.isEmpty { parts.append("VIOLATED " + bad.joined(separator: " ")) }
    parts += r.figures.map { "\($0.0) \($0.1)" }
    return parts.joined(separator: "; ")
}

var table = "\n" + "scenario".padding(11) + "ops".leftPadding(10) + "ops/s".leftPadding(11) + "time".leftPadding(8)
    + "viol".leftPadding(6) + "  invariants checked (violated ones named) / figures\n"
table += String(repeating: "-", count: 118) + "\n"
for r in results {
    table += r.name.padding(11) + String(r.ops).leftPadding(10)
        + fmt(Double(r.ops) / max(r.seconds, 1e-9), 0).leftPadding(11) + (fmt(r.seconds) + "s").leftPadding(8)
        + String(r.total).leftPadding(6) + "  " + detailText(r) + "\n"
}
let grand = results.reduce(0) { $0 + $1.total }
let totalOps = results.reduce(0) { $0 + $1.ops }
table += String(repeating: "-", count: 118) + "\n"
table += "total".padding(11) + String(totalOps).leftPadding(10) + "".leftPadding(11) + (fmt(totalSeconds) + "s").leftPadding(8)
    + String(grand).leftPadding(6) + "  threads \(startThreads)->\(threadCount()), fds \(startFds)->\(fdCount()), "
    + "rss \(mib(startRss))->\(mib(endRss)) MiB (reported, not checked); harness objects: "
    + "\(LiveObjects.operationsCreated.load(ordering: .relaxed)) ops and \(LiveObjects.queuesCreated.load(ordering: .relaxed)) "
    + "queues created, \(LiveObjects.operations.load(ordering: .relaxed)) ops and \(LiveObjects.liveQueues.count) queues alive\n"
Output.line(table)
if let faultSummary { Output.line(faultSummary) }

if grand > 0 {
    Output.line("FAILED: \(grand) violation(s). First examples:")
    for r in results where r.total > 0 {
        for e in r.examples.prefix(4) { Output.line("  [\(r.name)] \(e)") }
    }
    Output.line("reproduce with: spindle-stress --seed \(config.seed) --scenarios \(config.scenarios.joined(separator: ",")) "
        + "--duration \(fmt(config.duration)) --threads \(config.threads)")
} else {
    Output.line("OK: no violations (seed \(config.seed))")
}

// MARK: - JSON

if let path = config.jsonPath {
    var json = "{\n  \"seed\": \(config.seed),\n  \"duration\": \(config.duration),\n  \"opsCap\": \(config.opsCap),\n"
    json += "  \"threads\": \(config.threads),\n  \"ncpu\": \(config.ncpu),\n  \"totalSeconds\": \(totalSeconds),\n"
    json += "  \"violations\": \(grand),\n  \"rssStartBytes\": \(startRss),\n  \"rssEndBytes\": \(endRss),\n"
    json += "  \"operationsCreated\": \(LiveObjects.operationsCreated.load(ordering: .relaxed)),\n"
    json += "  \"operationsAlive\": \(LiveObjects.operations.load(ordering: .relaxed)),\n"
    json += "  \"queuesCreated\": \(LiveObjects.queuesCreated.load(ordering: .relaxed)),\n"
    json += "  \"queuesAlive\": \(LiveObjects.liveQueues.count),\n  \"scenarios\": [\n"
    json += results.map { r in
        var s = "    {\"name\": \(r.name.jsonEscaped), \"ops\": \(r.ops), \"seconds\": \(r.seconds), "
        s += "\"opsPerSecond\": \(Double(r.ops) / max(r.seconds, 1e-9)), \"violations\": \(r.total), "
        s += "\"rssStartBytes\": \(r.rssStart), \"rssEndBytes\": \(r.rssEnd),\n"
        s += "     \"invariants\": {" + r.violations.map { "\($0.0.jsonEscaped): \($0.1)" }.joined(separator: ", ") + "},\n"
        s += "     \"figures\": {" + r.figures.map { "\($0.0.jsonEscaped): \($0.1.jsonEscaped)" }.joined(separator: ", ") + "},\n"
        s += "     \"examples\": [" + r.examples.map(\.jsonEscaped).joined(separator: ", ") + "]}"
        return s
    }.joined(separator: ",\n")
    json += "\n  ]\n}\n"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    if fd < 0 {
        Output.error("spindle-stress: cannot write \(path): errno \(errno)")
    } else {
        Output.raw(fd, json)
        close(fd)
    }
}

exit(grand > 0 ? 1 : 0)
