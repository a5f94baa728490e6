/// The 64-bit FNV-1a hash (offset basis 0xcbf29ce484222325, prime 0x100000001b3), fed incrementally: the
/// checksum `/hash` answers with, simple enough that a client can recompute it on its own.
public struct FNV1a64: Sendable, Equatable {
    /// The hash of everything fed so far (the offset basis when nothing was).
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    /// An empty hash.
    public init() {}

    /// Feeds `bytes`, in order.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var h = self.value
        for byte in bytes {
            h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        self.value = h
    }

    /// The value as 16 lowercase hexadecimal digits, the form `/hash` answers with.
    public var hexDigits: String {
        let digits = String(self.value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
