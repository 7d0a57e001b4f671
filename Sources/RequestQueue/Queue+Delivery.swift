import CCurl
import CRequestQueueAPI
import Glibc
import RequestQueueCore

// Delivery: the events a queue posts (progress, heads, body chunks, challenges, completions), run in
// order by the delivery thread (threaded mode), by `rq_queue_dispatch` (dispatch mode), or by the
// engine thread itself in its loop (inline mode); the engine's batching of its posts; waiting until
// the queue is idle.

extension Queue {
    enum Event {
        case progress(Request, upload: Bool, done: Int64, total: Int64)
        case challenge(Request, Challenge, failures: Int)
        case completion(Request, Completion)
        /// A piece of a streamed body (Streaming.swift).
        case chunk(Request, StreamChunk)
        /// The head of an attempt's final response ("Response heads" in include/requestqueue.h).
        case head(Request, Response)
    }

    /// What a request completed with: the response of its last attempt, or a cancellation (by the
    /// caller, a duplicate, the authentication handler, the queue's free), whose `Response` the
    /// delivery makes right before the completion callback, and only for a request that has one.
    /// A cancel then allocates nothing: with a million completions waiting for `rq_queue_dispatch`,
    /// a response made at cancel time was 288 bytes of fresh heap per cancel (bench/README.md,
    /// "Cancellations make their response when delivered").
    enum Completion {
        case response(Response)
        case cancelled(CancelReason, attempts: UInt32)
    }

    /// Queues an event for delivery (monitor held). The engine thread tells the delivery once per
    /// batch (`signalOwedEvents`); any other thread wakes it now. In inline mode the engine thread
    /// runs its batch itself when it reaches the point of handing it over (the 64-event limit
    /// included: `eventsOwedAreDue`), never from here (it may be inside libcurl).
    func postLocked(_ event: consuming Event) {
        undelivered += 1
        pending.pushBack(event)
        if engine.isCurrentThread {
            if eventsOwed == 0 { eventsOwedSince = Clock.now() }
            eventsOwed += 1
            if eventsOwed < 64 || delivery == .inline { return }
            eventsOwed = 0
        }
        signalLocked()
    }

    /// Inline mode, engine thread: another thread posted events and sent `.deliver`: they are
    /// owed like the engine's own.
    func foreignEventsPosted() {
        if eventsOwed == 0 { eventsOwedSince = Clock.now() }
        eventsOwed += 1
    }

    /// Engine thread: whether the events it owes the delivery should be signalled now anyway.
    func eventsOwedAreDue(now: Double) -> Bool { now - eventsOwedSince >= 0.001 || eventsOwed >= 64 }

    /// Engine thread: tells the delivery about the events it posted (inline mode: runs every
    /// pending event, at shutdown too). The delivering thread is woken once the monitor is
    /// released: woken under it, it would often find the monitor still taken and block on it at
    /// once (two more futex calls per hand-over).
    ///
    /// With `onlyIfNothingWaits`, only when the scheduler has no request waiting to start (the
    /// engine calls it after each turn's completions): the queue then keeps K requests in flight
    /// only if the callbacks add the next ones (a refill-shaped client), whose adds would otherwise
    /// wait for the rest of the batch. With requests waiting, the queue refills itself (the engine
    /// starts the next one at each completion, the callbacks are not on the way), and the events
    /// ripen to the batch point, 64 events or 1 ms, while transfers run (`Engine.run`): false is
    /// returned then, true otherwise. A delivering thread already running a batch is not
    /// signalled: it takes the pending events when that batch ends (bench/README.md, "when the
    /// engine hands a refill client its completions").
    @discardableResult
    func signalOwedEvents(onlyIfNothingWaits: Bool = false) -> Bool {
        if delivery == .inline {
            eventsOwed = 0
            runInline()
            return true
        }
        guard eventsOwed > 0 else { return true }
        let wakeDelivery: Bool? = monitor.withLock {
            if onlyIfNothingWaits, state.waitingCount > 0 { return nil }
            if threaded {
                // (Nothing pending: the delivery thread took the events at the end of its batch.)
                guard deliveryWaiting, !pending.isEmpty else { return false }
                deliveryWaiting = false
                return true
            }
            guard !eventFDSignalled, !pending.isEmpty else { return false }
            eventFDSignalled = true
            eventFDWrites.wrappingAdd(1, ordering: .sequentiallyConsistent)
            eventFDLock.acquire()
            return true
        }
        guard let wakeDelivery else { return false }
        eventsOwed = 0
        engine.handedOver = true
        guard wakeDelivery else { return true }
        if threaded {
            deliveryWake.post()
        } else {
            var one: UInt64 = 1
            _ = write(eventFD, &one, 8)
            eventFDLock.release()
        }
        return true
    }

    /// Engine thread: how long, in whole milliseconds rounded up, until the events it owes are
    /// 1 ms old (`eventsOwedAreDue`): the longest the engine may block while a batch ripens.
    func eventsOwedDueInMs(now: Double) -> Double { max(1, ((eventsOwedSince + 0.001 - now) * 1000).rounded(.up)) }

    /// Wakes whoever runs the pending events: the delivery thread, the host through the fd, or
    /// (inline mode, for a post from another thread) the engine through its inbox.
    func signalLocked() {
        if threaded {
            if deliveryWaiting {
                deliveryWaiting = false
                deliveryWake.post()
            }
        } else if delivery == .inline {
            // The engine thread's own posts wait for its hand-over point (`postLocked`).
            guard !inlineDeliverySent.load(ordering: .relaxed), !engine.isCurrentThread else { return }
            inlineDeliverySent.store(true, ordering: .relaxed)
            engine.send(.deliver)
        } else if !eventFDSignalled, !pending.isEmpty {
            eventFDSignalled = true
            eventFDWrites.wrappingAdd(1, ordering: .sequentiallyConsistent)
            var one: UInt64 = 1
            eventFDLock.withLock { _ = write(eventFD, &one, 8) }
        }
    }

    /// Threaded mode: the delivery thread runs the pending events in order, in batches, until the
    /// queue is freed.
    func deliveryLoop() {
        ccurl_name_thread("rq-delivery")
        var batch = RingDeque<Event>()
        monitor.lock()
        while true {
            while pending.isEmpty, !deliveryStopping {
                deliveryWaiting = true
                monitor.unlock()
                deliveryWake.wait()
                monitor.lock()
            }
            if pending.isEmpty { break }
            swap(&batch, &pending)
            monitor.unlock()
            let count = batch.count
            // This thread runs only this queue's callbacks: the mark is set per batch (the handle
            // is known once the first event is posted), not per event.
            CallbackContext.currentQueue = handle
            engine.deferringWakeUps {
                while let event = batch.popFront() {
                    run(event)
                    engine.flushDeferredWakeIfDue()
                }
            }
            engine.releaseHere(&spentResponses)
            monitor.lock()
            delivered(count)
        }
        monitor.unlock()
    }

    /// Inline mode, engine thread: runs the pending events in order, in batches, until none is
    /// left (the callbacks' own posts, a cancel's completion say, run in the next batch). Their
    /// sends to this engine wait in its inbox without waking it: it takes them when it goes on.
    /// Called only where the engine holds no lock and is not inside libcurl, or inside libcurl's
    /// write callback before a streamed piece (Streaming+Inline.swift), where libcurl allows no call
    /// on its handles: a callback reaches the multi handle only through the inbox. (The thread
    /// needs no `CallbackContext` mark: `isCallingBack` knows this queue's engine thread.)
    func runInline() {
        monitor.lock()
        guard !pending.isEmpty else {
            monitor.unlock()
            return
        }
        var batch = RingDeque<Event>()
        swap(&batch, &inlineBatch)
        while !pending.isEmpty {
            swap(&batch, &pending)
            inlineDeliverySent.store(false, ordering: .relaxed)
            monitor.unlock()
            let count = batch.count
            while let event = batch.popFront() { run(event) }
            monitor.lock()
            delivered(count)
        }
        monitor.unlock()
        swap(&batch, &inlineBatch)
    }

    /// Inline mode, engine thread: whether events may be pending (its own posts, or another
    /// thread's since the engine last took them): a look without the monitor, for the streamed
    /// pieces (a post racing with it is a post made at the same time, delivered after the piece).
    var inlineEventsMayBePending: Bool { eventsOwed > 0 || inlineDeliverySent.load(ordering: .relaxed) }

    /// `count` events finished running (monitor held). Wakes the waiters of the monitor (`waitIdle`,
    /// `close`) only when what they wait for may have come: the queue idle, or everything of a closing
    /// queue delivered. (Waking them after every batch cost a refill-shaped client several futex
    /// calls per request.)
    private func delivered(_ count: Int) {
        undelivered -= count
        if undelivered == 0, state.isClosed || state.scheduledCount == 0 { monitor.broadcast() }
    }

    // MARK: Delivery

    /// Runs one event's callbacks; the caller has marked the thread as running this queue's
    /// callbacks (`CallbackContext.currentQueue`).
    private func run(_ event: Event) {
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
        // Before the count drops (`delivered`): whoever waits for it (rq_queue_free, wait_idle)
        // then finds the request finished.
        if case let .completion(request, _) = event {
            request.releaseHandleIfUnused(finishing: true)
        }
    }

    private func deliverCompletion(_ request: Request, _ completion: Completion) {
        // A cancellation (or a cancelled response) has no transfer figures: its final progress
        // calls repeat the last ones, so that `done` does not go back.
        let made: Response?
        switch completion {
        case let .response(response): made = response.outcome == .cancelled ? nil : response
        case .cancelled: made = nil
        }
        if let fn = request.downloadProgress {
            let (done, total) = made.map { ($0.downloadDone, $0.outcome == .ok ? $0.downloadDone : $0.downloadTotal) }
                ?? request.deliveredDownload
            fn(request.context, request.pointer, progressValue(done: done, total: total), done, total)
        }
        if let fn = request.uploadProgress, request.hasBody {
            let (done, total) = made.map { ($0.uploaded, $0.uploadTotal) } ?? request.deliveredUpload
            fn(request.context, request.pointer, progressValue(done: done, total: total), done, total)
        }
        request.completionDelivered = true
        if request.completion != nil || request.summaryCompletion != nil {
            let response: Response = switch completion {
            case let .response(response): response
            case let .cancelled(reason, attempts): .cancelled(request, attempts: Int(attempts), message: reason.message)
            }
            if let fn = request.completion {
                fn(request.context, request.pointer, response.pointer)
            } else if let fn = request.summaryCompletion {
                callSummaryCompletion(fn, request, response)
            }
        }
        if let free = request.contextFree { free(request.context) }
        // Released on the engine thread, which made it (`Engine.releaseHere`); one with a large
        // body is released here at once rather than held until the engine's next turn.
        if delivery != .inline, case let .response(response) = completion, response.bodyCount < 65_536 {
            spentResponses.append(response)
        }
    }

    /// Dispatch mode, at the end of a `dispatch` (monitor held): when nothing is pending and the
    /// descriptor was written, the count of writes decided so far, for `endEventFDReset`, which
    /// makes the descriptor unreadable after the monitor is released. Done after the callbacks
    /// rather than when the last event is taken: the host, woken by the engine's write, would
    /// find the engine still holding `eventFDLock`, and both would make futex calls.
    private func beginEventFDResetLocked() -> Int? {
        guard pending.isEmpty, eventFDSignalled else { return nil }
        eventFDSignalled = false
        return eventFDWrites.load(ordering: .sequentiallyConsistent)
    }

    /// Makes the descriptor unreadable once the `writes` decided before the reset are made, unless
    /// a write was decided since: events are pending again, and the descriptor must stay readable.
    ///
    /// An eventfd's read returns how many writes it took, so the reads count the writes they took
    /// (`eventFDWritesTaken`, less this function's own writes). When they have taken `writes`,
    /// none decided before is on its way: the host was woken by the last one, the common case, and
    /// no lock is taken. Otherwise one is (this thread came without being woken by it): its writer
    /// holds `eventFDLock` from its decision to the end of its write, so the read is made again
    /// under that lock. (Waiting for the lock in every case cost three futex calls a hand-over
    /// when the writer, woken host and all, had lost its core before releasing it.)
    ///
    /// A write decided after the first look may be made before a read, which takes it: the last
    /// look sees its decision (counted before the write is made) and writes the descriptor again,
    /// events being pending. A decision the last look does not see comes after it, and its write
    /// after the reads. The counts stay right either way: a write taken early is counted when
    /// taken, and the next reset finds its own writes taken.
    private func endEventFDReset(writes: Int) {
        guard eventFDWrites.load(ordering: .sequentiallyConsistent) == writes else { return }
        takeEventFDWrites()
        if eventFDWritesTaken != writes { eventFDLock.withLock { takeEventFDWrites() } }
        if eventFDWrites.load(ordering: .sequentiallyConsistent) != writes {
            var one: UInt64 = 1
            _ = write(eventFD, &one, 8)
            eventFDOwnWrites += 1
        }
    }

    /// Reads the descriptor (0 when it holds no write) and counts the writes the read took.
    /// The count read is the kernel's, but the host holds the descriptor and may write to it too:
    /// the counts wrap (`&+`, `&-`, as `eventFDWrites` does) and are only compared for equality, so
    /// a value of the host's cannot trap; it only sends later resets to the locked read.
    private func takeEventFDWrites() {
        var value: UInt64 = 0
        guard read(eventFD, &value, 8) == 8 else { return }
        eventFDWritesTaken &+= Int(truncatingIfNeeded: value) &- eventFDOwnWrites
        eventFDOwnWrites = 0
    }

    /// Dispatch mode: runs up to `limit` pending events (0 = those pending now).
    func dispatch(limit: Int) -> Int {
        dispatchLock.lock()
        defer { dispatchLock.unlock() }
        let count = limit > 0 ? limit : monitor.withLock { pending.count }
        var ran = 0
        let previous = CallbackContext.currentQueue
        CallbackContext.currentQueue = handle
        defer { CallbackContext.currentQueue = previous }
        engine.deferringWakeUps {
            var reset: Int?
            while true {
                let next: Event? = monitor.withLock {
                    if ran > 0 { delivered(1) }
                    let event = ran < count ? pending.popFront() : nil
                    if event == nil { reset = beginEventFDResetLocked() }
                    return event
                }
                guard let event = next else { break }
                run(event)
                ran += 1
                engine.flushDeferredWakeIfDue()
            }
            // Before the engine is woken for the adds of these callbacks: it would find this
            // thread in the read.
            if let writes = reset { endEventFDReset(writes: writes) }
        }
        engine.releaseHere(&spentResponses)
        return ran
    }

    /// Whether the calling thread runs this queue's callbacks, and so must not wait for the queue:
    /// inside one of them (`CallbackContext`), or on the thread that runs them (the engine thread
    /// of an inline queue, the delivery thread of a threaded one) even while it runs another
    /// queue's callbacks (a callback that dispatches a dispatch-mode queue, say).
    var isCallingBack: Bool {
        if CallbackContext.currentQueue == handle { return true }
        switch delivery {
        case .inline: return engine.isCurrentThread
        case .threaded: return deliveryThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        case .dispatch: return false
        }
    }

    private var isIdleLocked: Bool { state.scheduledCount == 0 && undelivered == 0 }

    /// Waits until nothing runs, waits or remains to be delivered; `deadline` is monotonic.
    func waitIdle(deadline: Double?) -> rq_result {
        if delivery != .dispatch {
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
}

/// done / total within [0, 1], or RQ_PROGRESS_INDETERMINATE when the total is unknown.
func progressValue(done: Int64, total: Int64) -> Double {
    if total < 0 { return -1 }
    if total == 0 { return 1 }
    return min(1, max(0, Double(done) / Double(total)))
}
