import CCurl
import Glibc
import RequestQueueCore
import Synchronization

/// libcurl is initialised once per process, before the first multi handle; OpenSSL first told to
/// keep its state until the process is gone (see `ccurl_openssl_keep_at_exit`).
private let curlReady: Bool = {
    ccurl_openssl_keep_at_exit()
    return curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
}()

/// The libcurl loop of one queue, on a thread of its own. It owns a multi handle and only the
/// transfers that are running: the queue decides what starts; the engine reports what ended.
/// Other threads talk to it through `send`, which wakes it up.
// @unchecked Sendable: `inbox`/`stopped` under `inboxLock`; `multiGone` under `multiLock`;
// `wakeState` atomic; `idleWake` is a semaphore; `deferredWakeSince` only on the thread delivering
// a batch; `thread` set in init, read only to join it; the rest on the engine thread only.
final class Engine: @unchecked Sendable {
    enum Command {
        case start(Request, UInt64)
        case abort(Request)
        /// Report `startDue` to the queue at this monotonic time (rate limit).
        case wake(at: Double)
        case shutdown
        /// Un-pause the transfer of a streamed body: the delivery caught up (Streaming.swift).
        case resume(Request)
        /// Inline delivery: another thread posted events; run them before blocking.
        case deliver
    }

    /// unowned(unsafe): the queue owns the engine and stops its thread (`shutdown`, from
    /// `Queue.close` or a failed `Queue.init`) while it is alive, and nothing else holds the engine;
    /// a checked reference costs a retain and a release for every use (several per request).
    private unowned(unsafe) let queue: Queue
    /// The queue, when it delivers on this thread (RQ_DELIVERY_INLINE): a streamed body's pieces
    /// go to the callback from libcurl's buffer (Streaming+Inline.swift). unowned(unsafe), read
    /// for every piece without reference counting: the queue owns this engine and outlives its
    /// thread (`rq_queue_free` joins it), the only thread that reads it.
    unowned(unsafe) let inlineQueue: Queue?
    /// `queue.transport`, read for every start (`applyConnectionLimits`) without going through
    /// the queue (a retain and a release each time). unowned(unsafe): the queue holds it for its
    /// whole life, which this engine's thread does not outlive (see `queue`).
    private unowned(unsafe) let transport: QueueTransport
    private let multi: UnsafeMutableRawPointer
    private let inboxLock = Lock()
    private var inbox: [Command] = []
    /// Set under `inboxLock` when the thread stops; `send` then drops its command.
    private var stopped = false
    /// Whether a `send` must wake the engine thread: `awake` while it runs (it reads its inbox
    /// before it waits again), `polling` from just before its last look at the inbox until it
    /// returns from `curl_multi_poll`, `sleeping` likewise around its wait on `idleWake` (when
    /// libcurl has no transfer), `woken` once a sender has woken it in that interval. See
    /// `send` and `waitForWork` for why no wake-up is lost.
    private let wakeState = Atomic<UInt8>(Engine.awake)
    private static let awake: UInt8 = 0, polling: UInt8 = 1, woken: UInt8 = 2, sleeping: UInt8 = 3
    /// What an engine with no transfer in libcurl waits on: a post is two futex calls at most
    /// (none when it comes before the wait or during its spin), where `curl_multi_wakeup` is a `sendto` and the
    /// poll's two `recvfrom` to drain libcurl's socket pair.
    private let idleWake = Wakeup()
    /// Engine thread only. Set when the engine has handed events to the delivery
    /// (`Queue.signalOwedEvents`): a callback may add the next request within microseconds, and
    /// an idle wait then spins for it first (`waitForWork`). Cleared by that wait.
    var handedOver = false
    /// The spin of an idle wait after a hand-over: a wake-up comes ~15-30 us after the hand-over
    /// when a callback adds (the delivering thread wakes, runs the callback, wakes the engine).
    private var idleSpin = SpinningWait(seconds: 50e-6)
    /// Taken around `curl_multi_wakeup`, which a sender calls after releasing `inboxLock` (the
    /// engine, woken, takes that lock at once), and around the shutdown's `curl_multi_cleanup`.
    private let multiLock = Lock()
    private var multiGone = false
    /// The thread running a batch of this queue's callbacks defers its wake-ups to the end of the
    /// batch (`deferringWakeUps`): since when one is owed (0 when none). Only that thread uses it,
    /// and the queue runs one batch at a time.
    private var deferredWakeSince = 0.0
    private var thread = pthread_t()

    // Engine thread only.
    /// The running transfers (each knows its slot here; its request knows it as `transfer`).
    private var running: [Transfer] = []
    private var timers: [(deadline: Double, request: Request, generation: UInt64)] = []
    private var wakeAt: Double?
    /// Idle transfers kept for reuse: those whose handle is ready for an attempt, and those whose
    /// handle must be replaced first (`Transfer.needsNewHandle`), which the engine does before it
    /// waits (`prepareTransfer`). At most `poolLimit` in all.
    private var pool: [Transfer] = []
    private var usedPool: [Transfer] = []
    private static let poolLimit = 256
    /// The TLS sessions of the queue's https transfers (a libcurl share), so that a new connection
    /// resumes a session an earlier one made: libcurl keeps them per handle otherwise, and a handle
    /// serves one attempt on libcurl < 8.1.0 (`Transfer.renewHandle`). Made at the first https
    /// attempt, freed after the last handle (shutdown). Engine thread.
    private var tlsShareMade: UnsafeMutableRawPointer?
    var tlsShare: UnsafeMutableRawPointer? {
        if tlsShareMade == nil { tlsShareMade = ccurl_share_new(0) }
        return tlsShareMade
    }
    private var nextIdleCheck = 0.0
    /// The TCP sockets libcurl opened, by connection (a hash of its addresses and ports), so that
    /// a transfer on a reused connection finds its socket too (Transfer.stall counts its bytes).
    private var sockets: [Int: Int32] = [:]
    private var socketKeys: [Int32: Int] = [:]
    /// The entry of `sockets` last recorded or found (`socket(for:)`), nil after its socket closed.
    private var lastSocket: (key: Int, fd: Int32)?
    /// Transfers started in this turn of the loop: when every running transfer is one of them,
    /// none can have a response ready yet, and the batching's look at the sockets is skipped.
    private var startedThisTurn = 0
    /// The calls of `curl_multi_perform` so far (wrapping): a transfer counts the calls libcurl
    /// makes to it within one (`Transfer.progress`).
    private(set) var performs = 0
    // What the perform watch (PerformWatch.swift) reads and does.
    /// The number of the `curl_multi_perform` under way (`performs`), 0 between them.
    let performUnderWay = Atomic<Int>(0)
    /// Counts the callbacks from libcurl that took something from a response (a header line, body
    /// bytes): an engine held inside a perform runs none. Written by the engine thread only.
    let callbacksRun = Atomic<Int>(0)
    @inline(__always)
    func noteCallback() { callbacksRun.store(callbacksRun.load(ordering: .relaxed) &+ 1, ordering: .relaxed) }
    /// The TCP sockets of the engine's connections (descriptor and identity) as the watch sees
    /// them, and the connections it reset that the engine has not yet seen: under `watchLock`. A
    /// socket leaves the table before libcurl closes it (`socketClosed`), so that the watch never
    /// resets a descriptor that no longer is one of this engine's.
    private let watchLock = Lock()
    private var watchedSockets: [Int32: UInt64] = [:]
    private var resetConnections: [Int32: (bytes: Int64, seconds: Double)] = [:]
    private let connectionsReset = Atomic<Bool>(false)
    /// The watch's last look at this engine (its thread only, under its lock).
    var look = PerformWatch.Look()
    /// `PerformWatch.shared`, read once (a static's every read checks its lazy initialization).
    private let watch = PerformWatch.shared
    /// Transfers that started filling a chunk of a streamed body this turn (`filling`).
    private var fillingChunks: [Transfer] = []
    /// When `chunkPool` frees its buffers, unless a streamed body starts before (`chunkPoolUnused`).
    private var chunkPoolReleaseAt: Double?
    /// Attempts started by a report made while `report` was beginning others (`report`).
    private var dueStarts: [(Request, UInt64)] = []
    private var beginningStarts = false
    /// Whether the environment names a proxy, read by the first attempt that starts in a turn of
    /// the loop (after the commands were taken: a command sent after a setenv sees it) and shared
    /// by the others of that turn; nil until then (Transfer.configureRoute).
    var proxyInEnvironment: Bool?
    private static let idleCheckInterval = 0.1
    /// One hour: the longest an idle engine blocks.
    private static let idleWaitMs = 3_600_000.0

    init?(queue: Queue) {
        guard curlReady, let multi = curl_multi_init() else { return nil }
        // Without its wake-up socket pair (libcurl makes the multi handle anyway when it cannot
        // open one: no file descriptor left, say), nothing could wake an idle engine. (The byte
        // written here only ends the first poll early.)
        guard curl_multi_wakeup(multi) == CURLM_OK else {
            curl_multi_cleanup(multi)
            return nil
        }
        self.queue = queue
        self.multi = multi
        transport = queue.transport
        inlineQueue = queue.delivery == .inline ? queue : nil
        guard let thread = startThread({ [self] in run() }) else {
            curl_multi_cleanup(multi)
            return nil
        }
        self.thread = thread
        watch.register(self)
    }

    /// Hands a command to the engine thread. Wakes it only when it is about to block or blocked
    /// (`polling`, `sleeping`) and no other sender has woken it yet: an awake engine, the engine
    /// thread itself included, reads its inbox before it waits, and one wake-up serves every
    /// command sent until the engine returns from its wait. The wake-up comes after the inbox
    /// lock is released: the woken engine takes that lock first, and would find it held.
    /// A thread running a batch of callbacks wakes the engine once, at the end of the batch.
    func send(_ command: Command) {
        let deferring = pthread_getspecific(deferringKey) == Unmanaged.passUnretained(self).toOpaque()
        let appended: Bool = inboxLock.withLock {
            // After the shutdown the multi handle is gone: a late command (a cancel racing
            // rq_queue_free, say) has nothing left to act on.
            guard !stopped else { return false }
            inbox.append(command)
            return true
        }
        guard appended else { return }
        if !deferring {
            wakeIfWaiting()
        } else if deferredWakeSince == 0 {
            deferredWakeSince = Clock.now()
        }
    }

    /// Wakes the engine if it is about to wait or waiting and nobody woke it yet; called after an
    /// append to the inbox (the order `waitForWork`'s proof needs). Not when the inbox is empty:
    /// the engine took the commands (it takes them only after a wait returns), and a wake-up now
    /// would end its next wait for nothing (the end of a batch of callbacks often comes after the
    /// engine, awake, took the adds of the batch and started polling for their responses).
    private func wakeIfWaiting() {
        var state = wakeState.load(ordering: .acquiring)
        while state == Engine.polling || state == Engine.sleeping {
            if inboxLock.withLock({ inbox.isEmpty }) { return }
            let (exchanged, found) = wakeState.compareExchange(expected: state, desired: Engine.woken,
                                                               ordering: .acquiringAndReleasing)
            if !exchanged {
                state = found
                continue
            }
            if state == Engine.sleeping {
                idleWake.post()
            } else {
                // The engine may have returned from its poll meanwhile (its timeout) and be
                // shutting down: the lock keeps the multi handle until the wake-up is written.
                multiLock.withLock { if !multiGone { curl_multi_wakeup(multi) } }
            }
            return
        }
    }

    /// Runs `body` (a batch of this queue's callbacks, on the delivering thread) with the wake-ups
    /// of its sends held back: the commands wait in the inbox, and one wake-up at the end, or
    /// after 1 ms of callbacks (`flushDeferredWakeIfDue`), serves them all. That wake-up follows
    /// every held-back append, so the proof of `waitForWork` holds for it as for a `send`.
    func deferringWakeUps(_ body: () -> Void) {
        let previous = pthread_getspecific(deferringKey)
        pthread_setspecific(deferringKey, Unmanaged.passUnretained(self).toOpaque())
        body()
        pthread_setspecific(deferringKey, previous)
        if deferredWakeSince != 0 {
            deferredWakeSince = 0
            wakeIfWaiting()
        }
    }

    /// Inside `deferringWakeUps`, between two callbacks: wakes the engine when a wake-up has been
    /// held back for 1 ms, so that slow callbacks do not hold back the starts of earlier adds.
    func flushDeferredWakeIfDue() {
        if deferredWakeSince != 0, Clock.now() - deferredWakeSince >= 0.001 {
            deferredWakeSince = 0
            wakeIfWaiting()
        }
    }

    /// Whether the engine waits, or is about to, with no transfer running: it makes no turn until
    /// something wakes it (`SpentResponses`).
    var isIdle: Bool { wakeState.load(ordering: .sequentiallyConsistent) == Engine.sleeping }

    /// Whether the caller runs on this engine's thread (which marks itself when it starts).
    var isCurrentThread: Bool { pthread_getspecific(threadKey) == Unmanaged.passUnretained(self).toOpaque() }
    /// `Engine.threadKey` and `Engine.deferringKey`, read once: every read of a static checks its
    /// lazy initialization (`swift_once`), and these are read for every post and every send.
    private let threadKey = Engine.threadKey
    private let deferringKey = Engine.deferringKey
    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
    /// The engine whose wake-ups the current thread holds back (`deferringWakeUps`).
    private static let deferringKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Stops the thread after dropping every transfer; returns once it has ended.
    func shutdown() {
        send(.shutdown)
        pthread_join(thread, nil)
        watch.unregister(self)
        queue.transport.close() // the queue's defaults handle goes with it
    }

    private func run() {
        pthread_setspecific(Engine.threadKey, Unmanaged.passUnretained(self).toOpaque())
        // The name `top -H`, gdb and a callback (inline delivery) see: "rq-engine".
        ccurl_name_thread("rq-engine")
        var stillRunning: Int32 = 0
        // The inbox and this array trade places each turn: no allocation per turn.
        var commands: [Command] = []
        while true {
            inboxLock.withLock { swap(&inbox, &commands) }
            queue.spent.free()
            proxyInEnvironment = nil
            startedThisTurn = 0
            // (An empty array's removeAll still calls replaceSubrange: skipped, as the timers' below.)
            defer { if !commands.isEmpty { commands.removeAll(keepingCapacity: true) } }
            for command in commands {
                switch command {
                case let .start(request, generation):
                    start(request, generation: generation)
                case let .abort(request):
                    timers.removeAll { $0.request === request }
                    if let transfer = request.transfer { recycle(transfer) }
                case let .wake(at):
                    wakeAt = min(wakeAt ?? at, at)
                case .shutdown:
                    inboxLock.withLock { stopped = true }
                    queue.signalOwedEvents()
                    for transfer in running { recycle(transfer) }
                    timers.removeAll()
                    pool.removeAll()
                    usedPool.removeAll()
                    chunkPool.release()
                    multiLock.withLock {
                        multiGone = true
                        curl_multi_cleanup(multi)
                    }
                    if let share = tlsShareMade { ccurl_share_free(share) }
                    return
                case let .resume(request):
                    request.transfer?.unpause()
                case .deliver:
                    queue.foreignEventsPosted()
                }
            }
            let startedBeforePerform = startedThisTurn
            performs &+= 1
            performUnderWay.store(performs, ordering: .relaxed)
            curl_multi_perform(multi, &stillRunning)
            performUnderWay.store(0, ordering: .relaxed)
            if connectionsReset.load(ordering: .relaxed) { noteResetConnections() }
            postFilledChunks()
            readFinished()
            // Inline delivery: the callbacks run every turn, as libcurl multi's users run theirs
            // after each perform. No hand-over to save by batching them, and a refill client's next
            // requests go out now rather than after every other ready socket (deferred, they left
            // the pipeline half empty: 26 -> 19 us CPU per request at K = 64, refill). Threaded and
            // dispatch delivery: likewise when no request waits to start, so that only the
            // callbacks can refill the pipeline (`signalOwedEvents`).
            let requestsWait = queue.eventsOwed > 0 && !queue.signalOwedEvents(onlyIfNothingWaits: inlineQueue == nil)
            let now = Clock.now()
            // Events owed for 1 ms go to the delivery now, whatever this turn does next: an engine
            // that always finds a command (the next start of a busy queue) never gets to block.
            if queue.eventsOwed > 0, queue.eventsOwedAreDue(now: now) { queue.signalOwedEvents() }
            var due: [(deadline: Double, request: Request, generation: UInt64)] = []
            if !timers.isEmpty {
                timers.removeAll { timer in
                    if timer.deadline <= now { due.append(timer); return true }
                    return false
                }
            }
            for timer in due {
                report(.retryDue(timer.request, generation: timer.generation))
            }
            if let wake = wakeAt, wake <= now {
                wakeAt = nil
                report(.startDue)
                continue
            }
            if !due.isEmpty { continue }
            if !running.isEmpty, now >= nextIdleCheck {
                abortStalledTransfers(now: now)
                nextIdleCheck = now + Engine.idleCheckInterval
            }
            // An engine with nothing running and no timer blocks until a command wakes it (libcurl
            // still ends the poll for its own timers): a lost wake-up would be a hang, which
            // Tests/c/test_wakeup.c would catch.
            var waitMs = running.isEmpty && timers.isEmpty && wakeAt == nil ? Engine.idleWaitMs : 1000.0
            if let next = timers.map(\.deadline).min() { waitMs = min(waitMs, max(0, (next - now) * 1000) + 1) }
            if let wake = wakeAt { waitMs = min(waitMs, max(0, (wake - now) * 1000) + 1) }
            if !running.isEmpty { waitMs = min(waitMs, max(0, (nextIdleCheck - now) * 1000) + 1) }
            if let release = releaseChunkPool(now: now) { waitMs = min(waitMs, release) }
            // Transfers begun after this turn's perform (by the reports above) go to libcurl now,
            // as a start taken from the inbox would.
            if startedThisTurn > startedBeforePerform { continue }
            if inboxLock.withLock({ !inbox.isEmpty }) { continue }
            if queue.eventsOwed > 0, requestsWait, !running.isEmpty {
                // Requests wait to start: the engine starts the next one at each completion, and
                // the callbacks are not on the way. The batch ripens to its 64 events or 1 ms while
                // transfers run, this wait bounded by that deadline, rather than a hand-over before
                // each wait (at K = 1, one per request: a futex call on each side, or the
                // descriptor's write, poll and read). An engine going idle hands over first (below).
                waitMs = min(waitMs, queue.eventsOwedDueInMs(now: now))
            } else if queue.eventsOwed > 0 {
                // Events this thread posted wait for the delivery: deliver them in batches while
                // more work is ready, and before this thread blocks. (Nothing is ready when every
                // running transfer, if any, has just sent its request: no look then, which at
                // K = 1 is a poll per request.)
                var ready: Int32 = 0
                if running.count > startedThisTurn, !queue.eventsOwedAreDue(now: now) {
                    curl_multi_poll(multi, nil, 0, 0, &ready)
                }
                if ready > 0 { continue }
                // (Inline delivery: the callbacks run here. What they send this engine waits in
                // its inbox without a wake-up, and `waitForWork` then returns at once.)
                queue.signalOwedEvents()
            }
            waitForWork(timeoutMs: Int32(waitMs))
        }
    }

    /// Blocks until a socket is ready, the timeout passes or a sender wakes the engine, unless a
    /// command arrived meanwhile: in `curl_multi_poll`, or, when libcurl has no transfer (no
    /// socket to watch, no timer of its own), on `idleWake`.
    ///
    /// No command is left in the inbox while the engine blocks. Suppose a sender's command were,
    /// in a wait that nothing ends. The look at the inbox before that wait did not see it, so the
    /// look came before the sender's append in the inbox lock's order; the store of `polling` or
    /// `sleeping` (before the look) thus happens before the sender's read of `wakeState` (after
    /// its append, and the release of the lock), and the sender reads that value or a later one.
    /// The engine stores nothing more until the wait returns, so a later value can only be
    /// `woken`, from the one sender whose exchange from the stored value succeeded and which then
    /// wakes the wait that value names: `curl_multi_wakeup` for `polling`, a post of `idleWake`
    /// for `sleeping` (a sender that read the stored value tries the exchange until it succeeds
    /// or reads `woken`). Either way a wake-up is made after the store, and it ends the wait even
    /// when made before the wait starts: the byte stays in libcurl's wake-up socket until a poll
    /// drains it, the post in the semaphore until a wait takes it, and nothing between the store
    /// and the wait does (the zero-timeout poll of the batching comes before). A contradiction:
    /// the wake-up ends the wait, and the loop then takes the command. (The multi handle a late
    /// `curl_multi_wakeup` writes to is kept by `multiLock` until the shutdown frees it.)
    ///
    /// An idle engine that has just handed events to the delivery first spins on `idleWake` for
    /// up to 50 us (`idleSpin`) before it blocks on it: when a callback adds the next request,
    /// the add comes within the spin, and neither the engine nor the deliverer makes a system
    /// call for it. The spin is a part of the wait on `idleWake` (it takes a post as the blocking
    /// wait would, after the same store and look), so the proof holds for it unchanged.
    private func waitForWork(timeoutMs: Int32) {
        if timeoutMs > 0, inboxLock.withLock({ inbox.isEmpty }) { prepareTransfer() }
        let idle = running.isEmpty
        let spin = idle && handedOver
        handedOver = false
        wakeState.store(idle ? Engine.sleeping : Engine.polling, ordering: .sequentiallyConsistent)
        // (After that store: a deliverer that hands responses back later sees it, `isIdle`.)
        if idle { queue.spent.free() }
        if inboxLock.withLock({ inbox.isEmpty }) {
            if idle {
                if !spin || !idleSpin.spin(idleWake) { idleWake.wait(milliseconds: timeoutMs) }
            } else {
                curl_multi_poll(multi, nil, 0, timeoutMs, nil)
            }
        }
        // A wake-up made after the wait returned, or for a command seen above, is left in the
        // socket or the semaphore: it only ends a later wait early, and the engine then finds
        // nothing new.
        wakeState.store(Engine.awake, ordering: .sequentiallyConsistent)
        if idle { watch.engineWoke() }
    }

    /// A start sent through the inbox: the request may have been cancelled since.
    private func start(_ request: Request, generation: UInt64) {
        guard queue.isCurrent(request, generation: generation) else { return }
        begin(request, generation: generation)
    }

    /// Reports to the queue; begins the attempts it starts, in order. A start that fails reports
    /// again from inside `begin`: the attempts that report starts wait in `dueStarts` for the
    /// outer call, so that a run of failing starts does not nest.
    @discardableResult
    private func report(_ report: EngineReport) -> EngineReply {
        queue.report(report) { beginReported($0, generation: $1) }
    }

    /// Begins an attempt that a report started (see `report`).
    private func beginReported(_ request: Request, generation: UInt64) {
        if beginningStarts {
            dueStarts.append((request, generation))
            return
        }
        beginningStarts = true
        begin(request, generation: generation)
        if !dueStarts.isEmpty {
            var next = 0
            while next < dueStarts.count {
                let (request, generation) = dueStarts[next]
                next += 1
                begin(request, generation: generation)
            }
            dueStarts.removeAll(keepingCapacity: true)
        }
        beginningStarts = false
    }

    /// Starts an attempt the queue has just decided to start.
    private func begin(_ request: Request, generation: UInt64) {
        if let old = request.transfer { recycle(old) }
        // libcurl reads the CA file on this thread: a FIFO there would stop the whole queue.
        // (A request whose settings are all defaults has no CA file: its box is not read then.)
        if request.hasOwnOptions, let caFile = request.caFile, existsAndIsNotRegular(caFile) {
            let message = "cannot use the CA file \(decodeCString(caFile)): not a regular file"
            report(.failedToStart(request, generation: generation,
                                  Response(outcome: .tls, status: 0, url: request.url.string, message: message,
                                           attempts: request.attempts)))
            return
        }
        guard let transfer = pool.popLast() ?? usedPool.popLast() ?? Transfer(engine: self),
              !transfer.needsNewHandle || transfer.renewHandle() else {
            report(.failedToStart(request, generation: generation, failure(request, "out of memory")))
            return
        }
        transfer.begin(request, generation: generation)
        transport.applyConnectionLimits(multi)
        guard curl_multi_add_handle(multi, transfer.easy) == CURLM_OK else {
            transfer.end()
            keep(transfer)
            report(.failedToStart(request, generation: generation, failure(request, "libcurl refused the transfer")))
            return
        }
        transfer.slot = running.count
        running.append(transfer)
        startedThisTurn += 1
        request.transfer = transfer
        if running.count > keptConnectionsFor { keepConnections() }
    }

    /// The most transfers that ran at once, as far as the connection cache is sized for them.
    private var keptConnectionsFor = 0

    /// libcurl keeps at most 4 idle connections per transfer in the multi handle AT THE MOMENT a
    /// connection is returned: when a queue's pipeline drains (a refill client between batches, a
    /// burst ending), it closed the connections of the transfers that just ended, and the next
    /// requests connected again (115 connects instead of 64 for 30,000 refilled requests at K = 64,
    /// up to 1,037 on a loaded machine). The cache is sized for the most transfers that ran at once
    /// instead (4 connections each, as libcurl's own rule at that peak), so it does not shrink as
    /// the pipeline drains; idle connections still close after libcurl's CURLOPT_MAXAGE_CONN
    /// (118 s), and `rq_queue_set_max_connections` still bounds the open ones.
    private func keepConnections() {
        keptConnectionsFor = running.count
        let (most, overflow) = keptConnectionsFor.multipliedReportingOverflow(by: 4)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, overflow ? Int.max : most)
    }

    private func failure(_ request: Request, _ message: String) -> Response {
        Response(outcome: .transport, status: 0, url: request.url.string, message: message, attempts: request.attempts)
    }

    private func readFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = ccurl_msg_result(message)
            guard let transfer = runningTransfer(of: easy), let request = transfer.request else { continue }
            let generation = transfer.generation
            // The kept connection libcurl chose had bytes waiting: the same attempt again, on
            // another transfer (`Transfer.connected`).
            if transfer.beginsAgain {
                recycle(transfer)
                begin(request, generation: generation)
                continue
            }
            let response = transfer.response(for: request, code: code)
            recycle(transfer)
            finished(request, generation, response)
        }
    }

    /// The running transfer of `easy` (a handle libcurl reports done is in the multi handle, so
    /// running). Among a few, found by a look through them: asking libcurl (CURLINFO_PRIVATE) costs
    /// about 80 instructions.
    private func runningTransfer(of easy: UnsafeMutableRawPointer) -> Transfer? {
        if running.count <= 4 {
            for index in running.indices where running[index].easy == easy { return running[index] }
        }
        var privateData: UnsafeMutableRawPointer?
        _ = ccurl_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &privateData)
        return privateData.map { Unmanaged<Transfer>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Ends, as timed out, the transfers that broke a slow-server limit (idle, response headers,
    /// low speed: see TransferWatch).
    private func abortStalledTransfers(now: Double) {
        for transfer in running {
            guard let message = transfer.stall(now: now), let request = transfer.request else { continue }
            let generation = transfer.generation
            let response = transfer.response(for: request, code: CURLE_OPERATION_TIMEDOUT, message: message)
            recycle(transfer)
            finished(request, generation, response)
        }
    }

    /// Reports an ended attempt to the queue and arms the retry timer when it asks for one.
    private func finished(_ request: Request, _ generation: UInt64, _ response: Response) {
        if case let .retry(delay, next) = queue.attemptEnded(request, generation: generation, response,
                                                              start: { beginReported($0, generation: $1) }) {
            timers.append((Clock.now() + delay, request, next))
        }
    }

    /// Detaches a running transfer from the multi handle and from its request, and keeps it for
    /// reuse.
    private func recycle(_ transfer: Transfer) {
        guard transfer.slot >= 0, transfer.slot < running.count, running[transfer.slot] === transfer else { return }
        curl_multi_remove_handle(multi, transfer.easy)
        let last = running.removeLast()
        if last !== transfer {
            last.slot = transfer.slot
            running[transfer.slot] = last
        }
        transfer.slot = -1
        transfer.request?.transfer = nil
        transfer.end()
        // A handle paused by its write callback holds libcurl's buffered data: never reuse it.
        if !transfer.paused { keep(transfer) }
    }

    /// Keeps an idle transfer for reuse (`pool`).
    private func keep(_ transfer: Transfer) {
        guard pool.count + usedPool.count < Engine.poolLimit else { return }
        if transfer.needsNewHandle { usedPool.append(transfer) } else { pool.append(transfer) }
    }

    /// Before the engine waits, with no command waiting: where a handle serves one attempt
    /// (`Transfer.handleServesOneTransfer`), replaces the handle of one idle transfer, or makes
    /// one spare transfer when every transfer runs, so that the next start takes a ready handle
    /// and the 20,000 instructions of a new handle (libcurl's init, options, the old one's
    /// cleanup) are spent while the engine would wait, not between a completion and the next
    /// request (at K = 1, each request's latency).
    private func prepareTransfer() {
        if let transfer = usedPool.last {
            if transfer.renewHandle() { pool.append(usedPool.removeLast()) }
        } else if pool.isEmpty, !running.isEmpty, Transfer.handleServesOneTransfer,
                  let spare = Transfer(engine: self) {
            pool.append(spare)
        }
    }

    // Sockets (engine thread: libcurl calls back from curl_multi_perform and curl_multi_cleanup).

    func socketConnected(_ fd: Int32, key: Int) {
        if let old = sockets.updateValue(fd, forKey: key), old != fd { socketKeys[old] = nil }
        if let old = socketKeys.updateValue(key, forKey: fd), old != key { sockets[old] = nil }
        lastSocket = (key, fd)
        let identity = ccurl_file_identity(fd)
        watchLock.withLock { watchedSockets[fd] = identity }
    }

    /// The socket of the connection with this key, or -1. (An attempt on a kept connection, the
    /// common case, asks for the one the previous attempt asked for: no hashing then.)
    func socket(for key: Int) -> Int32 {
        if let last = lastSocket, last.key == key { return last.fd }
        guard let fd = sockets[key] else { return -1 }
        lastSocket = (key, fd)
        return fd
    }

    func socketClosed(_ fd: Int32) {
        watchLock.withLock { _ = watchedSockets.removeValue(forKey: fd) }
        if let key = socketKeys.removeValue(forKey: fd) { sockets[key] = nil }
        if lastSocket?.fd == fd { lastSocket = nil }
        if !http1Sockets.isEmpty { http1Sockets.remove(fd) }
    }

    /// The watch's thread: bytes read so far from each TCP socket of the engine's connections.
    func sampleSockets() -> [Int32: (identity: UInt64, read: Int64)] {
        watchLock.withLock {
            var sample: [Int32: (identity: UInt64, read: Int64)] = [:]
            for (fd, identity) in watchedSockets {
                let read = ccurl_tcp_bytes_read(fd)
                if read >= 0 { sample[fd] = (identity, Int64(read)) }
            }
            return sample
        }
    }

    /// The watch's thread, the engine held inside one perform for `seconds`: resets the
    /// connections read from since `before` (see PerformWatch).
    func resetSocketsRead(since before: [Int32: (identity: UInt64, read: Int64)], heldFor seconds: Double) {
        watchLock.withLock {
            for (fd, identity) in watchedSockets {
                guard let earlier = before[fd], earlier.identity == identity else { continue }
                let read = Int64(ccurl_tcp_bytes_read(fd))
                guard read - earlier.read >= PerformWatch.heldBytes, ccurl_tcp_reset(fd) == 0 else { continue }
                resetConnections[fd] = (read - earlier.read, seconds)
                connectionsReset.store(true, ordering: .relaxed)
            }
        }
    }

    /// After a perform in which the watch reset connections: their transfers end as held
    /// (`Transfer.heldEngine`) when libcurl reports them failed.
    private func noteResetConnections() {
        let reset: [Int32: (bytes: Int64, seconds: Double)] = watchLock.withLock {
            connectionsReset.store(false, ordering: .relaxed)
            defer { resetConnections.removeAll() }
            return resetConnections
        }
        for transfer in running {
            guard let (bytes, seconds) = reset[transfer.socket] else { continue }
            let held = (seconds * 10).rounded() / 10
            transfer.heldEngine = "the server kept libcurl reading the connection for \(held) s with nothing for "
                + "the request (\(bytes) bytes in the last \(PerformWatch.sampleSpan) s: HTTP/2 frames that carry nothing "
                + "for the stream, say), which held every transfer of the queue; the library reset the connection"
        }
    }

    /// The sockets of direct https connections on which an HTTP/1.x response came (ALPN chose
    /// HTTP/1.1 for them): a request on such a kept connection is checked as on a plain http one
    /// (`Transfer.carriesHTTP1`). An HTTP/2 connection is never among them.
    private var http1Sockets = Set<Int32>()

    func noteHTTP1(_ fd: Int32) { http1Sockets.insert(fd) }

    func carriedHTTP1(_ fd: Int32) -> Bool { http1Sockets.contains(fd) }

    // What a transfer posts for its attempt, through the queue's one path (`Queue.post`).

    func reportProgress(_ request: Request, _ generation: UInt64, upload: Bool, done: Int64, total: Int64) {
        _ = queue.post(request, generation: generation) { .progress($0, upload: upload, done: done, total: total) }
    }

    /// Posts the head of the attempt's final response to those with a head callback; `make` runs
    /// only when one has.
    func postHead(_ request: Request, _ generation: UInt64, _ make: () -> Response) {
        // Set by the queue before it sent this attempt's start (Request.headWanted).
        guard request.headWanted else { return }
        var head: Response?
        _ = queue.post(request, generation: generation, wantsHead: true) { recipient in
            let made = head ?? make()
            head = made
            return .head(recipient, made)
        }
    }

    /// `transfer` started filling a chunk of a streamed body: it is posted at the end of this turn.
    func filling(_ transfer: Transfer) { fillingChunks.append(transfer) }

    /// Posts the chunks filled during this turn (before the completions it brought: a body's
    /// chunks come before its completion), whether full or not: what arrived never waits for more.
    private func postFilledChunks() {
        guard !fillingChunks.isEmpty else { return }
        for transfer in fillingChunks { transfer.postFilledChunk() }
        fillingChunks.removeAll(keepingCapacity: true)
    }

    /// The buffers of this queue's streamed bodies (Streaming.swift).
    let chunkPool = ChunkPool()

    /// No attempt streams from `chunkPool` now: its buffers are kept for the next streamed body
    /// (a refill client adds it from the completion, after this), and freed if none has started
    /// `ChunkPool.idleRelease` seconds from now (`releaseChunkPool`).
    func chunkPoolUnused() { chunkPoolReleaseAt = Clock.now() + ChunkPool.idleRelease }

    /// Frees the buffers of `chunkPool` once its release is due (the loop's wait ends by then);
    /// returns the milliseconds left until it is, if it is pending.
    private func releaseChunkPool(now: Double) -> Double? {
        guard let at = chunkPoolReleaseAt else { return nil }
        guard now >= at else { return (at - now) * 1000 + 1 }
        chunkPoolReleaseAt = nil
        chunkPool.release()
        return nil
    }

    /// Posts a chunk of a streamed body; false when the attempt is no longer current.
    func postChunk(_ request: Request, _ generation: UInt64, _ chunk: StreamChunk, urgent: Bool) -> Bool {
        queue.post(request, generation: generation, urgent: urgent) { .chunk($0, chunk) }
    }
}
