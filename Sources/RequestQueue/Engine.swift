import CCurl
import Glibc
import RequestQueueCore

/// libcurl is initialised once per process, before the first multi handle.
private let curlReady: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK

/// The libcurl loop of one queue, on a thread of its own. It owns a multi handle and only the
/// transfers that are running: the queue decides what starts; the engine reports what ended.
/// Other threads talk to it through `send`, which wakes it up.
final class Engine: @unchecked Sendable {
    enum Command {
        case start(Request, UInt64)
        case abort(Request)
        /// Call the queue's `startDue` at this monotonic time (rate limit).
        case wake(at: Double)
        case shutdown
        /// Un-pause the transfer of a streamed body: the delivery caught up (Streaming.swift).
        case resume(Request)
    }

    private unowned let queue: Queue
    private let multi: UnsafeMutableRawPointer
    private let inboxLock = Lock()
    private var inbox: [Command] = []
    private var thread = pthread_t()

    // Engine thread only.
    /// The running transfers (each knows its slot here; its request knows it as `transfer`).
    private var running: [Transfer] = []
    private var timers: [(deadline: Double, request: Request, generation: UInt64)] = []
    private var wakeAt: Double?
    /// Idle transfers, their easy handles kept for reuse.
    private var pool: [Transfer] = []
    private var nextIdleCheck = 0.0
    private static let idleCheckInterval = 0.1

    init?(queue: Queue) {
        guard curlReady, let multi = curl_multi_init() else { return nil }
        self.queue = queue
        self.multi = multi
        guard let thread = startThread({ [self] in run() }) else {
            curl_multi_cleanup(multi)
            return nil
        }
        self.thread = thread
    }

    func send(_ command: Command) {
        inboxLock.withLock { inbox.append(command) }
        // The engine thread reads its inbox before it waits again: only other threads wake it.
        if !isCurrentThread { curl_multi_wakeup(multi) }
    }

    /// Whether the caller runs on this engine's thread (which marks itself when it starts).
    var isCurrentThread: Bool { pthread_getspecific(Engine.threadKey) == Unmanaged.passUnretained(self).toOpaque() }
    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Stops the thread after dropping every transfer; returns once it has ended.
    func shutdown() {
        send(.shutdown)
        pthread_join(thread, nil)
        queue.transport.close() // the queue's defaults handle goes with it
    }

    private func run() {
        pthread_setspecific(Engine.threadKey, Unmanaged.passUnretained(self).toOpaque())
        var stillRunning: Int32 = 0
        // The inbox and this array trade places each turn: no allocation per turn.
        var commands: [Command] = []
        while true {
            inboxLock.withLock { swap(&inbox, &commands) }
            defer { commands.removeAll(keepingCapacity: true) }
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
                    queue.signalOwedEvents()
                    for transfer in running { recycle(transfer) }
                    timers.removeAll()
                    pool.removeAll()
                    curl_multi_cleanup(multi)
                    return
                case let .resume(request):
                    request.transfer?.unpause()
                }
            }
            curl_multi_perform(multi, &stillRunning)
            readFinished()
            let now = Clock.now()
            var due: [(deadline: Double, request: Request, generation: UInt64)] = []
            timers.removeAll { timer in
                if timer.deadline <= now { due.append(timer); return true }
                return false
            }
            for timer in due { start(timer.request, generation: timer.generation) }
            if let wake = wakeAt, wake <= now {
                wakeAt = nil
                queue.startDue()
                continue
            }
            if !due.isEmpty { continue }
            if !running.isEmpty, now >= nextIdleCheck {
                abortIdleTransfers(now: now)
                nextIdleCheck = now + Engine.idleCheckInterval
            }
            var waitMs = 1000.0
            if let next = timers.map(\.deadline).min() { waitMs = min(waitMs, max(0, (next - now) * 1000) + 1) }
            if let wake = wakeAt { waitMs = min(waitMs, max(0, (wake - now) * 1000) + 1) }
            if !running.isEmpty { waitMs = min(waitMs, max(0, (nextIdleCheck - now) * 1000) + 1) }
            if inboxLock.withLock({ !inbox.isEmpty }) { continue }
            if queue.eventsOwed > 0 {
                // Events this thread posted wait for the delivery: deliver them in batches while
                // more work is ready, and before this thread blocks.
                var ready: Int32 = 0
                if !queue.eventsOwedAreDue(now: now) {
                    curl_multi_poll(multi, nil, 0, 0, &ready)
                }
                if ready > 0 { continue }
                queue.signalOwedEvents()
            }
            curl_multi_poll(multi, nil, 0, Int32(waitMs), nil)
        }
    }

    private func start(_ request: Request, generation: UInt64) {
        guard queue.isCurrent(request, generation: generation) else { return }
        if let old = request.transfer { recycle(old) }
        guard let transfer = pool.popLast() ?? Transfer(engine: self) else {
            queue.attemptFailedToStart(request, generation: generation, response: failure(request, "out of memory"))
            return
        }
        transfer.begin(request, generation: generation)
        queue.transport.applyConnectionLimits(multi)
        guard curl_multi_add_handle(multi, transfer.easy) == CURLM_OK else {
            transfer.end()
            pool.append(transfer)
            queue.attemptFailedToStart(request, generation: generation, response: failure(request, "libcurl refused the transfer"))
            return
        }
        transfer.slot = running.count
        running.append(transfer)
        request.transfer = transfer
    }

    private func failure(_ request: Request, _ message: String) -> Response {
        Response(outcome: .transport, status: 0, url: request.url.string, message: message, attempts: request.attempts)
    }

    private func readFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = ccurl_msg_result(message)
            var privateData: UnsafeMutableRawPointer?
            _ = ccurl_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &privateData)
            guard let privateData else { continue }
            let transfer = Unmanaged<Transfer>.fromOpaque(privateData).takeUnretainedValue()
            guard let request = transfer.request else { continue }
            let generation = transfer.generation
            let response = transfer.response(for: request, code: code)
            response.httpVersion = transfer.negotiatedHTTPVersion
            recycle(transfer)
            finished(request, generation, response)
        }
    }

    /// Ends, as timed out, the transfers that moved no byte for their idle limit.
    private func abortIdleTransfers(now: Double) {
        for transfer in running where transfer.isIdle(now: now) {
            guard let request = transfer.request else { continue }
            let generation = transfer.generation
            let response = transfer.response(for: request, code: CURLE_OPERATION_TIMEDOUT,
                                             message: "no data received or sent for \(request.idleTimeout) seconds")
            recycle(transfer)
            finished(request, generation, response)
        }
    }

    /// Reports an ended attempt to the queue and arms the retry timer when it asks for one.
    private func finished(_ request: Request, _ generation: UInt64, _ response: Response) {
        if let retry = queue.attemptFinished(request, generation: generation, response: response) {
            timers.append((Clock.now() + retry.delay, request, retry.generation))
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
        if !transfer.paused, pool.count < 256 { pool.append(transfer) }
    }

    func reportProgress(_ request: Request, _ generation: UInt64, upload: Bool, done: Int64, total: Int64) {
        queue.progress(request, generation: generation, upload: upload, done: done, total: total)
    }

    /// Posts a chunk of a streamed body; false when the attempt is no longer current.
    func postChunk(_ request: Request, _ generation: UInt64, _ chunk: StreamChunk) -> Bool {
        queue.postChunk(request, generation: generation, chunk)
    }
}
