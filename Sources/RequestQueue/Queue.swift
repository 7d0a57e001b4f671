import CCurl
import CRequestQueueAPI
import Glibc
import RequestQueueCore
import Synchronization

/// A queue at run time: the requests' lifecycle (`QueueState` in Core) under one monitor, an
/// engine thread running the transfers on libcurl, and the delivery of callbacks (threaded,
/// host-dispatched, or inline on the engine thread).
///
/// Every change goes the same way: take the monitor, call a mutation of `state`, queue the events
/// it returns (`applyLocked`), unlock, then send the engine its commands (`send`). Queue+Engine.swift
/// holds that step and the engine's reports, Queue+Delivery.swift the events and who runs them,
/// Queue+Close.swift `rq_queue_free`; this file the settings, adding, cancelling and answering.
// @unchecked Sendable: its state under `monitor`, but `eventsOwed`, `eventsOwedSince` and
// `inlineBatch`, used by the engine thread only; `engine`, `deliveryThread` and `handle` are set in
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

    enum AuthAnswer {
        case credential(user: CString, password: CString)
        case continueWithout
        case cancel
    }

    /// Who runs the callbacks (`rq_delivery`).
    enum Delivery {
        /// The queue's delivery thread.
        case threaded
        /// The host, in `rq_queue_dispatch`, woken through `eventFD`.
        case dispatch
        /// The engine thread itself, in its loop (`runInline`).
        case inline
    }

    let kind: Kind
    let delivery: Delivery
    var threaded: Bool { delivery == .threaded }
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
    /// The requests' lifecycle: scheduling, attempts, coalescing, counters, closed.
    let state = QueueState<DuplicateKey, Request>(clock: Clock.now)
    /// Set when `rq_queue_free` has ended.
    var freed = false
    /// Events posted and not yet finished running.
    var undelivered = 0
    /// Events waiting to run: for `dispatch` in dispatch mode (the descriptor is readable while
    /// there are), for the delivery thread in threaded mode.
    var pending = RingDeque<Event>()
    /// Engine thread only: events it posted without telling the delivery yet, and since when.
    /// It tells it once per batch (`signalOwedEvents`, `Engine.run`: "Batching" in the header).
    var eventsOwed = 0
    var eventsOwedSince = 0.0
    let eventFD: Int32
    /// Dispatch mode: whether `eventFD` was written and not read since. The engine writes it after
    /// releasing the monitor (`signalOwedEvents`), holding `eventFDLock` from before the release to
    /// the end of the write; a reader takes that lock for its read (`endEventFDReset`), so that
    /// it never reads before a write it has seen decided (which would leave the descriptor
    /// readable with nothing pending), and skips the read when a write was decided after the
    /// reset (`eventFDWrites`, counted under the monitor), which it must not take. A reader that
    /// finds, by what it read, every write it has seen decided already made does not take the
    /// lock (`endEventFDReset`).
    var eventFDSignalled = false
    let eventFDLock = Lock()
    let eventFDWrites = Atomic<Int>(0)
    /// Under `dispatchLock`: how many of the writes counted in `eventFDWrites` the reads of
    /// `endEventFDReset` have taken, and how many writes of its own (`endEventFDReset`) the
    /// descriptor holds beside them.
    var eventFDWritesTaken = 0
    var eventFDOwnWrites = 0
    let dispatchLock = Monitor()
    /// Threaded mode: the thread that runs the callbacks, waiting on `deliveryWake` when idle.
    /// It sets `deliveryWaiting` before it waits; whoever clears it owes the wait its one post.
    var deliveryThread: pthread_t?
    let deliveryWake = Wakeup()
    var deliveryWaiting = false
    var deliveryStopping = false
    /// Inline mode: whether a thread other than the engine posted events and sent the engine its
    /// `.deliver` since the engine last took the pending events (one command serves them all).
    /// Written under the monitor; atomic for the engine's look without it
    /// (`inlineEventsMayBePending`).
    let inlineDeliverySent = Atomic<Bool>(false)
    /// Inline mode, engine thread only: the batch being run, kept with its storage between batches
    /// (it trades places with `pending`: no allocation per batch).
    var inlineBatch = RingDeque<Event>()
    /// Threaded and dispatch modes: the responses whose callbacks ran, handed back to the engine
    /// thread that made them, to be freed there (Queue+Delivery.swift).
    let spent = SpentResponses()
    /// Set at the end of `init` (the engine needs the finished queue); never nil afterwards.
    private(set) var engine: Engine!

    init?(delivery: Delivery, kind: Kind) {
        self.kind = kind
        self.delivery = delivery
        eventFD = delivery == .dispatch ? ccurl_eventfd() : -1
        if delivery == .dispatch, eventFD < 0 { return nil }
        if kind == .standalone {
            _ = state.setMaxConcurrent(0)
            state.setDuplicates(.allow)
        }
        guard let engine = Engine(queue: self) else {
            if eventFD >= 0 { Glibc.close(eventFD) }
            return nil
        }
        self.engine = engine
        if delivery == .threaded {
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
        perform { $0.setMaxConcurrent(value) }
    }

    var maxConcurrent: Int { monitor.withLock { state.scheduler.maxConcurrent } }

    var order: QueueOrder {
        get { monitor.withLock { state.scheduler.order } }
        set { monitor.withLock { state.setOrder(newValue) } }
    }

    var duplicates: Duplicates {
        get { monitor.withLock { state.duplicates } }
        set { monitor.withLock { state.setDuplicates(newValue) } }
    }

    var maxPerHost: Int {
        get { monitor.withLock { state.scheduler.maxPerHost } }
        set { perform { $0.setMaxPerHost(newValue, origin: \.origin) } }
    }

    var rateLimit: RateLimit? {
        get { monitor.withLock { state.scheduler.rateLimit } }
        set { perform { $0.setRateLimit(newValue, origin: \.origin) } }
    }

    var statistics: QueueStats { monitor.withLock { state.stats } }

    var context: UnsafeMutableRawPointer? {
        get { monitor.withLock { callerContext } }
        set { monitor.withLock { callerContext = newValue } }
    }

    func suspend() { monitor.withLock { state.suspend() } }

    func resume() { perform { $0.resume() } }

    var isSuspended: Bool { monitor.withLock { state.scheduler.isSuspended } }
    var count: Int { monitor.withLock { state.count } }

    /// Running requests in start order, then waiting ones in start order, at one instant; each
    /// coalesced request right after the one whose transfer it shares. With a tag, only those.
    func snapshot(tag: CString? = nil) -> [Request] {
        let list = monitor.withLock { state.snapshot() }
        return tag.map { tag in list.filter { $0.tag == tag } } ?? list
    }

    func setPriority(_ request: Request, _ priority: Int) -> rq_result {
        monitor.lock()
        guard request.queue === self else {
            monitor.unlock()
            return RQ_ERR_NOT_ACTIVE
        }
        request.lock.withLock { request.priority = priority }
        let actions = state.setPriority(request.id, priority)
        applyLocked(actions)
        monitor.unlock()
        send(actions)
        return RQ_OK
    }

    // MARK: Adding and cancelling

    /// Takes a new request. Once accepted, it takes `defaults` (the queue's, from `transport`) and
    /// the queue's cookie jar if it uses cookies (`QueueTransport.add`).
    func add(_ request: Request, defaults: RequestDefaults? = nil, transport: QueueTransport? = nil) -> rq_result {
        let now = Clock.now()
        monitor.lock()
        // Under the monitor and the request's lock at once: a request freed by its caller, or
        // added elsewhere, or a queue being freed, is never half-accepted.
        let result: rq_result = request.lock.withLock {
            guard request.callerHolds else { return RQ_ERR_INVALID_HANDLE }
            guard request.state == .new else { return RQ_ERR_ALREADY_ADDED }
            guard !state.isClosed else { return RQ_ERR_QUEUE_CLOSED }
            if let transport, defaults != nil || request.usesCookies { request.inherit(defaults, from: transport) }
            request.state = .waiting
            request.queue = self
            request.acceptedAt = now
            return RQ_OK
        }
        guard result == RQ_OK else {
            monitor.unlock()
            return result
        }
        let traits = RequestTraits(method: request.method, priority: request.priority,
                                   hasAuthHandler: request.authHandler != nil, wantsHead: request.headCallback != nil,
                                   streamsBody: request.streamsBody)
        let actions = state.add(request.id, request, traits: traits, key: { request.duplicateKey },
                                origin: { request.origin })
        // Most adds to a busy queue only wait: nothing to apply or send.
        guard !actions.isEmpty else {
            // A coalesced request runs when the one it shares the transfer of runs.
            if state.duplicates == .coalesce, state.phase(of: request.id) ?? .waiting != .waiting {
                setState(request, .running)
            }
            monitor.unlock()
            return RQ_OK
        }
        applyLocked(actions)
        monitor.unlock()
        send(actions)
        return RQ_OK
    }

    /// Cancels `request`, of this queue (`rq_cancel`'s usual way, which found the queue in the
    /// request); the next cancel looks in this queue first.
    func cancel(_ request: Request) -> rq_result {
        guard cancel(request.id, ifLive: nil) else { return RQ_ERR_NOT_ACTIVE }
        CancelPrefetch.remember(self)
        return RQ_OK
    }

    /// `rq_cancel` without touching the request first: true when the request of `pointer` was in
    /// the queue of the last cancel, and is cancelled; false when that is not so, and the caller
    /// goes the usual way (`cancel(_:)`, which tells why a request cannot be cancelled).
    /// A request's id is its handle's slot; the handle is checked under the monitor, where a
    /// request that the state holds cannot leave it (and its handle is kept while it is in a
    /// queue), so the request of the live handle and the one of the state's id are the same.
    /// Its line is only prefetched here, to be written when it completes: with a million waiting
    /// requests, the lookup's retain of the request, waiting for a line in no cache after the
    /// handle's slot, was half of a cancel's time (bench/README.md, "Cancel without the request's
    /// reference count").
    static func cancel(handle pointer: OpaquePointer?) -> Bool {
        guard let q = CancelPrefetch.queue, !q.inherited else { return false }
        let value = UInt(bitPattern: pointer)
        return q.cancel(UInt64(HandleTable.slot(of: value)), ifLive: value)
    }

    /// Cancels the request of `id`; with `handle`, only while that handle is a live request's.
    private func cancel(_ id: UInt64, ifLive handle: UInt?) -> Bool {
        monitor.lock()
        // Where the state is now, for the hint of the next cancel, and the loads of this one if the
        // hint was stale (`CancelPrefetch`).
        let layout = state.layout
        if layout != CancelPrefetch.layout { CancelPrefetch.start(id, layout, remember: true) }
        if let handle {
            let address = HandleTable.shared.liveAddress(handle, kind: .request)
            guard address != 0 else {
                monitor.unlock()
                return false
            }
            ccurl_prefetch(UnsafeRawPointer(bitPattern: address))
        }
        guard let actions = state.cancel(id) else {
            monitor.unlock()
            return false
        }
        applyLocked(actions)
        monitor.unlock()
        send(actions)
        return true
    }

    /// Cancels every request, or those with `tag`; returns how many completions that produced.
    @discardableResult
    func cancelAll(tag: CString? = nil, reason: CancelReason = .caller) -> Int {
        monitor.lock()
        let (count, actions) = tag.map { tag in
            state.cancel(state.snapshot().filter { $0.tag == tag }.map(\.id), reason: reason)
        } ?? state.cancelAll(reason: reason)
        applyLocked(actions)
        monitor.unlock()
        send(actions)
        return count
    }

    /// The authentication handler's answer to a challenge of one of this queue's requests.
    func answer(_ challenge: Challenge, _ answer: AuthAnswer) -> rq_result {
        guard let request = challenge.request else { return RQ_ERR_INVALID_HANDLE }
        monitor.lock()
        guard request.challenge === challenge else {
            monitor.unlock()
            return RQ_ERR_INVALID_HANDLE
        }
        let decided: ChallengeAnswer
        switch answer {
        case .credential: decided = .credential
        case .continueWithout: decided = .continueWithout(AttemptReport(challenge.response))
        case .cancel: decided = .cancel
        }
        guard let actions = state.answer(request.id, generation: challenge.generation, decided) else {
            monitor.unlock()
            return RQ_ERR_INVALID_HANDLE
        }
        challenge.invalidate()
        request.challenge = nil
        if case .credential(let user, let password) = answer {
            let header = challenge.response.headerValue("WWW-Authenticate")?.lowercased() ?? ""
            let scheme: AuthScheme = header.hasPrefix("basic") ? .basic : header.hasPrefix("digest") ? .digest : .any
            request.authCredentials = (user, password, scheme)
            request.transferOptions = nil
        }
        applyLocked(actions, reported: challenge.response)
        monitor.unlock()
        send(actions)
        return RQ_OK
    }
}

/// The memory a cancel reads first, loaded with prefetches before the cancel needs it. With a
/// million waiting requests none of it is in a cache, and a cancel found each piece only after the
/// last: the handle's slot, then the request, then (under the queue's monitor) its record and its
/// scheduler entry (bench/README.md, "The queue at scale: prefetching"). The record and the entry
/// are found from the request's id alone, which the handle's value holds, in the queue state's
/// layout remembered by the last cancel (any queue's: a hint, plain numbers that are never read
/// through, harmless when stale), and the slot from the table's address, so that they load while
/// the queue is looked up and locked (`Queue.cancel(handle:)`).
enum CancelPrefetch {
    private static let records = Atomic<UInt>(0)
    private static let entries = Atomic<UInt>(0)
    /// The handle of the queue of the last cancel that went the usual way, whose state the next
    /// cancel looks in first (`Queue.cancel(handle:)`).
    private static let queueHandle = Atomic<UInt>(0)

    static var queue: Queue? {
        HandleTable.shared.lookup(HandleTable.pointer(queueHandle.load(ordering: .relaxed)), kind: .queue, as: Queue.self)
    }

    static func remember(_ queue: Queue) {
        if queueHandle.load(ordering: .relaxed) != queue.handle { queueHandle.store(queue.handle, ordering: .relaxed) }
    }

    static var layout: QueueState<DuplicateKey, Request>.Layout {
        .init(records: records.load(ordering: .relaxed), entries: entries.load(ordering: .relaxed))
    }

    /// Starts loading what a cancel of `id` reads in `layout`; with `remember`, keeps it for the
    /// next cancels.
    static func start(_ id: UInt64, _ layout: QueueState<DuplicateKey, Request>.Layout, remember: Bool = false) {
        QueueState<DuplicateKey, Request>.addresses(of: id, in: layout) { address in
            ccurl_prefetch(UnsafeRawPointer(bitPattern: address))
        }
        guard remember else { return }
        records.store(layout.records, ordering: .relaxed)
        entries.store(layout.entries, ordering: .relaxed)
    }

    /// Before the handle of a request to cancel is looked up: its id is the slot the handle holds.
    /// The slot too: `Queue.cancel(handle:)` reads it under the monitor, after the queue's lookup.
    static func start(handle pointer: OpaquePointer?) {
        let value = UInt(bitPattern: pointer)
        HandleTable.shared.prefetchSlot(value)
        start(UInt64(HandleTable.slot(of: value)), layout)
    }
}
