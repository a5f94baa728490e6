import Spindle

// Apple's "Advanced NSOperations" sample (WWDC 2015), ported: a condition that makes "the user must log in first"
// a dependency, and "only one alert on screen" as an exclusivity category shared by two queues.

/// Whether the user is logged in (a locked flag, read and set from any thread).
final class Session: Sendable {
    let password: String
    private let loggedIn = SpindleLockedValue(false)

    init(password: String) { self.password = password }

    var isLoggedIn: Bool { self.loggedIn.withLockedValue { $0 } }

    func logIn(with password: String) {
        self.loggedIn.withLockedValue { $0 = password == "secret" }
    }
}

/// The log-in screen: an operation that logs the session in (or fails to, with a wrong password).
final class LoginOperation: SpindleOperation, @unchecked Sendable {
    let session: Session
    let out: any ExampleOutput

    init(session: Session, output: any ExampleOutput) {
        self.session = session
        self.out = output
        super.init()
        self.name = "login"
    }

    override func main() throws {
        self.session.logIn(with: self.session.password)
        self.out.line("login: logged in = \(self.session.isLoggedIn)")
    }
}

struct NotLoggedIn: Error {}

/// "The user must log in first": logging in becomes a dependency, and the operation runs only if it worked.
struct LoggedIn: SpindleOperationCondition {
    let session: Session
    let out: any ExampleOutput

    func dependency(for operation: SpindleOperation) -> SpindleOperation? {
        self.session.isLoggedIn ? nil : LoginOperation(session: self.session, output: self.out)
    }

    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult {
        self.session.isLoggedIn ? .satisfied : .failed(NotLoggedIn())
    }
}

extension SpindleExamples {
    /// A condition whose dependency (logging in) runs first, the same condition failing, and alerts from two
    /// queues shown one at a time, in the order they were added.
    static func conditions(_ out: any ExampleOutput) throws {
        let network = try SpindleOperationQueue(name: "network", maxConcurrentOperationCount: 2)
        let session = Session(password: "secret")
        let upload = SpindleBlockOperation { out.line("upload: runs once logged in") }
        try upload.addCondition(LoggedIn(session: session, out: out))
        try network.addOperation(upload)  // the login is added to `network` too, and runs first
        try upload.waitUntilFinished()

        let refused = SpindleBlockOperation { out.line("never printed") }
        refused.name = "upload-2"
        try refused.addCondition(LoggedIn(session: Session(password: "wrong"), out: out))
        try network.addOperation(refused)
        try refused.waitUntilFinished()
        out.line("upload-2 ran: \(!refused.isCancelled), refused: \(refused.cancellationReason == .conditionFailed)")
        if case .conditionFailed(_, let condition, let underlying)? = refused.error as? SpindleError {
            out.line("upload-2 was refused by \(condition): \(underlying)")  // its error says which and why
        }

        let ui = try SpindleOperationQueue(name: "ui", maxConcurrentOperationCount: 2)
        let alerts = (1...4).map { n in
            SpindleBlockOperation {
                out.line("alert \(n) shown")
                simulateWork(milliseconds: 5)
                out.line("alert \(n) dismissed")
            }
        }
        for (n, alert) in alerts.enumerated() {
            try alert.addExclusivityCategory("alert")  // one alert on screen at a time, across queues
            try (n % 2 == 0 ? ui : network).addOperation(alert)
        }
        try ui.waitUntilAllOperationsAreFinished()
        try network.waitUntilAllOperationsAreFinished()
    }
}
