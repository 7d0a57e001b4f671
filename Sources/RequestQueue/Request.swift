import CRequestQueueAPI
import Glibc
import RequestQueueCore
import Synchronization

/// Lifecycle of a request, as `rq_request_state` reports it.
enum RequestState: UInt32 {
    case new = 0
    case waiting = 1
    case running = 2
    case completed = 3
}

/// One request: its configuration (frozen once accepted) and its runtime state.
// @unchecked Sendable: lifecycle and configuration under its striped `lock` (configuration frozen
// once added), runtime under the owning queue's monitor, delivery fields on the delivering thread
// (see the field groups below).
final class Request: @unchecked Sendable {
    /// Guards the configuration, `state` and `callerHolds`. Taken after a queue's monitor, never
    /// before it, and never while another request's is held: requests share a set of locks.
    var lock: StripedLock { Request.locks.lock(for: HandleTable.slot(of: handle)) }
    private static let locks = LockStripes(count: 64)
    /// Set by `register`, before anyone else can see the request.
    private(set) var handle: UInt = 0
    /// The request's id in its queue: the slot of its handle (small, reused only once the
    /// request is gone).
    var id: UInt64 { UInt64(HandleTable.slot(of: handle)) }

    // Inline: what every request has or every attempt reads. The settings few requests change
    // live in `options`, one box made by the first setter that changes one: a waiting request
    // that sets none of them costs no memory for them (bench/README.md, "The caller's side").
    // Small fields are grouped so that the layout has no padding between them. What a cancel
    // touches (the handle, the lifecycle flags, the queue, the challenge) comes first, in the
    // object's first 48 bytes: with a million waiting requests, each cancel finds its request in
    // no cache, and reads one line of it rather than two (bench/README.md, "The queue at scale").

    // Lifecycle, under `lock`.
    var state = RequestState.new
    var callerHolds = true
    /// A leader cancelled by its caller while followers still wait: its own completion was
    /// delivered, its transfer goes on for them. Written under the queue's monitor and `lock`.
    var detached = false
    // Delivery, touched only by the thread delivering this queue's callbacks.
    var completionDelivered = false
    /// Set once the completion callback and the context finalizer have returned (under `lock`).
    var finished = false
    /// Delivering thread only: the body callback asked to stop; later chunks are dropped.
    var streamStopped = false
    /// Configuration (see below): how a body was set (`body`); whether this is a queue's defaults
    /// request (`rq_queue_get_defaults`): configured, never run or freed.
    private(set) var bodyKind = BodyKind.none
    var isDefaults = false
    /// The queue that accepted the request, until it completes (a strong reference: a weak one
    /// hides the queue from leak checkers).
    var queue: Queue?
    /// Runtime, under the owning queue's monitor (with the fields below).
    var challenge: Challenge?
    /// The inheritable settings set on this request; the others come from the queue's defaults
    /// when it is added.
    var explicitSettings: InheritedSettings = []

    // Runtime, under the owning queue's monitor: what callers and the engine read of the lifecycle
    // that the queue's `QueueState` holds (attempts, generations, coalescing).
    /// Whether a request that gets the current attempt's events has a head callback, set when the
    /// queue starts the attempt (none with one can join it later): the engine makes no head
    /// for nobody (Engine.postHead).
    var headWanted = false
    /// The number of the current attempt, set when the queue starts one.
    var attempts = 0
    /// The credentials an authentication handler answered with (boxed: few requests have any).
    var authCredentials: (user: CString, password: CString, scheme: AuthScheme)? {
        get { answeredCredentials?.value }
        set { answeredCredentials = newValue.map(Box.init) }
    }
    private var answeredCredentials: Box<(user: CString, password: CString, scheme: AuthScheme)>?

    /// Engine thread only: the transfer running the current attempt.
    var transfer: Transfer?
    /// The libcurl options of its attempts, made by the first one; reset when the credentials
    /// change (before the engine is told to start the next attempt).
    var transferOptions: Transfer.Options?

    // Configuration: written only while `state == .new`, read freely once frozen.
    var url: ValidatedURL
    var method = "GET"
    /// The header lines, as libcurl's header list takes them (`RequestHeaders`).
    var headers = RequestHeaders()
    /// The body's block of memory (see `body`), nil while the body is empty.
    private var bodyBlock: UnsafeMutableRawPointer?
    /// Whether a body (possibly empty) is sent: one was set, or the method normally has one.
    /// (Asked several times per attempt: a GET does not hash its method.)
    var sendsBody: Bool { hasBody || (method != "GET" && HTTPMethods.sendingBody.contains(method)) }
    var timeout = 0.0
    var connectTimeout = 30.0
    var idleTimeout = TransferWatch.defaultIdleTimeout
    var watchLimits: TransferWatch.Limits { TransferWatch.Limits(idle: idleTimeout, headers: headerTimeout, lowSpeed: lowSpeed) }
    /// The completion callback: at most one of these two is set (see `rq_request_set_summary_completion`).
    var completion: rq_completion_fn?
    var summaryCompletion: rq_summary_completion_fn?
    var context: UnsafeMutableRawPointer?
    var contextFree: rq_context_free_fn?
    /// scheme://host:port, the unit of per-host limits; made when first needed (under the
    /// queue's monitor).
    var origin: String {
        if let cachedOrigin { return cachedOrigin }
        let made = url.origin
        cachedOrigin = made
        return made
    }
    private var cachedOrigin: String?
    /// Priority level (`Scheduler.priorities`); the only setting that may change while the request waits.
    var priority = 0
    /// Flow control between the engine (producing chunks) and the delivery (consuming them).
    var flow: StreamFlow?
    /// Download progress over the responses of the current attempt, the upload figure last
    /// reported in it (-1: none; it stays at its highest, a body sent again on the attempt's next
    /// transfer does not take it back, whichever `Transfer` runs that one), and the attempt they
    /// count (engine thread).
    var download = AttemptProgress()
    var uploadReported: Int64 = -1
    var progressAttempt = 0
    /// Metrics: when the request was accepted (Queue.add), and when its first attempt started
    /// (engine thread; 0 until then).
    var acceptedAt = 0.0
    var firstAttemptAt = 0.0

    /// The settings that few requests change, with their defaults. Written only while the request
    /// is new (under `lock`, like the rest of the configuration), read freely once it is frozen.
    private final class Options {
        var headerTimeout: Double?
        var lowSpeed: (rate: Double, time: Double)?
        var user: CString?
        var password: CString?
        var uploadProgress: rq_progress_fn?
        var downloadProgress: rq_progress_fn?
        var authHandler: rq_auth_fn?
        var retry = RetryPolicy()
        var tag: CString?
        static let defaultMaxRedirects = 10
        var maxRedirects = defaultMaxRedirects
        var maxResponseSize: UInt64 = 0
        var caFile: CString?
        var bodyCallback: rq_data_fn?
        var headCallback: rq_head_fn?
        var outputPath: [CChar]?
        var outputResume = false
        var removedHeaders = Set<String>()
        var cookieJar: CookieJar?
        var transport = TransportSettings()
    }

    private var options: Options?
    /// Whether a setting kept out of line was written (for the tests).
    var hasOwnOptions: Bool { options != nil }

    /// The box to write a setting into, made by the first write.
    private var writableOptions: Options {
        if let options { return options }
        let made = Options()
        options = made
        return made
    }

    // Each setting reads the request's box, or its default (the box's initial value); a write goes
    // to the request's box.
    /// The response-header and low-speed limits; nil: their defaults, which follow the idle timeout.
    var headerTimeout: Double? {
        get { options?.headerTimeout ?? nil }
        set { writableOptions.headerTimeout = newValue }
    }
    var lowSpeed: (rate: Double, time: Double)? {
        get { options?.lowSpeed ?? nil }
        set { writableOptions.lowSpeed = newValue }
    }
    /// Caller strings kept byte for byte (they need not be UTF-8).
    var user: CString? {
        get { options?.user ?? nil }
        set { writableOptions.user = newValue }
    }
    var password: CString? {
        get { options?.password ?? nil }
        set { writableOptions.password = newValue }
    }
    var uploadProgress: rq_progress_fn? {
        get { options?.uploadProgress ?? nil }
        set { writableOptions.uploadProgress = newValue }
    }
    var downloadProgress: rq_progress_fn? {
        get { options?.downloadProgress ?? nil }
        set { writableOptions.downloadProgress = newValue }
    }
    var authHandler: rq_auth_fn? {
        get { options?.authHandler ?? nil }
        set { writableOptions.authHandler = newValue }
    }
    var retry: RetryPolicy {
        get { options?.retry ?? RetryPolicy() }
        set { writableOptions.retry = newValue }
    }
    /// `retry.enabled`, without making the default policy (two sets) for a request that has none.
    var retryEnabled: Bool { options?.retry.enabled ?? false }
    var tag: CString? {
        get { options?.tag ?? nil }
        set { writableOptions.tag = newValue }
    }
    var maxRedirects: Int {
        get { options?.maxRedirects ?? Options.defaultMaxRedirects }
        set { writableOptions.maxRedirects = newValue }
    }
    var maxResponseSize: UInt64 {
        get { options?.maxResponseSize ?? 0 }
        set { writableOptions.maxResponseSize = newValue }
    }
    var caFile: CString? {
        get { options?.caFile ?? nil }
        set { writableOptions.caFile = newValue }
    }
    // Streaming (body chunks or file).
    var bodyCallback: rq_data_fn? {
        get { options?.bodyCallback ?? nil }
        set { writableOptions.bodyCallback = newValue }
    }
    /// Called with the head (status, headers, URL) of each attempt's final response ("Response heads" in include/requestqueue.h).
    var headCallback: rq_head_fn? {
        get { options?.headCallback ?? nil }
        set { writableOptions.headCallback = newValue }
    }
    /// The output file's path as given (NUL-terminated bytes: any file name, UTF-8 or not).
    var outputPath: [CChar]? {
        get { options?.outputPath ?? nil }
        set { writableOptions.outputPath = newValue }
    }
    var outputResume: Bool {
        get { options?.outputResume ?? false }
        set { writableOptions.outputResume = newValue }
    }
    /// Headers removed from this request by name: a queue's default of that name is not added.
    var removedHeaders: Set<String> {
        get { options?.removedHeaders ?? [] }
        set { writableOptions.removedHeaders = newValue }
    }
    /// The queue's cookie jar, when the request uses cookies (set at rq_add).
    var cookieJar: CookieJar? {
        get { options?.cookieJar ?? nil }
        set { writableOptions.cookieJar = newValue }
    }
    /// Transport settings and queue defaults (Transport.swift). Writing unset ones makes no box.
    var transport: TransportSettings {
        get { options?.transport ?? TransportSettings() }
        set { if options != nil || !newValue.isUnset { writableOptions.transport = newValue } }
    }
    /// Whether the request asked for the queue's cookie jar (`rq_request_set_cookies`).
    var usesCookies: Bool { options?.transport.cookies == true }
    /// Whether the body of a 2xx response goes to the callback or the file, not to the response.
    var streamsBody: Bool { options.map { $0.bodyCallback != nil || $0.outputPath != nil } ?? false }

    /// The last progress delivered (delivery side): the final call of a cancelled request repeats
    /// it instead of going back to 0. Boxed, made by the first progress delivered: few requests
    /// have a progress callback.
    var deliveredDownload: (done: Int64, total: Int64) {
        get { delivered?.value.download ?? (0, -1) }
        set { deliveredBox.value.download = newValue }
    }
    var deliveredUpload: (done: Int64, total: Int64) {
        get { delivered?.value.upload ?? (0, -1) }
        set { deliveredBox.value.upload = newValue }
    }
    private typealias Delivered = (download: (done: Int64, total: Int64), upload: (done: Int64, total: Int64))
    private var delivered: Box<Delivered>?
    private var deliveredBox: Box<Delivered> {
        if let delivered { return delivered }
        let made = Box<Delivered>((download: (0, -1), upload: (0, -1)))
        delivered = made
        return made
    }

    init(url: ValidatedURL) {
        self.url = url
    }

    deinit { free(bodyBlock) }

    // The body.
    enum BodyKind: UInt8 {
        case none
        /// `rq_request_set_body`: a copy of the caller's bytes, in `bodyBlock` after its size.
        case copied
        /// `rq_request_set_body_borrowed`: the caller's bytes, read in place (never written nor
        /// freed here); `bodyBlock` holds their size and address.
        case borrowed
    }

    /// Whether a body (possibly empty) was set.
    var hasBody: Bool { bodyKind != .none }

    /// The body to send (empty when none was set). Its size and bytes, or the caller's address,
    /// are in one block of memory that the request holds by one pointer: no buffer object to
    /// make and free beside it (bench/README.md, "The caller's side and small POSTs, continued").
    var body: UnsafeRawBufferPointer {
        guard let bodyBlock else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        let bytes = bodyKind == .borrowed ? bodyBlock.load(fromByteOffset: 8, as: UnsafeRawPointer?.self)
            : UnsafeRawPointer(bodyBlock + Request.bodyOffset)
        return UnsafeRawBufferPointer(start: bytes, count: bodyBlock.load(as: Int.self))
    }

    /// Where a copied body's bytes start in its block (after its size, 16-byte aligned).
    private static let bodyOffset = 16

    /// Sets the body to a copy of `count` bytes at `data`; false when memory ran out (nothing
    /// changed then). `count` is at most `Int.max / 2`. Under `lock`, while the request is new.
    func setBody(copying data: UnsafeRawPointer?, count: Int) -> Bool {
        var block: UnsafeMutableRawPointer?
        if let data, count > 0 {
            // A large body must not take the last of the memory (see `MemoryReserve`).
            if count >= MemoryReserve.largeBuffer, !MemoryReserve.remains(after: count) { return false }
            guard let made = malloc(Request.bodyOffset + count) else { return false }
            made.storeBytes(of: count, as: Int.self)
            (made + Request.bodyOffset).copyMemory(from: data, byteCount: count)
            block = made
        }
        replaceBody(block, .copied)
        return true
    }

    /// Sets the body to the caller's `count` bytes at `data`, read in place; false when memory
    /// ran out (nothing changed then). Under `lock`, while the request is new.
    func setBody(borrowing data: UnsafeRawPointer?, count: Int) -> Bool {
        var block: UnsafeMutableRawPointer?
        if let data, count > 0 {
            guard let made = malloc(Request.bodyOffset) else { return false }
            made.storeBytes(of: count, as: Int.self)
            made.storeBytes(of: data, toByteOffset: 8, as: UnsafeRawPointer.self)
            block = made
        }
        replaceBody(block, .borrowed)
        return true
    }

    private func replaceBody(_ block: UnsafeMutableRawPointer?, _ kind: BodyKind) {
        free(bodyBlock)
        bodyBlock = block
        bodyKind = kind
    }

    /// Registers the request in the handle table; returns its handle.
    func register() -> UInt {
        handle = HandleTable.shared.register(self, kind: .request)
        return handle
    }

    var pointer: OpaquePointer? { HandleTable.pointer(handle) }

    /// Runs `body` on the configuration if the request can still be changed.
    func configure(_ body: (Request) -> rq_result) -> rq_result {
        lock.withLock { state == .new ? body(self) : RQ_ERR_REQUEST_FROZEN }
    }

    /// Releases the handle once nobody can use it any more: the caller freed it and the request
    /// is not in flight. (A leader detached by its cancel got its completion while its transfer
    /// goes on for its followers: its slot, which is its id in the queue, stays taken until it
    /// completes too.) `finishing`: its completion has just run; marks it `finished` under the
    /// same lock.
    func releaseHandleIfUnused(finishing: Bool = false) {
        let release = lock.withLock {
            if finishing { finished = true }
            return handleUnused
        }
        if release { HandleTable.shared.remove(handle) }
    }

    /// Whether nobody can use the handle any more (under `lock`).
    var handleUnused: Bool { !callerHolds && (state == .new || (finished && state == .completed)) }

    /// The duplicate-equality key (see the header: method, URL, headers, body).
    var duplicateKey: DuplicateKey { DuplicateKey(self) }
}

enum AuthScheme {
    case basic
    case digest
    /// Neither: Basic or Digest, whichever the server offers besides (`ccurl_auth_password`).
    case any
}

/// Equality of requests for duplicate detection. Reads only the frozen configuration.
struct DuplicateKey: Hashable {
    let request: Request
    private let hash: Int

    init(_ request: Request) {
        self.request = request
        var hasher = Hasher()
        hasher.combine(request.method)
        hasher.combine(request.url.string)
        request.headers.hash(into: &hasher)
        // The body by its length and at most its first and last 4 KiB: adding a large upload
        // makes no pass over all of it (equal keys still compare every byte, below).
        let body = request.body
        hasher.combine(body.count)
        if body.count <= 2 * DuplicateKey.hashedEnd {
            hasher.combine(bytes: body)
        } else {
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: body.prefix(DuplicateKey.hashedEnd)))
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: body.suffix(DuplicateKey.hashedEnd)))
        }
        hash = hasher.finalize()
    }

    private static let hashedEnd = 4096

    func hash(into hasher: inout Hasher) { hasher.combine(hash) }

    /// Same length and bytes (one `memcmp`; the same memory is equal at once).
    private static func sameBody(_ x: UnsafeRawBufferPointer, _ y: UnsafeRawBufferPointer) -> Bool {
        guard x.count == y.count else { return false }
        guard x.count > 0, let p = x.baseAddress, let q = y.baseAddress, p != q else { return true }
        return memcmp(p, q, x.count) == 0
    }

    static func == (a: DuplicateKey, b: DuplicateKey) -> Bool {
        let x = a.request, y = b.request
        return a.hash == b.hash && x.method == y.method && x.url.string == y.url.string
            && x.headers.sameLines(as: y.headers)
            && sameBody(x.body, y.body)
    }
}

/// A pending authentication challenge; its handle is valid until answered or the request ends.
final class Challenge: Sendable {
    weak let request: Request?
    let generation: UInt64
    let response: Response
    /// Stored once, in init, by the thread that made the challenge (before it is published).
    private let handleStore = Atomic<UInt>(0)
    var handle: UInt { handleStore.load(ordering: .relaxed) }

    init(request: Request, generation: UInt64, response: Response) {
        self.request = request
        self.generation = generation
        self.response = response
        handleStore.store(HandleTable.shared.register(self, kind: .challenge), ordering: .relaxed)
    }

    var pointer: OpaquePointer? { HandleTable.pointer(handle) }

    func invalidate() { HandleTable.shared.remove(handle) }
}

/// A value kept out of line: a field that few objects use costs them one pointer.
private final class Box<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}
