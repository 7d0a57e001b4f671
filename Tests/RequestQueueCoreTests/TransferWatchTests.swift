import RequestQueueCore
import Testing

/// The slow-server limits on synthetic samples (the engine takes one every 0.1 s).
@Suite struct TransferWatchTests {
    func sample(_ moved: Int64, connecting: Bool = false, uploading: Bool = false, headers: Bool = false,
                paused: Bool = false) -> TransferWatch.Sample {
        TransferWatch.Sample(moved: moved, connecting: connecting, uploading: uploading, awaitingHeaders: headers, paused: paused)
    }

    @Test func defaultsFollowTheIdleTimeout() {
        let d = TransferWatch.Limits(idle: TransferWatch.defaultIdleTimeout, headers: nil, lowSpeed: nil)
        #expect(d.idle == 60 && d.headers == 60 && d.lowSpeedRate == 1 && d.lowSpeedTime == 60)
        let off = TransferWatch.Limits(idle: 0, headers: nil, lowSpeed: nil)
        #expect(off.headers == 0 && off.lowSpeedTime == 0)
    }

    @Test func idle() {
        var w = TransferWatch(limits: .init(idle: 1, headers: 0, lowSpeed: (0, 0)), now: 0)
        #expect(w.check(now: 0.5, sample(10)) == nil)
        #expect(w.check(now: 1.4, sample(10)) == nil)
        #expect(w.check(now: 1.5, sample(10)) == .idle)
    }

    @Test func headersMustCompleteInTime() {
        var w = TransferWatch(limits: .init(idle: 0, headers: 2, lowSpeed: (0, 0)), now: 0)
        // Connecting and uploading do not count; each byte of the headers moving does not help.
        #expect(w.check(now: 5, sample(0, connecting: true, headers: true)) == nil)
        #expect(w.check(now: 6, sample(100, uploading: true, headers: true)) == nil)
        #expect(w.check(now: 7.9, sample(200, headers: true)) == nil)
        #expect(w.check(now: 8, sample(300, headers: true)) == .headers)
        // Complete headers stop the clock; awaiting again (a redirect) starts it anew.
        var v = TransferWatch(limits: .init(idle: 0, headers: 2, lowSpeed: (0, 0)), now: 0)
        #expect(v.check(now: 1, sample(10)) == nil)
        #expect(v.check(now: 10, sample(10)) == nil)
        #expect(v.check(now: 11, sample(20, headers: true)) == nil)
        #expect(v.check(now: 13, sample(30, headers: true)) == .headers)
    }

    @Test func lowSpeedOverConsecutiveWindows() {
        var w = TransferWatch(limits: .init(idle: 0, headers: 0, lowSpeed: (10, 2)), now: 0)
        #expect(w.check(now: 2, sample(25)) == nil)      // 25 bytes in 2 s: fine, new window
        #expect(w.check(now: 3, sample(30)) == nil)
        #expect(w.check(now: 4, sample(44)) == .slow)     // 19 bytes in 2 s < 20
        var connecting = TransferWatch(limits: .init(idle: 0, headers: 0, lowSpeed: (10, 2)), now: 0)
        #expect(connecting.check(now: 5, sample(0, connecting: true)) == nil)
        #expect(connecting.check(now: 6.9, sample(0)) == nil)
        #expect(connecting.check(now: 7, sample(0)) == .slow)
    }

    @Test func bytesThatAreNoPartOfTheExchangeAreActivityButNoSpeed() {
        // An endless chunk extension: the socket sees 1000 bytes a second, libcurl counts none.
        var w = TransferWatch(limits: .init(idle: 2, headers: 0, lowSpeed: (1, 2)), now: 0)
        #expect(w.check(now: 1, TransferWatch.Sample(moved: 1000, connecting: false, uploading: false, awaitingHeaders: false,
                                                     paused: false, counted: 50)) == nil)
        #expect(w.check(now: 2, TransferWatch.Sample(moved: 2000, connecting: false, uploading: false, awaitingHeaders: false,
                                                     paused: false, counted: 60)) == nil)
        #expect(w.check(now: 3, TransferWatch.Sample(moved: 3000, connecting: false, uploading: false, awaitingHeaders: false,
                                                     paused: false, counted: 60)) == nil)
        #expect(w.check(now: 4, TransferWatch.Sample(moved: 4000, connecting: false, uploading: false, awaitingHeaders: false,
                                                     paused: false, counted: 61)) == .slow)
    }

    @Test func pausedByUsIsNeverTheServersFault() {
        var w = TransferWatch(limits: .init(idle: 1, headers: 1, lowSpeed: (10, 1)), now: 0)
        #expect(w.check(now: 0.5, sample(100)) == nil)
        for t in stride(from: 1.0, through: 10, by: 0.5) { #expect(w.check(now: t, sample(100, paused: true)) == nil) }
        #expect(w.check(now: 10.5, sample(120)) == nil)
        #expect(w.check(now: 11.5, sample(120)) == .idle)
    }
}
