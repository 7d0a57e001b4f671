import CRequestQueueAPI
import Glibc

// Closing: `rq_queue_free` (cancel everything, stop the engine, deliver what is left: the engine
// itself in inline mode, before it stops), and its counterpart in a forked child.

extension Queue {
    /// Frees the queue: cancels everything, stops the engine, delivers what is left. Only the first
    /// caller does it and gets RQ_OK; one that comes while it is under way waits for its end, then
    /// gets RQ_ERR_INVALID_HANDLE, as any call on a freed queue.
    func close() -> rq_result {
        let first: Bool = monitor.withLock {
            guard state.close() else {
                while !freed { _ = monitor.wait(until: nil) }
                return false
            }
            return true
        }
        guard first else { return RQ_ERR_INVALID_HANDLE }
        cancelAll(reason: .queueFreed)
        engine.shutdown()
        switch delivery {
        case .threaded:
            monitor.withLock {
                while undelivered > 0 { _ = monitor.wait(until: nil) }
                deliveryStopping = true
                signalLocked()
            }
            if let deliveryThread { pthread_join(deliveryThread, nil) }
        case .dispatch:
            while monitor.withLock({ undelivered > 0 }) { _ = dispatch(limit: 0) }
            Glibc.close(eventFD)
        case .inline:
            // The engine ran every pending event when it took the shutdown (after the aborts and
            // the completions of the cancel above), and nothing can post to a closed queue whose
            // requests all completed: nothing is left here.
            break
        }
        HandleTable.shared.remove(handle)
        monitor.withLock {
            freed = true
            monitor.broadcast()
        }
        return RQ_OK
    }

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
