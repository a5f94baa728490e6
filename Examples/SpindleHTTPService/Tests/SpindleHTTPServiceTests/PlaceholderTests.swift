import Testing
import AsyncHTTPClient
@testable import SpindleHTTPServiceKit
@Test func placeholder() {}
