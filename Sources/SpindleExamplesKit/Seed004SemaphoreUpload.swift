import Spindle

// Seed 004 "Waiting and cancelling in an operation", second way: the recipe upload's `main` waits on a semaphore
// that the upload's callback — or `cancel()` from any thread — signals.

/// The book's `RecipetUploadOperation` with a semaphore (`dispatch_semaphore_t` → `SpindleSemaphore`).
///
/// Guards: `semaphore` (the one the current wait is on) under `semaphoreLock`.
final class SemaphoreRecipeUploadOperation: SpindleOperation, @unchecked Sendable {
    let title: String
    let image: [UInt8]
    let json: String
    let api: FakeRecipeAPI
    let out: any ExampleOutput
    /// Signalled once the image upload has started and `main` is about to wait for it.
    let imageUploadStarted = try! SpindleSemaphore(value: 0)
    private let semaphoreLock = SpindleMutex(.normal)
    private var semaphore: SpindleSemaphore?  // guarded by semaphoreLock

    init(title: String, image: [UInt8], json: String, api: FakeRecipeAPI, output: any ExampleOutput) {
        self.title = title
        self.image = image
        self.json = json
        self.api = api
        self.out = output
        super.init()
        self.name = title
    }

    override func main() throws {
        self.out.line("[\(self.title)] uploading image (\(self.image.count) bytes) on \(SpindleThread.current)")
        let imageDone = try self.makeSemaphore()
        try self.api.upload("image of \(self.title)") { reply in self.replied(reply, signalling: imageDone) }
        self.imageUploadStarted.signal()
        try self.wait(on: imageDone)
        if self.isCancelled {
            self.out.line("[\(self.title)] cancelled during the image upload: the JSON is not sent")
            return
        }
        self.out.line("[\(self.title)] uploading JSON (\(self.json.utf8.count) bytes)")
        let jsonDone = try self.makeSemaphore()
        try self.api.upload("JSON of \(self.title)") { reply in self.replied(reply, signalling: jsonDone) }
        try self.wait(on: jsonDone)
        if self.isCancelled {
            self.out.line("[\(self.title)] cancelled during the JSON upload")
            return
        }
        self.out.line("[\(self.title)] recipe uploaded")
    }

    /// `dispatch_semaphore_create(0)`, published for `cancel()`. If a cancel came first, signal it now: that
    /// cancel may have signalled the previous semaphore (the book's version would then wait forever).
    private func makeSemaphore() throws -> SpindleSemaphore {
        let semaphore = try SpindleSemaphore(value: 0)
        self.semaphoreLock.withLock { self.semaphore = semaphore }
        if self.isCancelled { semaphore.signal() }
        return semaphore
    }

    /// `dispatch_semaphore_wait`, with a deadline instead of DISPATCH_TIME_FOREVER.
    private func wait(on semaphore: SpindleSemaphore) throws {
        guard semaphore.wait(timeout: .seconds(30)) else { throw ExampleFailure("[\(self.title)] no reply within 30 s") }
    }

    /// The upload's callback (on the API's thread): records the reply, then wakes `main`.
    private func replied(_ reply: String, signalling semaphore: SpindleSemaphore) {
        if self.isCancelled {
            self.out.line("[\(self.title)] late reply ignored: \(reply)")
        } else {
            self.out.line("[\(self.title)] server replied \(reply) on \(SpindleThread.current)")
        }
        semaphore.signal()
    }

    /// Cancels, and wakes the current wait at once (from any thread).
    override func cancel() {
        super.cancel()
        self.semaphoreLock.withLock { self.semaphore }?.signal()
    }
}

extension SpindleExamples {
    /// Seed 004: the same two uploads waiting on a semaphore; the second is cancelled in the middle.
    static func uploadSemaphore(_ out: any ExampleOutput) throws {
        let queue = SpindleOperationQueue(name: "recipe uploads")
        try queue.setMaxConcurrentOperationCount(2)
        let fastServer = FakeRecipeAPI(latency: .milliseconds(50))
        let slowServer = FakeRecipeAPI(latency: .seconds(30))
        let pancakes = SemaphoreRecipeUploadOperation(
            title: "pancakes", image: [UInt8](repeating: 7, count: 2048), json: #"{"title":"Pancakes"}"#,
            api: fastServer, output: out)
        let bread = SemaphoreRecipeUploadOperation(
            title: "bread", image: [UInt8](repeating: 9, count: 4096), json: #"{"title":"Bread"}"#,
            api: slowServer, output: out)
        try queue.addOperations([pancakes, bread])

        try expectSignal(bread.imageUploadStarted, "the bread image upload to start")
        out.line("cancelling [bread] in the middle of its image upload")
        bread.cancel()
        try queue.waitUntilAllOperationsAreFinished()

        slowServer.replyNow()  // the slow server answers at last: the operation is gone, the reply is ignored
        try slowServer.join()
        try fastServer.join()
        out.line("[pancakes] cancelled: \(pancakes.isCancelled), [bread] cancelled: \(bread.isCancelled)")
    }
}
