import CShim
import Synchronization
import Testing
@testable import Spindle

private struct InvocationFailure: Error, Equatable { let code: Int }

private final class Payload: Sendable {
    let text: String
    init(_ text: String) { self.text = text }
}

/// The target of the invocation operations: counts its calls.
private final class Calculator: @unchecked Sendable {
    let calls = OpCounter()
    let payload = Payload("answer")
    let entered = opSemaphore()
    let gate = opSemaphore()

    func double(_ x: Int) -> Int {
        self.calls.increment()
        return x * 2
    }
    func object() -> Payload {
        self.calls.increment()
        return self.payload
    }
    func record(_ x: Int) { self.calls.increment() }
    func fail(_ code: Int) throws -> Int {
        self.calls.increment()
        throw InvocationFailure(code: code)
    }
    func slow(_ x: Int) -> Int {
        self.calls.increment()
        self.entered.signal()
        _ = self.gate.wait(timeout: opDeadline)
        return x
    }
}

/// SEMANTICS D27–D31: invocation operations and their typed result; also a plain operation whose main throws.
@Suite struct InvocationOperationTests {
    // D27
    @Test func resultIsTheReturnedValue() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.double, argument: 21)
        #expect(op.target === calc, "the operation hands back its target")
        try op.start()
        #expect(try op.result() == 42)
        #expect(calc.calls.value == 1)
        #expect(op.error == nil)
    }

    @Test func resultIsTheReturnedObject() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.object)
        try op.start()
        #expect(try op.result() === calc.payload)
    }

    @Test func closureFormHasNoTarget() throws {
        let op = SpindleInvocationOperation { "done" }
        #expect(op.target == nil)
        try op.start()
        #expect(try op.result() == "done")
    }

    @Test func targetAndArgumentAreKeptAlive() throws {
        weak var weakTarget: Calculator?
        weak var weakArgument: Payload?
        let op: SpindleInvocationOperation<String>
        do {
            let calc = Calculator()
            let argument = Payload("kept")
            weakTarget = calc
            weakArgument = argument
            op = SpindleInvocationOperation(target: calc, method: { _ in { (p: Payload) in p.text } }, argument: argument)
        }
        #expect(weakTarget != nil)
        #expect(weakArgument != nil)
        try op.start()
        #expect(try op.result() == "kept")
    }

    // D28
    @Test func resultBeforeFinishThrowsNotReady() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.slow, argument: 7)
        #expect(opErrorCase { _ = try op.result() } == "resultNotReady", "before start")
        let runner = try OpThread.run { try? op.start() }
        #expect(calc.entered.wait(timeout: opDeadline))
        #expect(opErrorCase { _ = try op.result() } == "resultNotReady", "while executing")
        calc.gate.signal()
        #expect(runner.finish())
        #expect(try op.result() == 7)
    }

    // D29
    @Test func voidMethodThrowsVoidResult() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.record, argument: 1)
        try op.start()
        #expect(calc.calls.value == 1, "the method ran")
        #expect(opErrorCase { try op.result() } == "voidResult")
    }

    // D30
    @Test func cancelledOperationDoesNotInvokeAndThrowsCancelled() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.double, argument: 1)
        op.name = "cancelled-invocation"
        op.cancel()
        try op.start()
        #expect(op.isFinished)
        #expect(calc.calls.value == 0, "the target is not invoked")
        do {
            _ = try op.result()
            Issue.record("result of a cancelled operation must throw")
        } catch {
            #expect(Mirror(reflecting: error).children.first?.label == "resultOfCancelledOperation")
            #expect(opErrorName(error) == "cancelled-invocation")
        }
    }

    // D31
    @Test func throwingMethodThrowsOperationFailedCarryingTheError() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.fail, argument: 9)
        try op.start()
        #expect(op.isFinished)
        #expect(op.error as? InvocationFailure == InvocationFailure(code: 9), "the error is also kept in `error`")
        do {
            _ = try op.result()
            Issue.record("result of a failed operation must throw")
        } catch .operationFailed(_, let underlying) {
            #expect(underlying as? InvocationFailure == InvocationFailure(code: 9))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func plainOperationWhoseMainThrowsKeepsTheError() throws {
        let op = OpProbe { _ in throw InvocationFailure(code: 3) }
        try op.start()
        #expect(op.isFinished)
        #expect(!op.isExecuting)
        #expect(op.error as? InvocationFailure == InvocationFailure(code: 3))
        #expect(op.completions.value == 1, "a failed operation still completes")
    }

    @Test func resultIsStableAcrossReads() throws {
        let calc = Calculator()
        let op = SpindleInvocationOperation(target: calc, method: Calculator.double, argument: 5)
        try op.start()
        try op.start()
        #expect(try op.result() == 10)
        #expect(try op.result() == 10)
        #expect(calc.calls.value == 1)
    }
}
