/// CPU-bound work for `/primes`: counts the primes up to a limit by trial division (odd divisors up to the square
/// root). Deliberately naive, so its cost grows steeply with the limit (about limit^1.5 / ln(limit) divisions).
public enum PrimeCounter {
    /// How many candidates are tested between two cancellation checks.
    static let checkEvery = 1024

    /// The number of primes p with 2 <= p <= `limit` (0 for limits below 2). Checks `cancellation` every
    /// 1,024 candidates.
    /// - Throws: `WorkCancelled` once `cancellation` is set.
    public static func countPrimes(upTo limit: Int, cancellation: WorkCancellation) throws(WorkCancelled) -> Int {
        guard limit >= 2 else { return 0 }
        var count = 1  // 2
        var candidate = 3
        var untilCheck = Self.checkEvery
        while candidate <= limit {
            untilCheck -= 1
            if untilCheck == 0 {
                try cancellation.check()
                untilCheck = Self.checkEvery
            }
            if Self.isOddPrime(candidate) { count += 1 }
            candidate += 2
        }
        return count
    }

    /// Whether the odd number `n` (at least 3) is prime.
    static func isOddPrime(_ n: Int) -> Bool {
        var divisor = 3
        while divisor * divisor <= n {
            if n % divisor == 0 { return false }
            divisor += 2
        }
        return true
    }
}
