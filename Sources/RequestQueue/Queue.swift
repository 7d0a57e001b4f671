import CCurl
import CRequestQueueAPI
import Glibc
import RequestQueueCore

/// A queue at run time: the scheduler and the requests under one monitor, an engine thread running
/// the transfers on libcurl, and the delivery of callbacks (threaded or host-dispatched).
// @unchecked Sendable: its state under `monitor`; `engine`, `deliveryThread` and `handle` are set in
// init and never change after (the threads only join or read them); the `let`s never change.
final class Queue: @unchecked Sendable {
    enum Kind {
        /// Created by `rq_queue_new`.
        case user
        /// The process-wide default queue.
        case shared
        /// The hidden queue of `rq_request_start`.
        case standalone
    }

    enum Event {
        case progress(Request, upload: Bool, done: Int64, total: Int64)
        case challenge(Request, Challenge, failures: Int)
        case completion(Request, Response)
        /// A piece of a streamed body (Streaming.swift).
        case chunk(Request, StreamChunk)
        /// The head of an attempt's final response ("Response heads" in include/requestqueue.h).
        case head(Request, Response)
    }

    enum Duplicates {
        case cancelEarlier
        case allow
        case coalesce
    }

    /// Queue-level counters (`rq_queue_stats`).
    struct Stats {
        var added: UInt64 = 0
        var started: UInt64 = 0
        var retried: UInt64 = 0
        var succeeded: UInt64 = 0
        var failed: UInt64 = 0
        var cancelled: UInt64 = 0
        var coalesced: UInt64 = 0
        var bytesDown: UInt64 = 0
        var bytesUp: UInt64 = 0
    }

    enum AuthAnswer {
        case credential(user: CString, password: CString)
        case continueWithout
        case cancel
    }

    let kind: Kind
    let threaded: Bool
    /// The queue's defaults request and cookie jar (Transport.swift).
    let transport = QueueTransport()
    private(set) var handle: UInt = 0
    /// The process generation the queue was made in (ForkGuard): in a child forked since, it is
    /// inherited, its threads are gone and its locks are never taken again.
    let forkGeneration = ForkGuard.generation
    var inherited: Bool { forkGeneration != ForkGuard.generation }
    /// The caller's pointer (`rq_queue_set_context`), under the monitor.
    private var callerContext: UnsafeMutableRawPointer?

    /// Guards everything below, and the runtime fields of the requests in this queue.
    let monitor = Monitor()
    private var scheduler = Scheduler<DuplicateKey>()
    /// The requests in the scheduler (waiting or running), by id.
    private var active = SlotMap<Request>()
    /// Coalesced requests sharing a leader's transfer, by id; and the leaders detached from them.
    private var followers = SlotMap<Request>()
    private var detachedCount = 0
    private var duplicatesMode = Duplicates.cancelEarlier
    private(set) var stats = Stats()
    /// The rate-limit wake-up already asked of the engine.
    private var scheduledWake: Double?
    /// Set when `rq_queue_free` starts (no request is accepted any more), and when it has ended.
    private var closed = false
    private var freed = false
    /// Events posted and not yet finished running.
    private var undelivered = 0
    /// Events waiting to run: for `dispatch` in dispatch mode (the descriptor is readable while
    /// there are), for the delivery thread in threaded mode.
    private var pending = RingDeque<Event>()
    /// Engine thread only: events it posted without telling the delivery yet, and since when.
    /// It tells it once per batch: when it has nothing else to do, or after 64 events or 1 ms.
    private(set) var eventsOwed = 0
    private var eventsOwedSince = 0.0
    let eventFD: Int32
    /// Dispatch mode: whether `eventFD` was written and not read since.
    private var eventFDSignalled = false
    private let dispatchLock = Monitor()
    /// Threaded mode: the thread that runs the callbacks, waiting on `deliveryWake` when idle.
    private var deliveryThread: pthread_t?
    private let deliveryWake: Monitor.Condition
    private var deliveryWaiting = false
    private var deliveryStopping = false
    /// Set at the end of `init` (the engine needs the finished queue); never nil afterwards.
    private var engine: Engine!

    init?(threaded: Bool, kind: Kind) {
        self.kind = kind
        self.threaded = threaded
        deliveryWake = Monitor.Condition(monitor)
        eventFD = threaded ? -1 : ccurl_eventfd()
        if !threaded, eventFD < 0 { return nil }
        if kind == .standalone {
            scheduler.maxConcurrent = 0
            setDuplicatesLocked(.allow)
        }
        guard let engine = Engine(queue: self) else {
            if eventFD >= 0 { Glibc.close(eventFD) }
            return nil
        }
        self.engine = engine
        if threaded {
            guard let thread = startThread({ [self] in deliveryLoop() }) else {
                engine.shutdown()
                return nil
            }
            deliveryThread = thread
        }
        handle = HandleTable.shared.register(self, kind: .queue)
    }

    var pointer: OpaquePointer? { HandleTable.pointer(handle) }

    // MARK: Settings

    func setMaxConcurrent(_ value: Int) {
        monitor.withLock {
            scheduler.maxConcurrent = value
            startStartableLocked()
        }
    }

    var maxConcurrent: Int { monitor.withLock { scheduler.maxConcurrent } }

    var order: QueueOrder {
        get { monitor.withLock { scheduler.order } }
        set { monitor.withLock { scheduler.order = newValue } }
    }

    var duplicates: Duplicates {
        get { monitor.withLock { duplicatesMode } }
        set { monitor.withLock { setDuplicatesLocked(newValue) } }
    }

    private func setDuplicatesLocked(_ mode: Duplicates) {
        duplicatesMode = mode
        scheduler.cancelsEarlierDuplicates = mode == .cancelEarlier
    }

    var maxPerHost: Int {
        get { monitor.withLock { scheduler.maxPerHost } }
        set {
            monitor.withLock {
                scheduler.maxPerHost = newValue
                assignOriginsLocked()
                startStartableLocked()
            }
        }
    }

    var rateLimit: RateLimit? {
        get { monitor.withLock { scheduler.rateLimit } }
        set {
            monitor.withLock {
                scheduler.rateLimit = newValue
                assignOriginsLocked()
                startStartableLocked()
            }
        }
    }

    var statistics: Stats { monitor.withLock { stats } }

    var context: UnsafeMutableRawPointer? {
        get { monitor.withLock { callerContext } }
        set { monitor.withLock { callerContext = newValue } }
    }

    /// Origins cost a string per request: the scheduler gets them only while a per-host limit is
    /// on, and those already queued get theirs when one is turned on.
    private func assignOriginsLocked() {
        if scheduler.usesOrigins, !originsAssigned {
            scheduler.assignOrigins { id in active[id]?.origin ?? "" }
        }
        originsAssigned = scheduler.usesOrigins
    }
    private var originsAssigned = false

    func suspend() { monitor.withLock { scheduler.suspend() } }

    func resume() {
        monitor.withLock {
            scheduler.resume()
            startStartableLocked()
        }
    }

    var isSuspended: Bool { monitor.withLock { scheduler.isSuspended } }
    var count: Int { monitor.withLock { scheduler.count - detachedCount + followers.count } }

    /// Running requests in start order, then waiting ones in start order, at one instant; each
    /// coalesced request right after the one whose transfer it shares. With a tag, only those.
    func snapshot(tag: CString? = nil) -> [Request] {
        monitor.withLock {
            let (running, waiting) = scheduler.snapshot()
            var list: [Request] = []
            for id in running + waiting {
                guard let request = active[id] else { continue }
                if !request.detached { list.append(request) }
                list.append(contentsOf: request.followers)
            }
            return tag.map { tag in list.filter { $0.tag == tag } } ?? list
        }
    }

    func setPriority(_ request: Request, _ priority: Int) -> rq_result {
        monitor.withLock {
            guard request.queue === self else { return RQ_ERR_NOT_ACTIVE }
            request.lock.withLock { request.priority = priority }
            if request.leader == nil { scheduler.setPriority(request.id, priority) }
            startStartableLocked()
            return RQ_OK
        }
    }

    // MARK: Adding and cancelling

    func add(_ request: Request) -> rq_result {
        monitor.withLock {
            // Under the monitor and the request's lock at once: a request freed by its caller, or
            // added elsewhere, or a queue being freed, is never half-accepted.
            let result: rq_result = request.lock.withLock {
                guard request.callerHolds else { return RQ_ERR_INVALID_HANDLE }
                guard request.state == .new else { return RQ_ERR_ALREADY_ADDED }
                guard !closed else { return RQ_ERR_QUEUE_CLOSED }
                request.state = .waiting
                request.queue = self
                request.acceptedAt = Clock.now()
                return RQ_OK
            }
            guard result == RQ_OK else { return result }
            let id = request.id
            stats.added += 1
            let key = duplicatesMode == .allow ? nil : request.duplicateKey
            if duplicatesMode == .coalesce, let key, HTTPMethods.coalescable.contains(request.method),
               !request.streamsBody,
               let leaderID = scheduler.ids(withKey: key).first, let leader = active[leaderID], !leader.streamsBody,
               request.headCallback == nil || scheduler.placement(of: leaderID) != .running {
                // Share the transfer of an equal request already waiting or running.
                request.leader = leader
                leader.followers.append(request)
                followers[id] = request
                setState(request, scheduler.placement(of: leaderID) == .running ? .running : .waiting)
                stats.coalesced += 1
                return RQ_OK
            }
            let origin = scheduler.usesOrigins ? request.origin : ""
            let replaced = scheduler.add(id, key: key, origin: origin, priority: request.priority) ?? []
            active[id] = request
            for old in replaced {
                if let earlier = active[old] {
                    completeLocked(earlier, .cancelled(url: earlier.url.string, attempts: earlier.attempts,
                                                       message: "cancelled by a duplicate request added later"),
                                   stopTransfer: true)
                }
            }
            startStartableLocked()
            return RQ_OK
        }
    }

    func cancel(_ request: Request) -> rq_result {
        monitor.withLock {
            guard cancelLocked(request, message: "the request was cancelled") else { return RQ_ERR_NOT_ACTIVE }
            startStartableLocked()
            return RQ_OK
        }
    }

    /// Cancels every request, or those with `tag`; returns how many completions that produced.
    @discardableResult
    func cancelAll(tag: CString? = nil, message: String = "the request was cancelled") -> Int {
        monitor.withLock {
            var count = 0
            if let tag {
                for request in snapshotLocked() where request.tag == tag {
                    if cancelLocked(request, message: message) { count += 1 }
                }
                startStartableLocked()
                return count
            }
            let (running, waiting) = scheduler.snapshot()
            for id in running + waiting {
                if let request = active[id] {
                    count += (request.detached ? 0 : 1) + request.followers.count
                    completeLocked(request, .cancelled(url: request.url.string, attempts: request.attempts, message: message),
                                   stopTransfer: true)
                }
            }
            return count
        }
    }

    private func snapshotLocked() -> [Request] {
        let (running, waiting) = scheduler.snapshot()
        return (running + waiting).compactMap { active[$0] }.flatMap { ($0.detached ? [] : [$0]) + $0.followers }
    }

    /// Cancels one request with the monitor held (without starting others); false if not active.
    /// A coalesced request leaves its leader, whose transfer stops when nobody waits for it any
    /// more; a leader with followers delivers its own cancellation and goes on for them.
    private func cancelLocked(_ request: Request, message: String) -> Bool {
        let id = request.id
        let cancelled = Response.cancelled(url: request.url.string, attempts: request.attempts, message: message)
        if let leader = request.leader, followers[id] != nil {
            followers[id] = nil
            leader.followers.removeAll { $0 === request }
            request.leader = nil
            setState(request, .completed)
            tally(cancelled)
            postLocked(.completion(request, cancelled))
            if leader.detached, leader.followers.isEmpty { completeLocked(leader, cancelled, stopTransfer: true) }
            return true
        }
        guard !request.detached, scheduler.placement(of: id) != nil else { return false }
        if !request.followers.isEmpty {
            request.lock.withLock { request.detached = true }
            detachedCount += 1
            stats.cancelled += 1
            postLocked(.completion(request, cancelled))
            return true
        }
        completeLocked(request, cancelled, stopTransfer: true)
        return true
    }

    // MARK: Engine side

    /// Whether `generation` is still the current attempt of a running request.
    func isCurrent(_ request: Request, generation: UInt64) -> Bool {
        monitor.withLock { request.state == .running && request.generation == generation }
    }

    /// An attempt ended; returns the delay and generation of the next attempt when it is retried.
    func attemptFinished(_ request: Request, generation: UInt64, response: Response) -> (delay: Double, generation: UInt64)? {
        monitor.withLock {
            guard request.state == .running, request.generation == generation else { return nil }
            let throttled = response.status == 429 || response.status == 503
            let retryAfter = throttled ? response.headerValue("Retry-After").flatMap {
                RetryPolicy.retryAfterSeconds($0, now: Double(time(nil)))
            } : nil
            let decision = AttemptDecision.decide(outcome: response.outcome, status: Int(response.status),
                                                  hasAuthHandler: request.authHandler != nil && !request.detached,
                                                  retry: request.retry, attempt: request.attempts,
                                                  method: request.method, retryAfter: retryAfter,
                                                  random: request.retry.jitter > 0 ? Double.random(in: 0..<1) : 0)
            switch decision {
            case .challenge:
                if request.authCredentials != nil { request.rejectedCredentials += 1 }
                let challenge = Challenge(request: request, generation: generation, response: response)
                request.challenge = challenge
                postLocked(.challenge(request, challenge, failures: request.rejectedCredentials))
                return nil
            case .retry(let delay):
                if let head = response.deferredHead { postHeadLocked(request, head) }
                // The attempt is counted when it starts (`retryDue`): a request cancelled during
                // the delay reports the attempts made.
                request.generation &+= 1
                stats.retried += 1
                return (delay, request.generation)
            case .complete:
                if let head = response.deferredHead { postHeadLocked(request, head) }
                completeLocked(request, response, stopTransfer: false)
                startStartableLocked()
                return nil
            }
        }
    }

    /// The engine's timer for a retry fired: counts the new attempt; false when the request is no
    /// longer waiting for it (cancelled, ...).
    func retryDue(_ request: Request, generation: UInt64) -> Bool {
        monitor.withLock {
            guard request.state == .running, request.generation == generation else { return false }
            request.attempts += 1
            return true
        }
    }

    /// A transfer could not even be set up: the request fails with this response.
    func attemptFailedToStart(_ request: Request, generation: UInt64, response: Response) {
        monitor.withLock {
            guard request.state == .running, request.generation == generation else { return }
            completeLocked(request, response, stopTransfer: false)
            startStartableLocked()
        }
    }

    // MARK: Streaming (body chunks; see Streaming.swift)

    /// Posts a piece of the streamed body of the current attempt; false when it is not current.
    /// `urgent`: the stream's undelivered bytes near the pause threshold, so the delivery is told
    /// now rather than at the end of the engine's batch (which would pause the transfer first).
    func postChunk(_ request: Request, generation: UInt64, _ chunk: StreamChunk, urgent: Bool) -> Bool {
        monitor.withLock {
            guard request.state == .running, request.generation == generation else { return false }
            postLocked(.chunk(request, chunk))
            if urgent, eventsOwed > 0 {
                eventsOwed = 0
                signalLocked()
            }
            return true
        }
    }

    /// Has the engine resume the transfer of `request`, paused until its chunks were delivered.
    /// Only while the request runs: a completed one has no transfer, and once every request of a
    /// closing queue completed, its engine stops.
    func resumeStream(_ request: Request) {
        monitor.withLock {
            if request.state == .running { engine.send(.resume(request)) }
        }
    }

    /// Posts the head of the current attempt's final response to the request and to those
    /// sharing its transfer that have a head callback; `make` runs only when one has.
    func postHead(_ request: Request, generation: UInt64, _ make: () -> Response) {
        monitor.withLock {
            guard request.state == .running, request.generation == generation,
                  (!request.detached && request.headCallback != nil) || request.followers.contains(where: { $0.headCallback != nil })
            else { return }
            postHeadLocked(request, make())
        }
    }

    private func postHeadLocked(_ request: Request, _ head: Response) {
        if !request.detached, request.headCallback != nil { postLocked(.head(request, head)) }
        for follower in request.followers where follower.headCallback != nil { postLocked(.head(follower, head)) }
    }

    func progress(_ request: Request, generation: UInt64, upload: Bool, done: Int64, total: Int64) {
        monitor.withLock {
            guard request.state == .running, request.generation == generation else { return }
            if !request.detached { postLocked(.progress(request, upload: upload, done: done, total: total)) }
            for follower in request.followers { postLocked(.progress(follower, upload: upload, done: done, total: total)) }
        }
    }

    func answer(_ challenge: Challenge, _ answer: AuthAnswer) -> rq_result {
        guard let request = challenge.request else { return RQ_ERR_INVALID_HANDLE }
        return monitor.withLock {
            guard request.challenge === challenge, request.state == .running,
                  request.generation == challenge.generation else { return RQ_ERR_INVALID_HANDLE }
            challenge.invalidate()
            request.challenge = nil
            switch answer {
            case .credential(let user, let password):
                let header = challenge.response.headerValue("WWW-Authenticate")?.lowercased() ?? ""
                let scheme: AuthScheme = header.hasPrefix("basic") ? .basic : header.hasPrefix("digest") ? .digest : .any
                request.authCredentials = (user, password, scheme)
                request.transferOptions = nil
                request.generation &+= 1
                engine.send(.start(request, request.generation))
            case .continueWithout:
                if let head = challenge.response.deferredHead { postHeadLocked(request, head) }
                completeLocked(request, challenge.response, stopTransfer: false)
                startStartableLocked()
            case .cancel:
                completeLocked(request, .cancelled(url: request.url.string, attempts: request.attempts,
                                                   message: "cancelled by the authentication handler"),
                               stopTransfer: false)
                startStartableLocked()
            }
            return RQ_OK
        }
    }

    // MARK: Internals (monitor held)

    private func setState(_ request: Request, _ state: RequestState) {
        request.lock.withLock {
            request.state = state
            if state == .completed { request.queue = nil }
        }
    }

    private func startStartableLocked() {
        let now = Clock.now()
        scheduler.takeStartable(now: now) { id in
            guard let request = active[id] else { return }
            setState(request, .running)
            for follower in request.followers { setState(follower, .running) }
            request.generation &+= 1
            request.attempts = 1
            stats.started += 1
            engine.send(.start(request, request.generation))
        }
        // Requests held back by the rate limit: have the engine come back when a token is there.
        if scheduler.rateLimit != nil, let next = scheduler.nextStartTime(now: now), next != scheduledWake {
            scheduledWake = next
            engine.send(.wake(at: next))
        }
    }

    /// The engine's wake-up for the rate limit.
    func startDue() {
        monitor.withLock {
            scheduledWake = nil
            startStartableLocked()
        }
    }

    /// Produces the one completion of a request; the caller then starts what can start.
    private func completeLocked(_ request: Request, _ response: Response, stopTransfer: Bool) {
        let id = request.id
        guard request.state != .completed else { return }
        let placement = scheduler.remove(id)
        active[id] = nil
        setState(request, .completed)
        request.generation &+= 1
        if let challenge = request.challenge {
            challenge.invalidate()
            request.challenge = nil
        }
        // Only a running request has a transfer or a retry timer in the engine.
        if stopTransfer, placement == .running { engine.send(.abort(request)) }
        if request.detached {
            request.lock.withLock { request.detached = false }
            detachedCount -= 1
            request.releaseHandleIfUnused()
        } else {
            tally(response)
            postLocked(.completion(request, response))
        }
        // Coalesced requests get the same result.
        for follower in request.followers {
            followers[follower.id] = nil
            follower.leader = nil
            setState(follower, .completed)
            tally(response)
            postLocked(.completion(follower, response))
        }
        request.followers = []
    }

    private func tally(_ response: Response) {
        switch response.outcome {
        case .ok: stats.succeeded += 1
        case .cancelled: stats.cancelled += 1
        default: stats.failed += 1
        }
        stats.bytesDown &+= UInt64(max(0, response.downloaded))
        stats.bytesUp &+= UInt64(max(0, response.uploaded))
    }

    private func postLocked(_ event: Event) {
        undelivered += 1
        pending.pushBack(event)
        if engine.isCurrentThread {
            if eventsOwed == 0 { eventsOwedSince = Clock.now() }
            eventsOwed += 1
            if eventsOwed < 64 { return }
            eventsOwed = 0
        }
        signalLocked()
    }

    /// Engine thread: whether the events it owes the delivery should be signalled now anyway.
    func eventsOwedAreDue(now: Double) -> Bool { now - eventsOwedSince >= 0.001 }

    /// Engine thread: tells the delivery about the events it posted.
    func signalOwedEvents() {
        guard eventsOwed > 0 else { return }
        eventsOwed = 0
        monitor.withLock { signalLocked() }
    }

    /// Wakes whoever runs the pending events: the delivery thread, or the host through the fd.
    private func signalLocked() {
        if threaded {
            if deliveryWaiting { deliveryWake.signal() }
        } else if !eventFDSignalled, !pending.isEmpty {
            eventFDSignalled = true
            var one: UInt64 = 1
            _ = write(eventFD, &one, 8)
        }
    }

    /// Threaded mode: the delivery thread runs the pending events in order, in batches, until the
    /// queue is freed.
    private func deliveryLoop() {
        var batch = RingDeque<Event>()
        monitor.lock()
        while true {
            while pending.isEmpty, !deliveryStopping {
                deliveryWaiting = true
                deliveryWake.wait()
                deliveryWaiting = false
            }
            if pending.isEmpty { break }
            swap(&batch, &pending)
            monitor.unlock()
            let count = batch.count
            engine.deferringWakeUps {
                while let event = batch.popFront() {
                    run(event)
                    engine.flushDeferredWakeIfDue()
                }
            }
            monitor.lock()
            delivered(count)
        }
        monitor.unlock()
    }

    /// `count` events finished running (monitor held). Wakes the waiters of the monitor (`waitIdle`,
    /// `close`) only when what they wait for may have come: the queue idle, or everything of a closing
    /// queue delivered. (Waking them after every batch cost a refill-shaped client several futex
    /// calls per request.)
    private func delivered(_ count: Int) {
        undelivered -= count
        if undelivered == 0, closed || scheduler.count == 0 { monitor.broadcast() }
    }

    // MARK: Delivery

    private func run(_ event: Event) {
        let previous = CallbackContext.currentQueue
        CallbackContext.currentQueue = handle
        switch event {
        case let .progress(request, upload, done, total):
            if !request.completionDelivered, let fn = upload ? request.uploadProgress : request.downloadProgress {
                if upload { request.deliveredUpload = (done, total) } else { request.deliveredDownload = (done, total) }
                fn(request.context, request.pointer, progressValue(done: done, total: total), done, total)
            }
        case let .challenge(request, challenge, failures):
            if !request.completionDelivered, let fn = request.authHandler,
               HandleTable.shared.lookup(challenge.pointer, kind: .challenge, as: Challenge.self) != nil {
                fn(request.context, request.pointer, challenge.pointer, UInt32(clamping: failures),
                   challenge.response.pointer)
            }
        case let .completion(request, response):
            deliverCompletion(request, response)
        case let .chunk(request, chunk):
            deliverChunk(request, chunk)
        case let .head(request, head):
            if !request.completionDelivered, let fn = request.headCallback {
                fn(request.context, request.pointer, head.pointer)
            }
        }
        CallbackContext.currentQueue = previous
        // Before the count drops (`delivered`): whoever waits for it (rq_queue_free, wait_idle)
        // then finds the request finished.
        if case let .completion(request, _) = event {
            request.lock.withLock { request.finished = true }
            request.releaseHandleIfUnused()
        }
    }

    private func deliverCompletion(_ request: Request, _ response: Response) {
        if let fn = request.downloadProgress {
            // A cancelled request's response has no transfer figures: its final call repeats the
            // last one, so that `done` does not go back.
            let (done, total) = response.outcome == .cancelled ? request.deliveredDownload
                : (response.downloadDone, response.outcome == .ok ? response.downloadDone : response.downloadTotal)
            fn(request.context, request.pointer, progressValue(done: done, total: total), done, total)
        }
        if let fn = request.uploadProgress, request.hasBody {
            let (done, total) = response.outcome == .cancelled ? request.deliveredUpload
                : (response.uploaded, response.uploadTotal)
            fn(request.context, request.pointer, progressValue(done: done, total: total), done, total)
        }
        request.completionDelivered = true
        if let fn = request.completion {
            fn(request.context, request.pointer, response.pointer)
        }
        if let free = request.contextFree { free(request.context) }
    }

    /// Dispatch mode: runs up to `limit` pending events (0 = those pending now).
    func dispatch(limit: Int) -> Int {
        dispatchLock.lock()
        defer { dispatchLock.unlock() }
        let count = limit > 0 ? limit : monitor.withLock { pending.count }
        var ran = 0, drained = false
        engine.deferringWakeUps {
            while ran < count {
                let next: Event? = monitor.withLock {
                    if ran > 0 { delivered(1) }
                    let event = pending.popFront()
                    if pending.isEmpty, eventFDSignalled {
                        eventFDSignalled = false
                        var value: UInt64 = 0
                        _ = read(eventFD, &value, 8)
                    }
                    return event
                }
                guard let event = next else {
                    drained = true  // the last event's delivered(1) is done
                    return
                }
                run(event)
                ran += 1
                engine.flushDeferredWakeIfDue()
            }
        }
        if ran > 0, !drained { monitor.withLock { delivered(1) } }
        return ran
    }

    private var isIdleLocked: Bool { scheduler.count == 0 && undelivered == 0 }

    /// Waits until nothing runs, waits or remains to be delivered; `deadline` is monotonic.
    func waitIdle(deadline: Double?) -> rq_result {
        if threaded {
            return monitor.withLock {
                while !isIdleLocked {
                    if !monitor.wait(until: deadline), !isIdleLocked { return RQ_ERR_TIMED_OUT }
                }
                return RQ_OK
            }
        }
        while true {
            _ = dispatch(limit: 0)
            if monitor.withLock({ isIdleLocked }) { return RQ_OK }
            var waitMs: Int32 = 100
            if let deadline {
                let remaining = deadline - Clock.now()
                if remaining <= 0 { return RQ_ERR_TIMED_OUT }
                waitMs = Int32(min(100, max(1, remaining * 1000)))
            }
            var fd = pollfd(fd: eventFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&fd, 1, waitMs)
        }
    }

    /// Frees the queue: cancels everything, stops the engine, delivers what is left. Only the first
    /// caller does it and gets RQ_OK; one that comes while it is under way waits for its end, then
    /// gets RQ_ERR_INVALID_HANDLE, as any call on a freed queue.
    func close() -> rq_result {
        let first: Bool = monitor.withLock {
            guard !closed else {
                while !freed { _ = monitor.wait(until: nil) }
                return false
            }
            closed = true
            return true
        }
        guard first else { return RQ_ERR_INVALID_HANDLE }
        cancelAll(message: "the queue was freed")
        engine.shutdown()
        if threaded {
            monitor.withLock {
                while undelivered > 0 { _ = monitor.wait(until: nil) }
                deliveryStopping = true
                deliveryWake.signal()
            }
            if let deliveryThread { pthread_join(deliveryThread, nil) }
        } else {
            while monitor.withLock({ undelivered > 0 }) { _ = dispatch(limit: 0) }
            Glibc.close(eventFD)
        }
        HandleTable.shared.remove(handle)
        monitor.withLock {
            freed = true
            monitor.broadcast()
        }
        return RQ_OK
    }
}

extension Queue {
    /// `rq_queue_free` of an inherited queue, in a child process: forgets the queue without its
    /// locks or threads (see ForkGuard). Closes the child's copy of the dispatch descriptor; the
    /// parent's connections are left alone (closing them here would end the parent's TLS
    /// sessions). False when another thread of the child freed it first.
    func abandonInChild() -> Bool {
        guard ForkGuard.abandon(self) else { return false }
        HandleTable.shared.remove(handle)
        if eventFD >= 0 { Glibc.close(eventFD) }
        return true
    }
}

/// done / total within [0, 1], or RQ_PROGRESS_INDETERMINATE when the total is unknown.
func progressValue(done: Int64, total: Int64) -> Double {
    if total < 0 { return -1 }
    if total == 0 { return 1 }
    return min(1, max(0, Double(done) / Double(total)))
}
