import Glibc

/// The file `/hash` reads: written once when the service starts (deterministic pseudo-random bytes), then read
/// with blocking `pread(2)` calls, 64 KiB at a time, by every request that hashes it.
///
/// Thread safety: `descriptor` is opened in `init` and closed in `deinit` only; `pread` takes its offset as an
/// argument, so any number of threads read through the one descriptor at once.
public final class DataFile: Sendable {
    /// Where the file is.
    public let path: String
    /// Its size in bytes.
    public let size: Int
    /// Bytes read per `pread` call (and between two cancellation checks).
    public static let chunkSize = 64 * 1024

    private let descriptor: Int32
    private let removeWhenReleased: Bool

    /// Writes `size` bytes to `path` (replacing what was there), the same bytes for the same `seed`, and opens it
    /// for reading. With `removeWhenReleased`, the file is deleted when this object goes away.
    /// - Throws: `DataFileError` naming the call that failed.
    public init(path: String, size: Int, seed: UInt64 = 0x5350_494e_444c_4521, removeWhenReleased: Bool) throws {
        precondition(size >= 0, "DataFile: negative size \(size)")
        try Self.write(path: path, size: size, seed: seed)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw DataFileError(function: "open", path: path, errno: errno) }
        self.path = path
        self.size = size
        self.descriptor = fd
        self.removeWhenReleased = removeWhenReleased
    }

    deinit {
        close(self.descriptor)
        if self.removeWhenReleased { unlink(self.path) }
    }

    /// The FNV-1a hash of the file's first `bytes` bytes read `rounds` times in a row (the hash runs on across
    /// rounds, as if the prefix were repeated). Each round reads the prefix again from the file. Checks
    /// `cancellation` before every read.
    /// - Throws: `WorkCancelled` once `cancellation` is set; `DataFileError` if a read fails.
    public func hash(bytes: Int, rounds: Int, cancellation: WorkCancellation) throws -> FNV1a64 {
        precondition(
            bytes >= 0 && bytes <= self.size && rounds >= 0,
            "DataFile.hash: bad bytes \(bytes) or rounds \(rounds)"
        )
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var hash = FNV1a64()
        for _ in 0..<rounds {
            var offset = 0
            while offset < bytes {
                try cancellation.check()
                let wanted = min(Self.chunkSize, bytes - offset)
                let got = try self.read(into: buffer, count: wanted, at: offset)
                hash.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                offset += got
            }
        }
        return hash
    }

    /// One `pread`, retried on EINTR. Returns the bytes read (at least 1).
    private func read(into buffer: UnsafeMutableRawBufferPointer, count: Int, at offset: Int) throws -> Int {
        while true {
            let got = pread(self.descriptor, buffer.baseAddress, count, off_t(offset))
            if got > 0 { return got }
            if got == 0 { throw DataFileError(function: "pread (unexpected end of file)", path: self.path, errno: 0) }
            if errno != EINTR { throw DataFileError(function: "pread", path: self.path, errno: errno) }
        }
    }

    /// Writes the file: a splitmix64 stream from `seed`, little-endian, cut to `size` bytes.
    private static func write(path: String, size: Int, seed: UInt64) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if fd < 0 { throw DataFileError(function: "open", path: path, errno: errno) }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var state = seed
        var written = 0
        while written < size {
            for word in 0..<(Self.chunkSize / 8) {
                state &+= 0x9e37_79b9_7f4a_7c15
                var z = state
                z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
                z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
                buffer.storeBytes(of: (z ^ (z >> 31)).littleEndian, toByteOffset: word * 8, as: UInt64.self)
            }
            var sent = 0
            let count = min(Self.chunkSize, size - written)
            while sent < count {
                let n = Glibc.write(fd, buffer.baseAddress! + sent, count - sent)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw DataFileError(function: "write", path: path, errno: errno)
                }
                sent += n
            }
            written += count
        }
    }
}

/// A system call on the data file failed.
public struct DataFileError: Error, Sendable, CustomStringConvertible {
    /// The call that failed.
    public let function: String
    /// The file.
    public let path: String
    /// Its error number (0 when the call did not fail but returned something unusable).
    public let errno: Int32

    /// One line naming the call, the file and the error.
    public var description: String { "\(self.function) on \(self.path) failed (errno \(self.errno))" }
}
