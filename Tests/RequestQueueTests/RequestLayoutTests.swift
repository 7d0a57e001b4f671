import CRequestQueueAPI
@testable import RequestQueue
import RequestQueueCore
import Testing

/// What a request costs while it waits (bench/README.md, "The caller's side"): the settings few
/// requests change live in one box that the first of them makes; until then they read their
/// defaults.
@Suite struct RequestLayoutTests {
    private func withRequest(_ body: (OpaquePointer?, Request) throws -> Void) throws {
        var handle: OpaquePointer?
        #expect(rq_request_new("http://127.0.0.1:9/x", &handle) == RQ_OK)
        defer { _ = rq_request_free(handle) }
        let r = try #require(HandleTable.shared.lookup(handle, kind: .request, as: Request.self))
        try body(handle, r)
    }

    @Test func aRequestWithOnlyACompletionHasNoOptionsBoxAndReadsTheDefaults() throws {
        try withRequest { handle, r in
            #expect(rq_request_set_completion(handle, nil, nil, nil) == RQ_OK)
            #expect(rq_request_set_timeout(handle, 5) == RQ_OK)
            #expect(!r.hasOwnOptions)
            #expect(r.maxRedirects == 10 && r.maxResponseSize == 0 && r.retry == RetryPolicy())
            #expect(r.transport == TransportSettings() && !r.usesCookies && !r.streamsBody)
            #expect(r.headerTimeout == nil && r.lowSpeed == nil && r.user == nil && r.tag == nil && r.caFile == nil)
            #expect(r.deliveredDownload == (0, -1) && r.deliveredUpload == (0, -1) && r.authCredentials == nil)
            #expect(!r.hasOwnOptions)
        }
    }

    @Test func eachBoxedSettingReadsBackAloneWhatItsSetterWrote() throws {
        try withRequest { handle, r in
            #expect(rq_request_set_max_redirects(handle, 3) == RQ_OK)
            #expect(r.hasOwnOptions && r.maxRedirects == 3 && r.maxResponseSize == 0 && r.retry == RetryPolicy())
            #expect(rq_request_set_tag(handle, "t") == RQ_OK)
            #expect(r.tag == Array("t".utf8CString) && r.maxRedirects == 3)
            #expect(rq_request_set_retry(handle, 1) == RQ_OK)
            #expect(r.retry.enabled && r.retry.delay == RetryPolicy().delay)
            #expect(rq_request_set_header_timeout(handle, 2) == RQ_OK)
            #expect(r.headerTimeout == 2 && r.lowSpeed == nil)
            #expect(rq_request_set_max_response_size(handle, 7) == RQ_OK)
            #expect(r.maxResponseSize == 7 && r.maxRedirects == 3 && r.tag == Array("t".utf8CString))
        }
    }

    @Test func unsetTransportSettingsMakeNoBox() throws {
        try withRequest { _, r in
            r.transport = TransportSettings()
            #expect(!r.hasOwnOptions)
            var settings = TransportSettings()
            settings.cookies = true
            r.transport = settings
            #expect(r.hasOwnOptions && r.usesCookies)
        }
    }
}
