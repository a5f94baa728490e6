import Spindle
import SpindleExamplesKit
import Testing

/// The "Advanced NSOperations" port: the login dependency runs before the guarded upload, a failed login refuses
/// the second upload with a typed error, and the alerts of two queues are shown one at a time, in order.
@Suite struct ConditionExampleTests {
    @Test func theLoginRunsFirstAFailedOneRefusesAndAlertsNeverOverlap() throws {
        let out = try runExample("conditions")
        let texts = out.texts
        let alerts = (1...4).flatMap { ["alert \($0) shown", "alert \($0) dismissed"] }
        #expect(texts == [
            "login: logged in = true",
            "upload: runs once logged in",
            "login: logged in = false",
            "upload-2 ran: false, refused: true",
            "upload-2 was refused by LoggedIn: NotLoggedIn()",
        ] + alerts)
    }
}
