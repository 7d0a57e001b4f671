/// What a mutation of `QueueState` asks its owner to do. The owner holds the state under its lock,
/// calls a mutation, and acts on the returned actions: the events (completions, challenges, heads)
/// go to the delivery queue with the lock still held, the engine's commands (start, abort, retry,
/// wake) are sent after unlocking.
public enum QueueAction<Ref> {
    /// Start attempt number `attempt` of the request under `generation` (the transfer's identity:
    /// reports about an older generation are ignored). The request and those sharing its transfer
    /// now run.
    case start(Ref, generation: UInt64, attempt: Int)
    /// Stop the request's transfer or retry timer, if it has one.
    case abort(Ref)
    /// Arm the retry timer: report `retryDue` of `generation` after `after` seconds.
    case retry(Ref, generation: UInt64, after: Double)
    /// Report `startDue` at this time (the rate limit holds back a request until then).
    case wake(at: Double)
    /// Deliver the request's one completion. `sharing`: it has the same response as the previous
    /// `complete`, `detach` or `release` (a coalesced request, completed with its leader).
    case complete(Ref, Ending, attempts: Int, sharing: Bool)
    /// A leader that others share the transfer of was cancelled: deliver its completion; the
    /// transfer goes on for them (the request stays in the scheduler, "detached").
    case detach(Ref, Ending, attempts: Int)
    /// A detached leader's transfer ended: it leaves the queue without a second completion.
    case release(Ref, Ending, attempts: Int)
    /// Deliver the head of the reported attempt's final response to this request.
    case head(Ref)
    /// Ask the request's authentication handler about the reported attempt's response, counting
    /// `failures` rejected credentials; the answer refers to `generation`.
    case challenge(Ref, generation: UInt64, failures: Int)
}

extension QueueAction: Equatable where Ref: Equatable {}

/// How a request ends: with the response of the report that ended it (attempt ended, failed to
/// start, challenge answered "continue without"), or cancelled.
public enum Ending: Equatable, Sendable {
    case reported
    case cancelled(CancelReason)
}

public enum CancelReason: Equatable, Sendable {
    /// `rq_request_cancel`, `rq_queue_cancel_all`, `rq_queue_cancel_tag`.
    case caller
    /// An equal request added later replaced it (duplicates "cancel earlier").
    case duplicate
    /// The authentication handler answered "cancel".
    case authHandler
    /// `rq_queue_free`.
    case queueFreed
}

/// The actions of one mutation, in order. The first two are stored inline: the per-request path
/// (an add that starts it, an attempt that completes and starts the next) allocates nothing; more
/// (a burst of starts, a leader with many followers, cancelling everything) go to an array.
/// Two, not four: with four inline fields the compiler destroyed every list through the generic
/// type's value witnesses (~140 instructions each, three per request; bench/README.md).
public struct QueueActions<Ref>: Sequence {
    // Fields rather than a tuple (reading one element of a tuple copied them all), and not
    // optionals: those past `count` hold a placeholder without a reference.
    private var a0 = QueueAction<Ref>.wake(at: 0)
    private var a1 = QueueAction<Ref>.wake(at: 0)
    private var more: [QueueAction<Ref>] = []
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    /// Takes `action` over (`consuming`: the caller's reference moves in, without a retain and a
    /// release).
    public mutating func append(_ action: consuming QueueAction<Ref>) {
        switch count {
        case 0: a0 = action
        case 1: a1 = action
        default: more.append(action)
        }
        count += 1
    }

    /// Calls `body` with each action in order (without copying the list, unlike `for ... in`).
    public func forEach(_ body: (QueueAction<Ref>) -> Void) {
        if count > 0 { body(a0) }
        if count > 1 { body(a1) }
        // Not even an empty array to copy and destroy on the common path.
        guard count > 2 else { return }
        for action in more { body(action) }
    }

    public struct Iterator: IteratorProtocol {
        fileprivate let actions: QueueActions
        fileprivate var index = 0

        public mutating func next() -> QueueAction<Ref>? {
            guard index < actions.count else { return nil }
            defer { index += 1 }
            switch index {
            case 0: return actions.a0
            case 1: return actions.a1
            default: return actions.more[index - 2]
            }
        }
    }

    public func makeIterator() -> Iterator { Iterator(actions: self) }
}
