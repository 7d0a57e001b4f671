import CRequestQueueAPI
import Foundation
@testable import RequestQueue
import RequestQueueCore
import Testing

/// What the header states in words and the code holds as values must agree: each value is written
/// once in the sources (the priority range in the header's rq_priority, the method lists in
/// RequestQueueCore's HTTPMethods), and this suite reads the other place.
@Suite struct HeaderAgreementTests {
    /// The header's text, with its comment line breaks (" *  ") folded into single spaces.
    static let header: String = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../include/requestqueue.h").standardized.path
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.replacingOccurrences(of: #"\n\s*\*\s*"#, with: " ", options: .regularExpression)
    }()

    /// The methods listed right after `prefix` in the header, up to `end` ("GET, HEAD and PUT").
    static func methods(after prefix: String, until end: String) -> Set<String> {
        guard let start = header.range(of: prefix), let stop = header.range(of: end, range: start.upperBound..<header.endIndex)
        else { return [] }
        let list = header[start.upperBound..<stop.lowerBound].replacingOccurrences(of: " and ", with: ", ")
        return Set(list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
    }

    @Test func priorityRangeIsTheHeaders() {
        #expect(Scheduler<Int>.priorities == Int(RQ_PRIORITY_VERY_LOW.rawValue)...Int(RQ_PRIORITY_VERY_HIGH.rawValue))
        #expect(RQ_PRIORITY_NORMAL.rawValue == 0)
    }

    @Test func methodListsAreTheHeaders() {
        #expect(!Self.header.isEmpty)
        #expect(Self.methods(after: "any method other than ", until: ")") == HTTPMethods.idempotent)
        #expect(Self.methods(after: "An equal request with a safe method (", until: ")") == HTTPMethods.coalescable)
        #expect(Self.methods(after: "Methods ", until: " send a body even when none is set") == HTTPMethods.sendingBody)
        #expect(Self.methods(after: "A 303 answering a method other than ", until: " is NOT followed") == HTTPMethods.seeOtherFollowed)
    }
}
