/// What a mutation of `QueueState` asks its owner to do. The owner holds the state under its lock,
/// calls a mutation, and acts on the returned actions: the events (completions, challenges, heads)
/// go to the delivery queue with the lock still held, the engine's commands (start, abort, retry,
/// wake) are sent after unlocking.
///
/// A plain struct (one optional reference and plain values) rather than an enum with payloads:
/// copying or destroying one is a retain or release of `ref`, with no switch over its cases.
/// Made with the static functions below, one per kind, which say which fields each kind uses.
public struct QueueAction<Ref> {
    public enum Kind: UInt8, Sendable {
        case start, abort, retry, wake, complete, detach, release, head, challenge
    }

    public let kind: Kind
    /// The request it is about; nil only for `wake`.
    public let ref: Ref?
    /// `start`, `retry`, `challenge`: the attempt's generation.
    public let generation: UInt64
    /// `start`: the number of the attempt; `complete`, `detach`, `release`: the attempts made.
    public let attempts: Int
    /// `challenge`: the rejected credentials counted.
    public let failures: Int
    /// `retry`: the delay in seconds; `wake`: the time.
    public let time: Double
    /// `complete`, `detach`, `release`: how the request ends.
    public let ending: Ending
    /// `complete`: it has the same response as the previous `complete`, `detach` or `release`.
    public let sharing: Bool

    private init(_ kind: Kind, _ ref: Ref?, generation: UInt64 = 0, attempts: Int = 0, failures: Int = 0,
                 time: Double = 0, ending: Ending = .reported, sharing: Bool = false) {
        self.kind = kind
        self.ref = ref
        self.generation = generation
        self.attempts = attempts
        self.failures = failures
        self.time = time
        self.ending = ending
        self.sharing = sharing
    }

    /// Start attempt number `attempt` of the request under `generation` (the transfer's identity:
    /// reports about an older generation are ignored). The request and those sharing its transfer
    /// now run.
    public static func start(_ ref: Ref, generation: UInt64, attempt: Int) -> Self {
        Self(.start, ref, generation: generation, attempts: attempt)
    }

    /// Stop the request's transfer or retry timer, if it has one.
    public static func abort(_ ref: Ref) -> Self { Self(.abort, ref) }

    /// Arm the retry timer: report `retryDue` of `generation` after `after` seconds.
    public static func retry(_ ref: Ref, generation: UInt64, after: Double) -> Self {
        Self(.retry, ref, generation: generation, time: after)
    }

    /// Report `startDue` at this time (the rate limit holds back a request until then).
    public static func wake(at time: Double) -> Self { Self(.wake, nil, time: time) }

    /// Deliver the request's one completion. `sharing`: it has the same response as the previous
    /// `complete`, `detach` or `release` (a coalesced request, completed with its leader).
    public static func complete(_ ref: Ref, _ ending: Ending, attempts: Int, sharing: Bool) -> Self {
        Self(.complete, ref, attempts: attempts, ending: ending, sharing: sharing)
    }

    /// A leader that others share the transfer of was cancelled: deliver its completion; the
    /// transfer goes on for them (the request stays in the scheduler, "detached").
    public static func detach(_ ref: Ref, _ ending: Ending, attempts: Int) -> Self {
        Self(.detach, ref, attempts: attempts, ending: ending)
    }

    /// A detached leader's transfer ended: it leaves the queue without a second completion.
    public static func release(_ ref: Ref, _ ending: Ending, attempts: Int) -> Self {
        Self(.release, ref, attempts: attempts, ending: ending)
    }

    /// Deliver the head of the reported attempt's final response to this request.
    public static func head(_ ref: Ref) -> Self { Self(.head, ref) }

    /// Ask the request's authentication handler about the reported attempt's response, counting
    /// `failures` rejected credentials; the answer refers to `generation`.
    public static func challenge(_ ref: Ref, generation: UInt64, failures: Int) -> Self {
        Self(.challenge, ref, generation: generation, failures: failures)
    }
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

/// The actions of one mutation, in order. The first four are stored inline: the per-request path
/// (an add that starts it, an attempt that completes and starts the next) allocates nothing; more
/// (a burst of starts, a leader with many followers, cancelling everything) go to an array.
public struct QueueActions<Ref>: Sequence {
    // Four fields rather than a tuple (reading one element of a tuple copied all four), and not
    // optionals: those past `count` hold a placeholder without a reference.
    private var a0 = QueueAction<Ref>.wake(at: 0)
    private var a1 = QueueAction<Ref>.wake(at: 0)
    private var a2 = QueueAction<Ref>.wake(at: 0)
    private var a3 = QueueAction<Ref>.wake(at: 0)
    private var more: [QueueAction<Ref>] = []
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ action: QueueAction<Ref>) {
        switch count {
        case 0: a0 = action
        case 1: a1 = action
        case 2: a2 = action
        case 3: a3 = action
        default: more.append(action)
        }
        count += 1
    }

    /// Calls `body` with each action in order (without copying the list, unlike `for ... in`).
    public func forEach(_ body: (QueueAction<Ref>) -> Void) {
        if count > 0 { body(a0) }
        if count > 1 { body(a1) }
        if count > 2 { body(a2) }
        if count > 3 { body(a3) }
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
            case 2: return actions.a2
            case 3: return actions.a3
            default: return actions.more[index - 4]
            }
        }
    }

    public func makeIterator() -> Iterator { Iterator(actions: self) }
}
