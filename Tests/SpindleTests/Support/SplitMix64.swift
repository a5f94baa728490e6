/// A tiny seeded generator (SplitMix64), so the random sequences of the model and policy tests are the same on
/// every run.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { self.state = seed }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in `0..<n` (n > 0).
    mutating func below(_ n: Int) -> Int { Int(self.next() % UInt64(n)) }
}
