import Spindle

// Porting real NSOperation code (issue 22): the operation base classes a porter meets, each ported the Spindle way.
// The Foundation originals are in Docs/Guide.md, "Porting real NSOperation code".

// MARK: - a. The KVO-driven asynchronous base class

/// Stands in for an HTTP client with a callback API (URLSession's, say): each fetch is answered on the client's own
/// callback thread (a queue of width 1, like a delegate queue), in the order asked; a name starting with "missing"
/// gets a 404. Immutable; the callback queue is thread-safe.
final class FakeImageClient: Sendable {
    struct NotFound: Error, CustomStringConvertible {
        let url: String
        var description: String { "404 Not Found (\(self.url))" }
    }

    private let callbacks: SpindleOperationQueue

    init() {
        self.callbacks = SpindleOperationQueue(name: "image-client")
        self.callbacks.maxConcurrentOperationCount = 1
    }

    /// Asks for `url`; `completion` gets its bytes, or `NotFound`, on the callback thread.
    func fetch(_ url: String, completion: @escaping @Sendable (Result<[UInt8], any Error>) -> Void) {
        self.callbacks.addOperation {
            if url.hasPrefix("missing") {
                completion(.failure(NotFound(url: url)))
            } else {
                completion(.success([UInt8](repeating: 0xFF, count: 64 * url.utf8.count)))
            }
        }
    }
}

/// The image pipeline's asynchronous base class, ported. Foundation's version overrides `isAsynchronous`,
/// `isExecuting` and `isFinished`, keeps two flags and wraps each change in `willChangeValue(forKey:)` /
/// `didChangeValue(forKey:)`; here `beginExecuting()` and `finish(throwing:)` do all of that (observers see the
/// same changes), and no thread is started or held while the work runs.
class AsyncOperation: SpindleOperation, @unchecked Sendable {
    override var isAsynchronous: Bool { true }

    override func start() throws {
        // Was: `if isCancelled { finish(); return }`, then the KVO dance around `_executing = true`.
        guard try self.beginExecuting() else { return }  // cancelled before it started: finished already
        self.execute()  // starts the work and returns; the queue's thread is free again
    }

    /// Subclasses start their work here and end it with one `finish(throwing:)`, from any thread.
    func execute() {
        try? self.finish()
    }
}

/// One download of the pipeline: it ends in the client's callback.
final class ImageDownload: AsyncOperation, @unchecked Sendable {
    let url: String
    let client: FakeImageClient
    let out: any ExampleOutput

    init(_ url: String, client: FakeImageClient, output: any ExampleOutput) {
        self.url = url
        self.client = client
        self.out = output
        super.init()
        self.name = url
    }

    override func execute() {
        self.out.line("\(self.url): requested")
        self.client.fetch(self.url) { result in
            switch result {
            case .success(let bytes):
                self.out.line("\(self.url): \(bytes.count) bytes")
                try? self.finish()
            case .failure(let error):
                try? self.finish(throwing: error)  // kept in `error`; the queue frees the slot either way
            }
        }
    }
}

// MARK: - b. The start()-override synchronous base class

/// A code generator's step base class, ported. Foundation's version overrides `start()` (finish if cancelled, else
/// call `main()`), drives `isExecuting`/`isFinished` by KVO and has its own `finish(_ errors: [Error] = [])`. Here
/// `start()` stays overridden, `beginExecuting()` replaces the cancel check and the KVO, and the base class keeps
/// its `finish(_:)`: Spindle's `finish(throwing:)` is a disfavoured overload, so every plain `finish()` call of the
/// subclasses still means this one. Its errors are kept in `errors`: a stored property named `error` would collide
/// with Spindle's (final) `error`. Guards: `collected` is under its own lock (a `SpindleLockedValue`).
class PipelineStep: SpindleOperation, @unchecked Sendable {
    let out: any ExampleOutput
    private let collected = SpindleLockedValue<[any Error]>([])

    init(_ name: String, output: any ExampleOutput) {
        self.out = output
        super.init()
        self.name = name
    }

    override func start() throws {
        guard try self.beginExecuting() else {  // was: `guard !isCancelled else { finish(); return }`
            self.out.line("\(self.displayName): cancelled, never ran")
            return
        }
        self.main()
    }

    override func main() {
        do {
            try self.execute()
            self.finish()
        } catch {
            self.finish([error])
        }
    }

    /// The subclasses' work (the sample's `execute()`).
    func execute() throws {}

    /// The base class's own finish, kept: collects the errors, then reports the end to Spindle, by its label.
    func finish(_ errors: [any Error] = []) {
        self.collected.withLockedValue { $0 += errors }
        try? self.finish(throwing: errors.first)
    }

    /// Every error passed to `finish(_:)`; Spindle's `error` keeps the first.
    var errors: [any Error] { self.collected.value }
}

/// A template that could not be rendered.
struct TemplateError: Error, CustomStringConvertible {
    let file: String
    var description: String { "no template for \(self.file)" }
}

/// One step of the generator: renders its file, or fails.
final class GenerateStep: PipelineStep, @unchecked Sendable {
    let fails: Bool

    init(_ name: String, fails: Bool = false, output: any ExampleOutput) {
        self.fails = fails
        super.init(name, output: output)
    }

    override func execute() throws {
        if self.fails { throw TemplateError(file: self.displayName) }
        self.out.line("\(self.displayName): generated")
    }
}

// MARK: - c. The isReady override

/// The port of `override var isReady: Bool { super.isReady && settingsLoaded }` (with KVO on `isReady` posted when
/// the settings arrive): readiness opened from elsewhere is a dependency on an operation that is finished then.
/// The operation is never added to a queue; `open()` runs it on the calling thread.
final class ReadinessGate: Sendable {
    let operation: SpindleBlockOperation

    init(name: String) {
        self.operation = SpindleBlockOperation {}
        self.operation.name = name
    }

    /// `operation` waits until the gate opens. Before it is added to a queue, as any dependency.
    func hold(_ operation: SpindleOperation) throws {
        try operation.addDependency(self.operation)
    }

    /// Opens the gate: what it holds becomes ready (once its other dependencies are done). Any thread, once.
    func open() {
        SpindleOperation.perform(self.operation)  // runs the empty block here: the gate operation finishes
    }
}

/// Settings that arrive later (from a file, a server), read and written from any thread. Guards: `values` is under
/// its own lock (a `SpindleLockedValue`).
final class Settings: Sendable {
    private let values = SpindleLockedValue<[String: String]>([:])

    func set(_ key: String, _ value: String) { self.values.withLockedValue { $0[key] = value } }

    func value(_ key: String) -> String? { self.values.withLockedValue { $0[key] } }
}

/// A setting that must be there.
struct MissingSetting: Error, CustomStringConvertible {
    let key: String
    var description: String { "missing setting '\(self.key)'" }
}

/// The sample's `isReady` that evaluated conditions, ported: a condition, checked once the dependencies are done.
struct HasSetting: SpindleOperationCondition {
    let settings: Settings
    let key: String

    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult {
        self.settings.value(self.key) != nil ? .satisfied : .failed(MissingSetting(key: self.key))
    }
}

extension SpindleExamples {
    /// a. Downloads whose base class finishes from the client's callback; one fails, one was cancelled first.
    static func portAsyncOperation(_ out: any ExampleOutput) throws {
        let client = FakeImageClient()
        let images = SpindleOperationQueue(name: "images")
        images.maxConcurrentOperationCount = 2
        let downloads = ["cat.png", "dog.png", "missing.png", "skipped.png"].map {
            ImageDownload($0, client: client, output: out)
        }
        downloads[3].cancel()  // cancelled before it started: it finishes without `execute()`
        let render = SpindleBlockOperation { out.line("render: every download has finished") }
        for download in downloads { try render.addDependency(download) }
        try images.addOperations(downloads + [render])
        try render.waitUntilFinished()
        for download in downloads {
            let error = download.error.map { "\($0)" } ?? "none"
            out.line("\(download.url): cancelled \(download.isCancelled), error \(error)")
        }
    }

    /// b. Generator steps on the ported base class: one fails through `finish(_:)`, one was cancelled, and the
    /// step that needs them all finishes unrun.
    static func portSyncBaseClass(_ out: any ExampleOutput) throws {
        let queue = SpindleOperationQueue(name: "codegen")
        queue.maxConcurrentOperationCount = 2
        let parse = GenerateStep("schema.json", output: out)
        let models = GenerateStep("Models.swift", output: out)
        let client = GenerateStep("Client.swift", fails: true, output: out)
        let docs = GenerateStep("README.md", output: out)
        let package = GenerateStep("package", output: out)
        for file in [models, client, docs] {
            try file.addDependency(parse)
            try package.addDependency(file)
        }
        package.cancelsOnFailedDependency = true  // nothing to package when a file is missing
        docs.cancel()
        try queue.addOperations([parse, models, client, docs, package], waitUntilFinished: true)
        for step in [parse, models, client, docs, package] {
            let errors = step.errors.map { "\($0)" }
            out.line("\(step.displayName): errors \(errors), cancelled \(step.isCancelled)")
        }
    }

    /// c. An operation held until its settings are loaded (a gate), then checked by a condition; the same with
    /// the setting missing.
    static func portIsReady(_ out: any ExampleOutput) throws {
        let queue = SpindleOperationQueue(name: "sync")
        let settings = Settings()
        let loaded = ReadinessGate(name: "settings loaded")
        let sync = SpindleBlockOperation { out.line("sync: runs against \(settings.value("endpoint") ?? "nothing")") }
        try loaded.hold(sync)
        try sync.addCondition(HasSetting(settings: settings, key: "endpoint"))
        try queue.addOperation(sync)
        out.line("sync: ready \(sync.isReady) before the settings are loaded")
        settings.set("endpoint", "https://example.org")
        loaded.open()
        try sync.waitUntilFinished()

        let empty = Settings()
        let loadedEmpty = ReadinessGate(name: "empty settings loaded")
        let upload = SpindleBlockOperation { out.line("upload: never printed") }
        upload.name = "upload"
        try loadedEmpty.hold(upload)
        try upload.addCondition(HasSetting(settings: empty, key: "endpoint"))
        try queue.addOperation(upload)
        loadedEmpty.open()
        try upload.waitUntilFinished()
        if case .conditionFailed(_, let condition, let underlying)? = upload.error as? SpindleError {
            out.line("upload: ran \(!upload.isCancelled), refused by \(condition): \(underlying)")
        }
    }
}
