import CRequestQueueAPI
import Foundation
@testable import RequestQueue
import RequestQueueCore
import Testing

/// Slow servers (requestqueue.h, "Slow servers"): a server that trickles bytes, or answers one
/// header line at a time, forever, must not hold a request, and so a queue's slots, forever;
/// a slow but steady one must not be cut. Small per-request limits keep the tests short.
@Suite struct SlowServerTests {
    let fixture = Fixture.shared

    func run(_ path: String, configure: (OpaquePointer?) -> Void) throws -> Completion {
        let q = try makeQueue()
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        #expect(addAndRelease(q, try rec.request(fixture.url(path), tag: "r", configure: configure)) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        return try #require(rec.completion("r"))
    }

    @Test func tricklingServersDoNotHoldTheQueue() throws {
        let group = uniqueGroup()
        let q = try makeQueue(max: 2)
        defer { _ = rq_queue_free(q) }
        let rec = Recorder()
        // A byte every 0.5 s of body; a header line every 0.3 s: both hold their slot, neither is idle.
        let body = try rec.request(fixture.url("/trickle?where=body&every=0.5&group=\(group)&id=body"), tag: "body") { r in
            _ = rq_request_set_idle_timeout(r, 2)
            _ = rq_request_set_low_speed_limit(r, 10, 1)
        }
        let headers = try rec.request(fixture.url("/trickle?where=headers&every=0.3&group=\(group)&id=headers"), tag: "headers") { r in
            _ = rq_request_set_idle_timeout(r, 2)
            _ = rq_request_set_header_timeout(r, 1)
        }
        let third = try rec.request(fixture.url("/bytes?n=10&group=\(group)&id=third"), tag: "third")
        #expect(addAndRelease(q, body) == RQ_OK)
        #expect(addAndRelease(q, headers) == RQ_OK)
        #expect(addAndRelease(q, third) == RQ_OK)
        #expect(rq_queue_wait_idle(q, 30) == RQ_OK)
        let b = try #require(rec.completion("body"))
        #expect(b.outcome == RQ_OUTCOME_TIMEOUT)
        #expect(b.message.contains("bytes per second"), "\(b.message)")
        let h = try #require(rec.completion("headers"))
        #expect(h.outcome == RQ_OUTCOME_TIMEOUT)
        #expect(h.message.contains("response headers"), "\(h.message)")
        let t = try #require(rec.completion("third"))
        #expect(t.outcome == RQ_OUTCOME_OK && t.body.count == 10)
        #expect(fixture.log(group: group).entries.map(\.id).contains("third"))
    }

    @Test func oneHeaderLinePerIntervalIsDetected() throws {
        // Only the idle timeout is set: the response-header limit follows it.
        let c = try run("/trickle?where=headers&every=0.3") { r in _ = rq_request_set_idle_timeout(r, 1) }
        #expect(c.outcome == RQ_OUTCOME_TIMEOUT)
        #expect(c.message.contains("response headers"), "\(c.message)")
    }

    @Test func aTrickledBodyIsCutAtTheDefaultRate() throws {
        // Only the idle timeout is set: 1 byte/s over a window of 3 s. A byte every 1.5 s is never idle.
        let c = try run("/trickle?where=body&every=1.5") { r in _ = rq_request_set_idle_timeout(r, 3) }
        #expect(c.outcome == RQ_OUTCOME_TIMEOUT)
        #expect(c.message.contains("less than 1.0 bytes per second"), "\(c.message)")
    }

    @Test func slowButSteadyBodiesAreNotCut() throws {
        // 1000 bytes/s for 3 s, above a limit of 200 bytes/s over 1 s.
        let c = try run("/trickle?where=body&every=0.1&size=100&n=30") { r in
            _ = rq_request_set_idle_timeout(r, 1)
            _ = rq_request_set_header_timeout(r, 1)
            _ = rq_request_set_low_speed_limit(r, 200, 1)
        }
        #expect(c.outcome == RQ_OUTCOME_OK, "\(c.message)")
        #expect(c.body == FixturePattern.bytes(0, 3000))
    }

    @Test func aSteadyBodyAfterARedirectIsNotCutByTheHeaderLimit() throws {
        // The headers of the redirect's target are whole at once; its body takes about 2.4 s, the
        // header limit is 1 s. (The limit once restarted when the engine noticed the redirect,
        // after the final headers had ended, and cut the body.)
        let target = fixture.url("/trickle?where=body&every=0.3&size=100&n=8")
        let path = "/redirect-to?url=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let c = try run(path) { r in
            _ = rq_request_set_idle_timeout(r, 2)
            _ = rq_request_set_header_timeout(r, 1)
            _ = rq_request_set_low_speed_limit(r, 0, 0)
        }
        #expect(c.outcome == RQ_OUTCOME_OK, "\(c.message)")
        #expect(c.body == FixturePattern.bytes(0, 800))
    }

    @Test func bytesOfAnUnfinishedHeaderLineAreActivity() throws {
        // One endless header line, a byte every 0.3 s: libcurl's counters see nothing until the
        // line ends, the socket sees every byte. The idle limit (1 s) must not fire; the header
        // limit (3 s) does.
        let c = try run("/trickle?where=line&every=0.3") { r in
            _ = rq_request_set_idle_timeout(r, 1)
            _ = rq_request_set_header_timeout(r, 3)
            _ = rq_request_set_low_speed_limit(r, 0, 0)
        }
        #expect(c.outcome == RQ_OUTCOME_TIMEOUT)
        #expect(c.message.contains("response headers"), "\(c.message)")
    }

    @Test func slowLimitsAreOffWhenSetToZero() throws {
        let c = try run("/trickle?where=body&every=0.4&n=6") { r in
            _ = rq_request_set_idle_timeout(r, 1)
            _ = rq_request_set_low_speed_limit(r, 0, 5)
        }
        #expect(c.outcome == RQ_OUTCOME_OK && c.body.count == 6)
    }

    @Test func defaultsAreWhatTheHeaderSays() throws {
        var r: OpaquePointer?
        try #require(rq_request_new("http://h/", &r) == RQ_OK)
        defer { _ = rq_request_free(r) }
        let request = try #require(HandleTable.shared.lookup(r, kind: .request, as: Request.self))
        let defaults = request.watchLimits
        #expect(defaults.idle == 60 && defaults.headers == 60)
        #expect(defaults.lowSpeedRate == 1 && defaults.lowSpeedTime == 60)
        #expect(request.connectTimeout == 30 && request.timeout == 0)
        // The two others follow the idle timeout unless set.
        #expect(rq_request_set_idle_timeout(r, 10) == RQ_OK)
        #expect(request.watchLimits == TransferWatch.Limits(idle: 10, headers: 10, lowSpeed: (1, 10)))
        #expect(rq_request_set_header_timeout(r, 5) == RQ_OK)
        #expect(rq_request_set_low_speed_limit(r, 100, 20) == RQ_OK)
        #expect(request.watchLimits == TransferWatch.Limits(idle: 10, headers: 5, lowSpeed: (100, 20)))
    }
}
