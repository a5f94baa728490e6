import Spindle
import SpindleExamplesKit
import Testing

/// The porting examples (issue 22), one per base-class pattern a porter meets: what each prints, in which order,
/// and on which threads.
@Suite struct PortingExampleTests {
    /// Each download's callback line follows its request and comes on the client's one callback thread (no thread
    /// per start); the cancelled download never executes; the dependent renders after every download; the failing
    /// one keeps the client's error.
    @Test func asyncBaseClassFinishesFromTheCallbackWithoutAThreadPerStart() throws {
        let (out, caller) = try runExampleOnCaller("port-async-operation")
        for url in ["cat.png", "dog.png"] {
            #expect(out.isOrdered(out.index(of: "\(url): requested"), out.index(of: "\(url): 448 bytes")))
        }
        #expect(out.index(of: "missing.png: requested") != nil)
        #expect(out.index(prefix: "skipped.png: requested") == nil, "a cancelled download must not execute")
        let callbacks = out.indices(prefix: "cat.png: 448").map { out.lines[$0].threadID }
            + out.indices(prefix: "dog.png: 448").map { out.lines[$0].threadID }
        #expect(callbacks.count == 2 && Set(callbacks).count == 1, "both callbacks on the client's thread")
        #expect(!callbacks.contains(caller.threadID))
        #expect(Array(out.texts.suffix(5)) == [
            "render: every download has finished",
            "cat.png: cancelled false, error none",
            "dog.png: cancelled false, error none",
            "missing.png: cancelled false, error 404 Not Found (missing.png)",
            "skipped.png: cancelled true, error none",
        ])
        #expect(out.lines.count == 10)
    }

    /// The base class keeps its own `finish(_:)`: the failing step's error reaches it, the cancelled step returns
    /// from `start()` unrun, and the package step, cancelled as soon as a file it needs failed or was cancelled
    /// (whichever came first: no order between those two lines), never runs.
    @Test func syncBaseClassKeepsItsOwnFinish() throws {
        let out = try runExample("port-sync-base-class")
        #expect(out.isOrdered(out.index(of: "schema.json: generated"), out.index(of: "Models.swift: generated")))
        #expect(out.index(of: "README.md: cancelled, never ran") != nil)
        #expect(out.index(of: "package: cancelled, never ran") != nil)
        #expect(out.index(prefix: "Client.swift: generated") == nil)
        #expect(Array(out.texts.suffix(5)) == [
            "schema.json: errors [], cancelled false",
            "Models.swift: errors [], cancelled false",
            "Client.swift: errors [\"no template for Client.swift\"], cancelled false",
            "README.md: errors [], cancelled true",
            "package: errors [], cancelled true",
        ])
        #expect(out.lines.count == 9)
    }

    /// The gated operation is not ready until the gate opens, then passes its condition; with the setting missing
    /// the condition refuses it.
    @Test func isReadyBecomesAGateAndACondition() throws {
        let out = try runExample("port-is-ready")
        #expect(out.texts == [
            "sync: ready false before the settings are loaded",
            "sync: runs against https://example.org",
            "upload: ran false, refused by HasSetting: missing setting 'endpoint'",
        ])
    }

    /// The delegate hears of every add before any runs (a batch on a serial queue) and of each end in order, with
    /// the error; the counting hooks see one start fewer than adds (the cancelled one).
    @Test func queueDelegateIsToldThroughHooks() throws {
        let out = try runExample("port-queue-delegate")
        #expect(out.texts == [
            "imports: will add contacts.csv",
            "imports: will add photos.zip",
            "imports: will add notes.txt",
            "imports: contacts.csv done",
            "imports: photos.zip ended with an error: unreadable file",
            "imports: notes.txt cancelled",
            "work: added 5, started 4, succeeded 3, threw 1, cancelled 1",
        ])
    }

    /// The serial queue's sync sees what its async added before; the wait group's notify runs once every fetch
    /// left; the barrier runs after the three reads before it and before the read after it.
    @Test func dispatchHelpersMapToSpindle() throws {
        let out = try runExample("port-dispatch")
        let texts = out.texts
        #expect(Array(texts.prefix(2)) == [
            "journal: 1 entry, read after what was added before",
            "journal: 3 thumbnails fetched",
        ])
        #expect(Set(texts[2..<5]) == ["read 1: 1 word(s)", "read 2: 1 word(s)", "read 3: 1 word(s)"])
        #expect(Array(texts.suffix(3)) == [
            "rebuild: alone, after the reads added before it", "read 4: 2 word(s)", "urgent: ran",
        ])
        #expect(texts.count == 8)
    }
}
