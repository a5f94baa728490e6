/// One line of the benchmark's table: a variant at an offered rate.
struct Row {
    let variant: String
    let offered: Double
    let samples: [Sample]
    let elapsed: Duration
    let cpu: Duration

    /// Formats `rows` as a Markdown table.
    static func table(_ rows: [Row]) -> String {
        var lines = [
            "| executor | offered req/s | achieved 200/s | p50 ms | p99 ms | 200 | 503 | 504 | no answer "
                + "| CPU µs/req |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows { lines.append(row.line) }
        return lines.joined(separator: "\n")
    }

    /// This row's cells. Latencies are of the 200 answers, from when each request was due to be sent; CPU per
    /// request is the process's CPU time over the measured run divided by the requests sent.
    private var line: String {
        let ok = self.samples.filter { $0.status == 200 }
        let latencies = ok.map { Self.milliseconds($0.latency) }.sorted()
        let count = { (status: Int?) in self.samples.filter { $0.status == status }.count }
        let seconds = Self.milliseconds(self.elapsed) / 1000
        let cpuPerRequest = Self.milliseconds(self.cpu) * 1000 / Double(max(self.samples.count, 1))
        let cells: [String] = [
            self.variant,
            String(Int(self.offered)),
            Self.format(Double(ok.count) / seconds, 0),
            Self.format(Self.percentile(latencies, 0.50), 2),
            Self.format(Self.percentile(latencies, 0.99), 2),
            String(ok.count),
            String(count(503)),
            String(count(504)),
            String(count(nil)),
            Self.format(cpuPerRequest, 0),
        ]
        return "| " + cells.joined(separator: " | ") + " |"
    }

    /// The `q` quantile (nearest rank) of sorted `values`; NaN when empty.
    private static func percentile(_ values: [Double], _ q: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let rank = Int((q * Double(values.count)).rounded(.up))
        return values[min(max(rank, 1), values.count) - 1]
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    private static func format(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "–" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        if decimals == 0 { return String(Int(rounded)) }
        var text = String(rounded)
        let fraction = text.split(separator: ".").last?.count ?? 0
        if fraction < decimals { text += String(repeating: "0", count: decimals - fraction) }
        return text
    }
}
