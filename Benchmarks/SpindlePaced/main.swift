// `spindle-paced`: issue 17's paced and bursty loads, Spindle beside libdispatch's global queue and NIOThreadPool,
// with every peer's threads all its own.
//
//     swift run -c release spindle-paced [--rounds N] [--control] [--seed S] [LOAD ...]
//
// LOAD is `10us`, `500us`, `5ms` … (one empty item per period), `burst` (64 items every 2 ms), `roundtrip`
// (20,000 back-to-back submit→run→signal trips, waiting on a `DispatchSemaphore`) or `sweep` (the paces of the
// plot, 10 µs to 10 ms: `spindle-paced --rounds 3 sweep > sweep.txt`, then `python3 Benchmarks/plot_paced.py
// sweep.txt Benchmarks/paced.png`); by default 10us 20us 50us 500us 5ms burst roundtrip, 5 rounds. Every paced
// load also runs the floor: the item run inline by the pacing thread, whose CPU per item is that thread's own share. The harness is the suite's (`runPacedLoad`, the `PacedLoad` target).
// What differs is the pacing thread: here it is this process's main thread, which belongs to no peer. In the
// benchmark suite it is one of libdispatch's own threads, which leaves `DispatchQueue.global()` a thread short
// (`Benchmarks/SpindleBenchmarks/Paced.swift`). Within a round the peers run one after another, in a fresh order
// each round; each line is one run (for bursts, with the median start latency at some positions in the burst
// under it). The summary gives, per load, each peer's median and Spindle's ratio to
// libdispatch per round (the targets are ratios in one run).
//
// `--control` adds an A/A control: a second Spindle queue and a second run of libdispatch's global queue join every
// round as peers of their own, and the summary also gives each one's ratio to its twin in the same round. Identical
// code compared with itself shows how far a one-run ratio strays by chance on this machine.
//
// `--seed S` runs each round's peers in a shuffled order (drawn from S) instead of the rotation, so that no peer
// keeps running right after the same other peer: a run can be coloured by the one before it (threads that linger,
// caches, the CPUs' idle states).
import Glibc
import PacedLoad

struct Peer {
    let name: String
    let make: (StartStamps) -> PacedTarget
}

var peers = [
    Peer(name: "Spindle", make: QueuePeers.spindle),
    Peer(name: "DispatchQueue.global", make: QueuePeers.dispatchGlobal),
    Peer(name: "NIOThreadPool", make: QueuePeers.nioPool),
    Peer(name: "no hand-off (inline on the pacing thread)", make: QueuePeers.inline),
]

/// The A/A control (`--control`): these peers run twice a round, the second time under the name with `twinSuffix`.
let twinned = ["Spindle", "DispatchQueue.global"]
let twinSuffix = ", again"

/// Parses `10us`, `2ms` or `burst` into a load of about 0.3 s, as the suite's sweep does.
func load(_ text: String) -> PacedLoad? {
    if text == "burst" { return PacedLoad(period: 2_000_000, burst: 64, ops: 64 * 250) }
    for (suffix, scale) in [("us", 1_000), ("ms", 1_000_000)] where text.hasSuffix(suffix) {
        guard let n = Int(text.dropLast(2)), n > 0 else { return nil }
        return .steady(every: n * scale, seconds: 0.3, minimum: 50, maximum: 20_000)
    }
    return nil
}

func usage(_ message: String) -> Never {
    print("spindle-paced: \(message)\nusage: spindle-paced [--rounds N] [--control] [--seed S] "
          + "[10us|500us|5ms|burst|roundtrip|sweep ...]")
    exit(2)
}

var rounds = 5
var control = false
var seed: UInt64? = nil
var names: [String] = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--rounds" {
        guard let text = arguments.popFirst(), let n = Int(text), n > 0 else { usage("--rounds takes a count") }
        rounds = n
    } else if argument == "--control" {
        control = true
    } else if argument == "--seed" {
        guard let text = arguments.popFirst(), let s = UInt64(text) else { usage("--seed takes a number") }
        seed = s
    } else {
        names.append(argument)
    }
}
if names.isEmpty { names = ["10us", "20us", "50us", "500us", "5ms", "burst", "roundtrip"] }
names = names.flatMap { name in
    name == "sweep" ? ["10us", "20us", "50us", "100us", "200us", "500us", "1ms", "2ms", "5ms", "10ms"] : [name]
}
let loads = names.filter { $0 != "roundtrip" }.map { name -> (String, PacedLoad) in
    guard let parsed = load(name) else { usage("unknown load \(name)") }
    return (name, parsed)
}

/// `hundredths` as a number with two decimals.
func twoDecimals(_ hundredths: Int) -> String {
    "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
}

/// Nanoseconds as microseconds with two decimals.
func microseconds(_ ns: Int) -> String { "\(twoDecimals((ns + 5) / 10)) µs" }

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The median of one figure over a peer's runs, as microseconds.
func median<R>(_ runs: [R], _ figure: KeyPath<R, Int>) -> String {
    microseconds(Int(median(runs.map { Double($0[keyPath: figure]) })))
}

/// The shuffled orders of `--seed`, the same for the same seed: a 64-bit linear congruential generator (Knuth's
/// MMIX constants) whose high half, the better-mixed one, makes each draw. Good enough to order a handful of peers.
struct OrderGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        let high = self.step() >> 32
        return high << 32 | self.step() >> 32
    }

    private mutating func step() -> UInt64 {
        self.state = self.state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return self.state
    }
}
nonisolated(unsafe) var orders = seed.map { OrderGenerator(state: $0) }
if let seed { print("peer order: shuffled each round, seed \(seed)") }

/// `rounds` rounds of every peer (named by `name`), in a fresh order each round (rotated, or shuffled with
/// `--seed`); prints each run with `describe`. Returns each peer's runs, by name.
func runRounds<P, R>(
    _ peers: [P], rounds: Int, name: (P) -> String, run: (P) -> R, describe: (R) -> String
) -> [String: [R]] {
    var results: [String: [R]] = [:]
    for round in 0..<rounds {
        var order = Array(0..<peers.count).map { ($0 + round) % peers.count }
        if orders != nil { order.shuffle(using: &orders!) }
        for k in order {
            let peer = peers[k]
            let result = run(peer)
            results[name(peer), default: []].append(result)
            print("round \(round + 1) \(name(peer)): \(describe(result))")
        }
    }
    return results
}

/// Spindle's figure over libdispatch's, per round, and their median; with `--control`, also each twin pair's.
func printRatios<R>(_ results: [String: [R]], _ figures: [(String, KeyPath<R, Int>)], control: Bool) {
    var pairs = [("Spindle / libdispatch", "Spindle", "DispatchQueue.global")]
    if control {
        pairs += [("A/A control, Spindle / Spindle", "Spindle", "Spindle" + twinSuffix),
                  ("A/A control, libdispatch / libdispatch", "DispatchQueue.global", "DispatchQueue.global" + twinSuffix)]
    }
    for (title, top, bottom) in pairs {
        let tops = results[top]!, bottoms = results[bottom]!
        for (label, figure) in figures {
            let ratios = zip(tops, bottoms).map { Double($0[keyPath: figure]) / Double($1[keyPath: figure]) }
            let text = ratios.map { twoDecimals(Int(($0 * 100).rounded())) }.joined(separator: ", ")
            print("\(title), \(label): \(text) (median \(twoDecimals(Int((median(ratios) * 100).rounded()))))")
        }
    }
}

if control { peers += peers.filter { twinned.contains($0.name) }.map { Peer(name: $0.name + twinSuffix, make: $0.make) } }

for (name, load) in loads {
    print("== \(name == "burst" ? "bursts of 64 every 2 ms" : "one item every \(load.periodLabel)"), \(load.ops) items a run")
    let results = runRounds(peers, rounds: rounds, name: \.name, run: { runPacedLoad(load, $0.make) }) { result in
        "CPU per item \(microseconds(result.cpuPerOp)), start p50 \(microseconds(result.startP50)), p99 "
            + "\(microseconds(result.startP99)), pace \(microseconds(result.wallPerOp))"
            + (result.positions.isEmpty ? "" : "\n  median start by position in the burst: "
                + result.positions.map { "\($0.position): \(microseconds($0.medianStart))" }.joined(separator: ", "))
    }
    for peer in peers {
        let runs = results[peer.name]!
        print("median \(peer.name): CPU per item \(median(runs, \.cpuPerOp)), p50 \(median(runs, \.startP50)), "
              + "p99 \(median(runs, \.startP99)), pace \(median(runs, \.wallPerOp))")
    }
    printRatios(results, [("CPU", \.cpuPerOp), ("p50", \.startP50), ("p99", \.startP99)], control: control)
}

if names.contains("roundtrip") {
    let trips = 20_000
    print("== back-to-back round trips, \(trips) a run, DispatchSemaphore waiter")
    var tripPeers = RoundTrips.peers
    if control {
        tripPeers += tripPeers.filter { twinned.contains($0.name) }.map { $0.renamed($0.name + twinSuffix) }
    }
    let results = runRounds(tripPeers, rounds: rounds, name: \.name, run: { RoundTrips.run($0, trips: trips) }) { result in
        "\(microseconds(result.wallPerTrip)) a trip, CPU \(microseconds(result.cpuPerTrip)) a trip"
    }
    for peer in tripPeers {
        let runs = results[peer.name]!
        print("median \(peer.name): \(median(runs, \.wallPerTrip)) a trip, CPU \(median(runs, \.cpuPerTrip)) a trip")
    }
    printRatios(results, [("wall", \.wallPerTrip), ("CPU", \.cpuPerTrip)], control: control)
}
