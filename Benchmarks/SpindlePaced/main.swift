// `spindle-paced`: issue 17's paced and bursty loads, Spindle beside libdispatch's global queue and NIOThreadPool,
// with every peer's threads all its own.
//
//     swift run -c release spindle-paced [--rounds N] [LOAD ...]
//
// LOAD is `10us`, `500us`, `5ms` … (one empty item per period), `burst` (64 items every 2 ms), `roundtrip`
// (20,000 back-to-back submit→run→signal trips, waiting on a `DispatchSemaphore`) or `sweep` (the paces of the
// plot, 10 µs to 10 ms: `spindle-paced --rounds 3 sweep > sweep.txt`, then `python3 Benchmarks/plot_paced.py
// sweep.txt Benchmarks/paced.png`); by default 10us 20us 50us 500us 5ms burst roundtrip, 5 rounds. Every paced
// load also runs the floor: the item run inline by the pacing thread, whose CPU per item is that thread's own share. The harness is the suite's (`runPacedLoad`, the `PacedLoad` target).
// What differs is the pacing thread: here it is this process's main thread, which belongs to no peer. In the
// benchmark suite it is one of libdispatch's own threads, which leaves `DispatchQueue.global()` a thread short
// (`Benchmarks/SpindleBenchmarks/Paced.swift`). Within a round the peers run one after another, in a fresh order
// each round; each line is one run. The summary gives, per load, each peer's median and Spindle's ratio to
// libdispatch per round (the targets are ratios in one run).
import Glibc
import PacedLoad

struct Peer {
    let name: String
    let make: (StartStamps) -> PacedTarget
}

let peers = [
    Peer(name: "Spindle", make: QueuePeers.spindle),
    Peer(name: "DispatchQueue.global", make: QueuePeers.dispatchGlobal),
    Peer(name: "NIOThreadPool", make: QueuePeers.nioPool),
    Peer(name: "no hand-off (inline on the pacing thread)", make: QueuePeers.inline),
]

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
    print("spindle-paced: \(message)\nusage: spindle-paced [--rounds N] [10us|500us|5ms|burst|roundtrip|sweep ...]")
    exit(2)
}

var rounds = 5
var names: [String] = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--rounds" {
        guard let text = arguments.popFirst(), let n = Int(text), n > 0 else { usage("--rounds takes a count") }
        rounds = n
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

/// Nanoseconds as microseconds with two decimals.
func microseconds(_ ns: Int) -> String {
    let hundredths = (ns + 5) / 10
    return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100) µs"
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func ratio(_ x: Double) -> String {
    let hundredths = Int((x * 100).rounded())
    return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
}

for (name, load) in loads {
    print("== \(name == "burst" ? "bursts of 64 every 2 ms" : "one item every \(load.periodLabel)"), \(load.ops) items a run")
    var results: [String: [PacedResult]] = [:]
    for round in 0..<rounds {
        let count = peers.count
        for k in 0..<count {
            let peer = peers[(k + round) % count]  // a fresh order each round
            let result = runPacedLoad(load, peer.make)
            results[peer.name, default: []].append(result)
            print("round \(round + 1) \(peer.name): CPU per item \(microseconds(result.cpuPerOp)), start p50 "
                  + "\(microseconds(result.startP50)), p99 \(microseconds(result.startP99)), pace "
                  + "\(microseconds(result.wallPerOp))")
        }
    }
    for peer in peers {
        let runs = results[peer.name]!
        print("median \(peer.name): CPU per item \(microseconds(Int(median(runs.map { Double($0.cpuPerOp) })))), "
              + "p50 \(microseconds(Int(median(runs.map { Double($0.startP50) })))), "
              + "p99 \(microseconds(Int(median(runs.map { Double($0.startP99) })))), "
              + "pace \(microseconds(Int(median(runs.map { Double($0.wallPerOp) }))))")
    }
    let spindle = results["Spindle"]!, dispatch = results["DispatchQueue.global"]!
    for (metric, value) in [("CPU", \PacedResult.cpuPerOp), ("p50", \PacedResult.startP50), ("p99", \PacedResult.startP99)] {
        let ratios = zip(spindle, dispatch).map { Double($0[keyPath: value]) / Double($1[keyPath: value]) }
        print("Spindle / libdispatch, \(metric): " + ratios.map(ratio).joined(separator: ", ")
              + " (median \(ratio(median(ratios))))")
    }
}

if names.contains("roundtrip") {
    let trips = 20_000
    print("== back-to-back round trips, \(trips) a run, DispatchSemaphore waiter")
    var results: [String: [RoundTrips.Result]] = [:]
    for round in 0..<rounds {
        let count = RoundTrips.peers.count
        for k in 0..<count {
            let peer = RoundTrips.peers[(k + round) % count]
            let result = RoundTrips.run(peer, trips: trips)
            results[peer.name, default: []].append(result)
            print("round \(round + 1) \(peer.name): \(microseconds(result.wallPerTrip)) a trip, CPU "
                  + "\(microseconds(result.cpuPerTrip)) a trip")
        }
    }
    for peer in RoundTrips.peers {
        let runs = results[peer.name]!
        print("median \(peer.name): \(microseconds(Int(median(runs.map { Double($0.wallPerTrip) })))) a trip, CPU "
              + "\(microseconds(Int(median(runs.map { Double($0.cpuPerTrip) })))) a trip")
    }
    let spindle = results["Spindle"]!, dispatch = results["DispatchQueue.global"]!
    for (metric, value) in [("wall", \RoundTrips.Result.wallPerTrip), ("CPU", \RoundTrips.Result.cpuPerTrip)] {
        let ratios = zip(spindle, dispatch).map { Double($0[keyPath: value]) / Double($1[keyPath: value]) }
        print("Spindle / libdispatch, \(metric): " + ratios.map(ratio).joined(separator: ", ")
              + " (median \(ratio(median(ratios))))")
    }
}
