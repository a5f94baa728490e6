import Glibc
import Spindle

/// Where an example writes its lines. Examples write from several threads at once (queue workers, operation
/// threads, callback threads), so every sink must be thread-safe and keep each line whole.
public protocol ExampleOutput: Sendable {
    /// Writes one line (without its newline). Any thread.
    func line(_ text: String)
}

/// Writes each line to a file descriptor (standard output by default), one whole line per `write`, unbuffered,
/// under a mutex: lines from different threads never mix and appear in the order they were written.
public final class PrintingOutput: ExampleOutput {
    private let mutex = SpindleMutex(.normal)
    private let descriptor: Int32

    /// A sink on `descriptor` (1, standard output, by default). Any thread.
    public init(descriptor: Int32 = 1) { self.descriptor = descriptor }

    /// Writes `text` and a newline. Any thread. Write errors (a closed pipe) are ignored.
    public func line(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.append(10)
        self.mutex.withLock {
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { write(self.descriptor, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}

/// Keeps every line with the kernel id of the thread that wrote it, in the order they were written; tests read
/// them back to check the orders the books document and which thread printed what.
public final class CapturingOutput: ExampleOutput {
    /// One captured line.
    public struct Line: Sendable, Equatable, CustomStringConvertible {
        /// The text, as written.
        public let text: String
        /// `SpindleThread.current.threadID` of the writer.
        public let threadID: Int32
        /// "[tid] text".
        public var description: String { "[\(self.threadID)] \(self.text)" }
    }

    private let storage = SpindleLockedValue<[Line]>([])

    /// An empty capture. Any thread.
    public init() {}

    /// Records `text` with the calling thread's id. Any thread.
    public func line(_ text: String) {
        let line = Line(text: text, threadID: SpindleThread.current.threadID)
        self.storage.withLockedValue { $0.append(line) }
    }

    /// Everything written so far, in order. Any thread.
    public var lines: [Line] { self.storage.value }

    /// The texts written so far, in order. Any thread.
    public var texts: [String] { self.lines.map(\.text) }
}
