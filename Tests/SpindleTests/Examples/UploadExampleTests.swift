import Spindle
import SpindleExamplesKit
import Testing

/// Seed 004: the recipe upload waiting in `main` for its callbacks — with a run loop and a port, or with a
/// semaphore — and a cancel in the middle of the wait ending it at once.
@Suite struct UploadExampleTests {
    /// What both ways share: the completed upload's steps in order, the cancelled one stopping before its JSON.
    private func checkUploads(_ out: CapturingOutput, lateReply: String) throws {
        let image = out.index(prefix: "[pancakes] uploading image")
        let imageReply = out.index(prefix: "[pancakes] server replied 201 Created (image of pancakes) on ")
        let json = out.index(prefix: "[pancakes] uploading JSON")
        let jsonReply = out.index(prefix: "[pancakes] server replied 201 Created (JSON of pancakes) on ")
        let uploaded = out.index(of: "[pancakes] recipe uploaded")
        #expect(out.isOrdered(image, imageReply) && out.isOrdered(imageReply, json))
        #expect(out.isOrdered(json, jsonReply) && out.isOrdered(jsonReply, uploaded))

        let cancel = out.index(of: "cancelling [bread] in the middle of its image upload")
        let stopped = out.index(of: "[bread] cancelled during the image upload: the JSON is not sent")
        #expect(out.isOrdered(out.index(prefix: "[bread] uploading image"), cancel))
        #expect(out.isOrdered(cancel, stopped))
        #expect(out.index(prefix: "[bread] uploading JSON") == nil)
        #expect(out.index(prefix: "[bread] server replied") == nil)
        #expect(out.isOrdered(stopped, out.index(prefix: lateReply)))
        #expect(out.texts.last == "[pancakes] cancelled: false, [bread] cancelled: true")
    }

    @Test func runLoopAndPortUploadCancelledInTheMiddle() throws {
        let out = try runExample("upload-runloop")
        try self.checkUploads(out, lateReply: "[bread] late reply dropped: ")
        // The port delivers the replies on the operation's own thread, inside its run loop.
        let image = try #require(out.index(prefix: "[pancakes] uploading image"))
        let operationThread = out.lines[image].threadID
        for reply in out.indices(prefix: "[pancakes] server replied ") {
            #expect(out.lines[reply].threadID == operationThread)
            #expect(out.lines[reply].text.hasSuffix(tidTag(operationThread)))
        }
    }

    @Test func semaphoreUploadCancelledInTheMiddle() throws {
        let out = try runExample("upload-semaphore")
        try self.checkUploads(out, lateReply: "[bread] late reply ignored: ")
        // The callbacks run on the API's threads; main only wakes up.
        let image = try #require(out.index(prefix: "[pancakes] uploading image"))
        for reply in out.indices(prefix: "[pancakes] server replied ") {
            #expect(out.lines[reply].threadID != out.lines[image].threadID)
            #expect(out.lines[reply].text.contains("SpindleThread(fake-api, "))
        }
    }
}
