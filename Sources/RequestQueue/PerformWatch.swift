import CCurl
import Glibc
import Synchronization

/// One thread for the process that frees an engine thread a server holds inside one
/// `curl_multi_perform` (see "What a server sends" in include/requestqueue.h).
///
/// libcurl 7.88 reads an HTTP/2 connection, without returning, until a frame brings data for the
/// stream it reads for (lib/http2.c, `http2_recv`): a server that kept sending frames that carry
/// nothing for it (empty DATA frames, PRIORITY, WINDOW_UPDATE, frames of unknown types) held the
/// engine thread, and with it every transfer of the queue and their time limits, for as long as
/// it went on. No callback of the library runs meanwhile, so nothing on the engine thread can
/// notice; this thread does.
///
/// It looks at each busy engine four times a second (`interval`). An engine is held when the same
/// perform has been under way for `heldAfter` seconds with no callback of the library having taken
/// anything from a response since it was first seen (`Engine.callbacksRun`: a slow streaming
/// callback of the caller's, inline, is not a held engine). The TCP connections the engine read
/// `heldBytes` or more from in the last `sampleSpan` seconds of that (bytes received less those
/// waiting: `ccurl_tcp_bytes_read`) are those holding it: each is reset (`ccurl_tcp_reset`; the
/// descriptor stays libcurl's, whose next read fails), and their transfers end with
/// RQ_OUTCOME_BAD_RESPONSE (`Engine.noteResetConnections`).
///
/// The thread sleeps while every engine is idle (no transfer running): an engine leaving its idle
/// wait wakes it (`engineWoke`). It runs while a queue exists: the last engine's `unregister`
/// ends it and joins it.
// @unchecked Sendable: `engines`, `stopping` and each engine's `look` under `lock`; `thread` under
// `lifecycle`; `asleep` atomic; `wake` is a semaphore.
final class PerformWatch: @unchecked Sendable, ForkGuard.Participant {
    static let shared: PerformWatch = {
        let watch = PerformWatch()
        ForkGuard.register(watch)
        return watch
    }()

    static let interval: Int32 = 250 // milliseconds
    static let sampleSpan = 0.5
    static let heldAfter = 1.0
    /// Bytes a connection must have given in the last `sampleSpan` to be taken for one holding
    /// the engine: libcurl processes a flood at tens of MB/s, where a slow machine's (or
    /// valgrind's) long TLS handshake reads a few KiB.
    static let heldBytes: Int64 = 65536

    /// Taken around starting and stopping the thread (outside `lock`, which the thread takes).
    private let lifecycle = Lock()
    private let lock = Lock()
    private var engines: [Engine] = []
    private var stopping = false
    private var thread: pthread_t?
    private let wake = Wakeup()
    private let asleep = Atomic<Bool>(false)

    /// What the watch saw of one engine at its last looks (kept in the engine, read and written
    /// under `lock` by the watch's thread).
    struct Look {
        var perform = 0
        var callbacks = 0
        var since = 0.0
        /// Bytes read from each TCP socket of the engine (by descriptor: its identity, the count),
        /// taken `sampleSpan` after `since`, then at each reset.
        var sample: [Int32: (identity: UInt64, read: Int64)]?
        var sampledAt = 0.0
    }

    func register(_ engine: Engine) {
        lifecycle.withLock {
            lock.withLock { engines.append(engine) }
            if thread == nil { thread = startThread { [self] in run() } }
        }
        engineWoke()
    }

    /// Forgets `engine`, whose thread has ended; the last one stops the watch's thread.
    func unregister(_ engine: Engine) {
        lifecycle.withLock {
            let last: Bool = lock.withLock {
                engines.removeAll { $0 === engine }
                stopping = engines.isEmpty
                return stopping
            }
            guard last, let running = thread else { return }
            wake.post()
            pthread_join(running, nil)
            thread = nil
            lock.withLock { stopping = false }
        }
    }

    /// An engine left its idle wait (after storing its awake state): wakes the watch if it sleeps.
    /// Either this load sees the watch's store of `asleep`, or the watch's look at the engines that
    /// follows it sees the engine awake (both sequentially consistent).
    @inline(__always)
    func engineWoke() {
        if asleep.load(ordering: .sequentiallyConsistent) { wake.post() }
    }

    private func run() {
        ccurl_name_thread("rq-watch")
        while true {
            let (stop, busy): (Bool, Bool) = lock.withLock {
                guard !stopping else { return (true, false) }
                let now = Clock.now()
                var busy = false
                for engine in engines where !engine.isIdle {
                    busy = true
                    look(at: engine, now: now)
                }
                return (false, busy)
            }
            if stop { return }
            if busy {
                wake.wait(milliseconds: PerformWatch.interval)
                continue
            }
            asleep.store(true, ordering: .sequentiallyConsistent)
            if lock.withLock({ !stopping && engines.allSatisfy(\.isIdle) }) { wake.wait() }
            asleep.store(false, ordering: .sequentiallyConsistent)
        }
    }

    private func look(at engine: Engine, now: Double) {
        let perform = engine.performUnderWay.load(ordering: .relaxed)
        let callbacks = engine.callbacksRun.load(ordering: .relaxed)
        var look = engine.look
        defer { engine.look = look }
        guard perform != 0, perform == look.perform, callbacks == look.callbacks else {
            look = Look(perform: perform, callbacks: callbacks, since: now)
            return
        }
        guard let before = look.sample else {
            if now - look.since >= PerformWatch.sampleSpan {
                look.sample = engine.sampleSockets()
                look.sampledAt = now
            }
            return
        }
        guard now - look.sampledAt >= PerformWatch.sampleSpan else { return }
        if now - look.since >= PerformWatch.heldAfter {
            engine.resetSocketsRead(since: before, heldFor: now - look.since)
        }
        look.sample = engine.sampleSockets()
        look.sampledAt = now
    }

    // ForkGuard.Participant: a child has no watch thread; the engines it inherited have no thread
    // either (their queues are refused there). Its first queue starts a new watch.
    var forkRank: Int { ForkGuard.rankPerformWatch }

    func forkPrepare() {
        lifecycle.acquire()
        lock.acquire()
    }

    func forkParent() {
        lock.release()
        lifecycle.release()
    }

    func forkChild() {
        engines.removeAll()
        stopping = false
        thread = nil
        asleep.store(false, ordering: .sequentiallyConsistent)
        lock.release()
        lifecycle.release()
    }
}
