import CRequestQueueAPI
import Foundation
import RequestQueue
import Testing

/// Safe defaults: limits on redirects and response sizes, credentials kept to their host.
@Suite struct SecurityTests {
    let fixture = Fixture.shared

    func run(_ url: String, configure: (OpaquePointer?) -> Void = { _ in }) throws -> Completion {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        #expect(addAndRelease(q, try rec.request(url, tag: "r", configure: configure)) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 20) == RQ_OK)
        return try #require(rec.completion("r"))
    }

    @Test func responsesLargerThanTheLimitFailCleanly() throws {
        let announced = try run(fixture.url("/bytes?n=100000")) { r in _ = rq_request_set_max_response_size(r, 1000) }
        #expect(announced.outcome == RQ_OUTCOME_RESPONSE_TOO_LARGE)
        #expect(announced.body.count <= 1000)
        #expect(announced.message.contains("1000"))
        let chunked = try run(fixture.url("/bytes?n=100000&chunked=1&chunk=4096")) { r in _ = rq_request_set_max_response_size(r, 10000) }
        #expect(chunked.outcome == RQ_OUTCOME_RESPONSE_TOO_LARGE)
        #expect(chunked.body.count <= 10000)
        let fits = try run(fixture.url("/bytes?n=1000&chunked=1")) { r in _ = rq_request_set_max_response_size(r, 1000) }
        #expect(fits.outcome == RQ_OUTCOME_OK && fits.body.count == 1000)
    }

    @Test func redirectLimitIsConfigurable() throws {
        let none = try run(fixture.url("/redirect/1")) { r in _ = rq_request_set_max_redirects(r, 0) }
        #expect(none.outcome == RQ_OUTCOME_OK && none.status == 302)
        #expect(none.headers.contains { $0.0.lowercased() == "location" })
        let two = try run(fixture.url("/redirect/3")) { r in _ = rq_request_set_max_redirects(r, 2) }
        #expect(two.outcome == RQ_OUTCOME_TOO_MANY_REDIRECTS)
        let enough = try run(fixture.url("/redirect/3")) { r in _ = rq_request_set_max_redirects(r, 3) }
        #expect(enough.outcome == RQ_OUTCOME_OK && enough.status == 200)
        let defaultLimit = try run(fixture.url("/redirect/11"))
        #expect(defaultLimit.outcome == RQ_OUTCOME_TOO_MANY_REDIRECTS)
        var r: OpaquePointer?
        _ = rq_request_new(fixture.url("/"), &r)
        #expect(rq_request_set_max_redirects(r, 1001) == RQ_ERR_INVALID_ARGUMENT)
        _ = rq_request_free(r)
    }

    @Test func credentialsAreNotForwardedToAnotherHost() throws {
        let g = uniqueGroup()
        // 127.0.0.1 and localhost are different hosts to HTTP, served by the same fixture.
        let target = "http://localhost:\(fixture.port)/headers?group=\(g)&id=other-host"
        let path = "/redirect-to?group=\(g)&id=first&url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let c = try run(fixture.url(path)) { r in
            _ = rq_request_set_credentials(r, "user", "secret")
            _ = rq_request_set_header(r, "Authorization", "Bearer token")
        }
        #expect(c.outcome == RQ_OUTCOME_OK)
        let log = fixture.log(group: g)
        #expect(log.entries.map(\.id) == ["first", "other-host"])
        #expect(log.entries.first?.headers["authorization"] != nil)
        #expect(log.entries.last?.headers["authorization"] == nil)
        // On the same host the credentials follow the redirect.
        let h = uniqueGroup()
        let same = fixture.url("/basic-auth/user/secret?group=\(h)&id=same")
        let samePath = "/redirect-to?group=\(h)&id=first&url=" + same.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let ok = try run(fixture.url(samePath)) { r in _ = rq_request_set_credentials(r, "user", "secret") }
        #expect(ok.outcome == RQ_OUTCOME_OK && ok.status == 200)
    }

    @Test func tlsFailureIsItsOwnOutcome() throws {
        // The fixture speaks plain HTTP: a TLS handshake with it fails.
        let c = try run("https://127.0.0.1:\(fixture.port)/bytes?n=1")
        #expect(c.outcome == RQ_OUTCOME_TLS)
    }
}
