import Glibc
import RequestQueueCore

// The queue's side of the engine: the one step every change of the queue goes through (a mutation
// of `QueueState` under the monitor, its events queued there, its commands sent to the engine after
// unlocking), and what the engine reports.

/// What the engine reports about a request's attempts (`Queue.report`).
/// (An attempt that ended, the report of every request, goes through `Queue.attemptEnded`.)
enum EngineReport {
    /// A transfer could not even be set up: the request fails with this response.
    case failedToStart(Request, generation: UInt64, Response)
    /// A retry timer fired.
    case retryDue(Request, generation: UInt64)
    /// The wake-up asked for by the rate limit came.
    case startDue
}

extension EngineReport {
    /// The response of an attempt that ended or failed to start.
    var response: Response? {
        switch self {
        case let .failedToStart(_, _, response): response
        case .retryDue, .startDue: nil
        }
    }

    /// The request reported about (none for a rate-limit wake-up).
    var request: Request? {
        switch self {
        case let .failedToStart(request, _, _), let .retryDue(request, _): request
        case .startDue: nil
        }
    }
}

/// What the engine does next itself, on its own thread, besides the starts (other commands go
/// through its inbox).
enum EngineReply {
    case none
    /// Arm a retry timer: report `retryDue` of `generation` after `delay` seconds.
    case retry(delay: Double, generation: UInt64)
}

extension AttemptReport {
    /// What the decisions read of a response.
    init(_ response: Response) {
        let throttled = response.status == 429 || response.status == 503
        let retryAfter = throttled ? response.headerValue("Retry-After").flatMap {
            RetryPolicy.retryAfterSeconds($0, now: Double(time(nil)))
        } : nil
        self.init(outcome: response.outcome, status: Int(response.status), retryAfter: retryAfter,
                  hasDeferredHead: response.deferredHead != nil,
                  downloaded: response.downloaded, uploaded: response.uploaded)
    }
}

extension Queue {
    /// Runs a mutation of the state under the monitor, queues the events it returns there, and
    /// sends the engine its commands after unlocking.
    func perform(_ mutation: (QueueState<DuplicateKey, Request>) -> QueueActions<Request>) {
        monitor.lock()
        let actions = mutation(state)
        applyLocked(actions)
        monitor.unlock()
        send(actions)
    }

    /// Engine thread: the one entry point of the engine's reports about attempts; returns what the
    /// engine itself does next. The attempts the report starts are handed to `start`, after
    /// unlocking, rather than sent through the engine's inbox: the engine is the caller, and
    /// begins them without asking again whether they are current (a cancel meanwhile sends its
    /// abort, which the engine takes after this start).
    func report(_ report: EngineReport, start: (Request, UInt64) -> Void) -> EngineReply {
        monitor.lock()
        let actions = mutation(for: report)
        applyLocked(actions, reported: report.response)
        monitor.unlock()
        return engineSide(of: actions, start: start)
    }

    /// Engine thread: an attempt of `request` ended with `response` (as `report`, for the report of
    /// every request: the request and the response are read where they are, not copied into an
    /// `EngineReport` and out of it, a retain and a release each time).
    func attemptEnded(_ request: Request, generation: UInt64, _ response: Response,
                      start: (Request, UInt64) -> Void) -> EngineReply {
        monitor.lock()
        let actions = holds(request) ? ended(request, generation: generation, response) : QueueActions()
        applyLocked(actions, reported: response)
        monitor.unlock()
        return engineSide(of: actions, start: start)
    }

    /// What the engine does after a report: the starts it begins, a retry timer; other commands
    /// go through its inbox.
    @inline(__always)
    private func engineSide(of actions: QueueActions<Request>, start: (Request, UInt64) -> Void) -> EngineReply {
        var reply = EngineReply.none
        actions.forEach { action in
            switch action {
            case let .retry(_, generation, delay):
                reply = .retry(delay: delay, generation: generation)
            case let .start(request, generation, _):
                start(request, generation)
            default:
                send(action)
            }
        }
        return reply
    }

    /// The state's mutation for a report (monitor held).
    private func mutation(for report: EngineReport) -> QueueActions<Request> {
        if let request = report.request, !holds(request) { return QueueActions() }
        switch report {
        case let .failedToStart(request, generation, response):
            return state.failedToStart(request.id, generation: generation, AttemptReport(response))
        case let .retryDue(request, generation):
            return state.retryDue(request.id, generation: generation)
        case .startDue:
            return state.startDue()
        }
    }

    /// The state's mutation for an attempt that ended (monitor held, `request` held).
    private func ended(_ request: Request, generation: UInt64, _ response: Response) -> QueueActions<Request> {
        // The policy (two sets) is copied only when it can retry; the nil is a literal, which
        // nothing has to destroy.
        guard request.retryEnabled else {
            return state.attemptEnded(request.id, generation: generation, AttemptReport(response), retry: nil,
                                      method: request.method, random: 0)
        }
        return state.attemptEnded(request.id, generation: generation, AttemptReport(response),
                                  retry: request.retry, method: request.method,
                                  random: request.retry.jitter > 0 ? Double.random(in: 0..<1) : 0)
    }

    /// Whether `request` is the one the state knows by its id (monitor held). An id is a handle
    /// slot, reused once a request is freed: a late report of a freed request's attempt (its abort
    /// not yet seen by the engine) must not count for the request that took its slot, whose
    /// generation may well be the same number.
    private func holds(_ request: Request) -> Bool { state.ref(request.id) === request }

    /// Whether `generation` is still the current attempt of a running request.
    func isCurrent(_ request: Request, generation: UInt64) -> Bool {
        monitor.withLock { holds(request) && state.isCurrent(request.id, generation: generation) }
    }

    /// The one path of what a running attempt posts (progress, its head, body chunks): `event`
    /// makes the event of each request that gets the attempt's events (the request unless
    /// cancelled while others share its transfer, and those; with `wantsHead`, only those with a
    /// head callback). False when `generation` is not the current attempt.
    /// `urgent` (a streamed body's undelivered bytes near the pause threshold): the delivery is told
    /// now rather than at the end of the engine's batch, which would pause the transfer first.
    func post(_ request: Request, generation: UInt64, wantsHead: Bool = false, urgent: Bool = false,
              _ event: (Request) -> Event) -> Bool {
        monitor.withLock {
            let current = holds(request) && state.forEachRecipient(of: request.id, generation: generation, wantsHead: wantsHead) {
                postLocked(event($0))
            }
            if urgent, eventsOwed > 0 {
                eventsOwed = 0
                signalLocked()
            }
            return current
        }
    }

    /// Has the engine resume the transfer of `request`, paused until its chunks were delivered.
    /// Only while the request runs: a completed one has no transfer, and once every request of a
    /// closing queue completed, its engine stops. (A resume that arrives after the request ended
    /// finds no paused transfer: `Transfer.unpause` does nothing then.)
    func resumeStream(_ request: Request) {
        if monitor.withLock({ state.isStarted(request.id) }) { engine.send(.resume(request)) }
    }

    /// Acts on a mutation's actions with the monitor held: the requests' states as callers read
    /// them, and the events to deliver. `reported` is the response of the report that caused them
    /// (the one a `.reported` ending completes with). A cancellation posts no `Response`: the
    /// delivery makes it (`Completion.cancelled`).
    func applyLocked(_ actions: QueueActions<Request>, reported: Response? = nil) {
        // The completion of the last request, which a coalesced request's `sharing` one repeats.
        var last: Completion?
        func completion(_ ending: Ending, _ attempts: Int) -> Completion {
            switch ending {
            case .reported:
                // Every `.reported` ending comes from a mutation given a report.
                if let reported { return .response(reported) }
                return .cancelled(.caller, attempts: UInt32(clamping: attempts))
            case .cancelled(let reason):
                return .cancelled(reason, attempts: UInt32(clamping: attempts))
            }
        }
        actions.forEach { action in
            switch action {
            case let .start(request, _, attempt):
                request.attempts = attempt
                request.headWanted = state.headWanted(request.id)
                if request.state != .running {
                    setState(request, .running)
                    state.forEachFollower(of: request.id) { setState($0, .running) }
                }
            case let .complete(request, ending, attempts, sharing):
                let made = sharing ? last ?? completion(ending, attempts) : completion(ending, attempts)
                last = made
                finish(request)
                postLocked(.completion(request, made))
            case let .detach(request, ending, attempts):
                let made = completion(ending, attempts)
                last = made
                request.lock.withLock { request.detached = true }
                postLocked(.completion(request, made))
            case let .release(request, ending, attempts):
                last = completion(ending, attempts)
                finish(request)
                request.lock.withLock { request.detached = false }
                request.releaseHandleIfUnused()
            case let .head(request):
                if let head = reported?.deferredHead { postLocked(.head(request, head)) }
            case let .challenge(request, generation, failures):
                guard let reported else { return }
                let challenge = Challenge(request: request, generation: generation, response: reported)
                request.challenge = challenge
                postLocked(.challenge(request, challenge, failures: failures))
            case .abort, .retry, .wake:
                return
            }
        }
    }

    /// Sends the engine the commands among `actions`, with the monitor not held. (The engine's
    /// reports go through `report`, which keeps a retry's timer and the starts on the engine thread.)
    func send(_ actions: QueueActions<Request>) {
        actions.forEach { send($0) }
    }

    private func send(_ action: QueueAction<Request>) {
        switch action {
        case let .start(request, generation, _): engine.send(.start(request, generation))
        case let .abort(request): engine.send(.abort(request))
        case let .wake(at): engine.send(.wake(at: at))
        default: break
        }
    }

    /// The request has completed (monitor held): callers see it so; its challenge, if any, is void.
    private func finish(_ request: Request) {
        setState(request, .completed)
        if let challenge = request.challenge {
            challenge.invalidate()
            request.challenge = nil
        }
    }

    func setState(_ request: Request, _ state: RequestState) {
        request.lock.withLock {
            request.state = state
            if state == .completed { request.queue = nil }
        }
    }
}

extension CancelReason {
    /// The message of the cancelled response.
    var message: String {
        switch self {
        case .caller: "the request was cancelled"
        case .duplicate: "cancelled by an equal request added later (to send both, allow duplicates on the queue)"
        case .authHandler: "cancelled by the authentication handler"
        case .queueFreed: "the queue was freed"
        }
    }
}
