import Glibc

/// The answers the service should give, computed here without its code: the data file read back with stdio and
/// hashed with a loop of our own, and primes counted with a sieve.
enum Oracle {
    /// FNV-1a (64-bit) of the first `bytes` bytes of the file at `path`, `rounds` times in a row, as 16 lowercase
    /// hex digits.
    static func hash(path: String, bytes: Int, rounds: Int) -> String {
        guard let file = fopen(path, "rb") else { fatalError("Oracle: cannot open \(path) (errno \(errno))") }
        defer { fclose(file) }
        var prefix = [UInt8](repeating: 0, count: bytes)
        let got = prefix.withUnsafeMutableBytes { fread($0.baseAddress, 1, bytes, file) }
        precondition(got == bytes, "Oracle: read \(got) of \(bytes) bytes from \(path)")
        var h: UInt64 = 14_695_981_039_346_656_037
        for _ in 0..<rounds {
            for byte in prefix { h = (h ^ UInt64(byte)) &* 1_099_511_628_211 }
        }
        let digits = String(h, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The number of primes up to `limit`, by the sieve of Eratosthenes.
    static func primeCount(upTo limit: Int) -> Int {
        guard limit >= 2 else { return 0 }
        var composite = [Bool](repeating: false, count: limit + 1)
        var count = 0
        for n in 2...limit where !composite[n] {
            count += 1
            var multiple = n * n
            while multiple <= limit {
                composite[multiple] = true
                multiple += n
            }
        }
        return count
    }
}
