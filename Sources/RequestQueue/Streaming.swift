import CCurl
import Glibc
import Synchronization

// Streaming of response bodies: to a callback (chunks delivered like progress events, with flow
// control) or to a file written on the engine thread. See "Streaming" in include/requestqueue.h.

/// Flow control of a body streamed to a callback. It counts the memory of the chunk buffers that
/// the engine thread took and that are not free again: one is free once the engine stopped
/// filling it and every piece posted out of it was delivered (its whole capacity counts, not
/// only the bytes in it). When that reaches `highWater`, the engine pauses the transfer (libcurl
/// stops reading the socket), and the delivery asks for it to resume once it dropped to
/// `lowWater`. Shared by the attempts of one request. The buffers come from, and go back to, the
/// queue's `ChunkPool`.
// @unchecked: `resumeWanted`, `pool` and `streaming` are only touched under `lock`, a pthread
// mutex (not Synchronization's Mutex, which ThreadSanitizer cannot see on Linux: the swift-tsan
// step would report its accesses as races). `pending` is atomic: it is read without the lock
// (`backlogged`), and decreased under the lock only (`freed`), where `resumeWanted` is
// checked against it, so a resume is never missed.
final class StreamFlow: @unchecked Sendable {
    /// Memory of undelivered chunks at which a transfer pauses.
    static let highWater = 1 << 20
    /// Memory of undelivered chunks at or below which a paused transfer resumes.
    static let lowWater = highWater / 2
    /// Memory of posted chunks waiting for delivery at which the delivery is told at once
    /// (`backlogged`), rather than at the end of the engine's batch.
    static let signalAt = highWater - StreamChunk.capacity

    private let lock = Lock()
    private let pending = Atomic<Int>(0)
    private var resumeWanted = false
    /// The pool the current attempt takes its chunks from, and whether that attempt counts among
    /// the pool's streams (from its first chunk to `stopStreaming`).
    private var pool: ChunkPool?
    private var streaming = false

    enum Take {
        case chunk(StreamChunk)
        /// The undelivered memory reached `highWater`: the caller pauses its transfer, and a
        /// later `delivered` returns true when it should resume.
        case full
        case outOfMemory
    }

    /// Engine thread: an empty chunk buffer from `pool`, held by the engine (`StreamChunk.holds`)
    /// until it gives it back with `delivered`, unless the undelivered memory reached `highWater`
    /// (and not `beyondLimit`).
    func takeChunk(from pool: ChunkPool, beyondLimit: Bool) -> Take {
        let starts: Bool? = lock.withLock {
            if !beyondLimit, pending.load(ordering: .relaxed) >= StreamFlow.highWater {
                resumeWanted = true
                return nil
            }
            pending.add(StreamChunk.capacity, ordering: .relaxed)
            self.pool = pool
            defer { streaming = true }
            return !streaming
        }
        guard let starts else { return .full }
        if starts { pool.streamStarted() }
        guard let chunk = pool.take() else {
            _ = freed(nil, capacity: StreamChunk.capacity)
            return .outOfMemory
        }
        chunk.count = 0
        chunk.holds.store(1, ordering: .relaxed)
        return .chunk(chunk)
    }

    /// Whether the posted chunks waiting for delivery reached `signalAt` (`filling`: the
    /// capacity of the chunk the engine is still filling, counted but not posted): the delivery
    /// should run now, before the transfer has to pause.
    func backlogged(filling: Int) -> Bool { pending.load(ordering: .relaxed) - filling >= StreamFlow.signalAt }

    /// A piece was delivered, skipped, or never posted, or the engine stopped filling a buffer
    /// (`chunk` is that buffer): the hold on its buffer ends, and the last one frees the buffer
    /// (back to the pool). Returns true when a paused transfer should now resume.
    func delivered(_ chunk: StreamChunk) -> Bool {
        let buffer = chunk.buffer ?? chunk
        // (Acquiring and releasing: the reads of the pieces' bytes on the delivering thread come
        // before the engine fills the buffer again, whichever thread ends the last hold.)
        guard buffer.holds.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return false }
        return freed(buffer, capacity: buffer.capacity)
    }

    private func freed(_ chunk: StreamChunk?, capacity: Int) -> Bool {
        let (resume, pool): (Bool, ChunkPool?) = lock.withLock {
            let left = pending.subtract(capacity, ordering: .relaxed).newValue
            if resumeWanted, left <= StreamFlow.lowWater {
                resumeWanted = false
                return (true, self.pool)
            }
            return (false, self.pool)
        }
        if let chunk { pool?.give(chunk) }
        return resume
    }

    /// Engine thread: the attempt stopped streaming. Returns true when no attempt streams from
    /// its pool any more (the engine then has the pool freed after `ChunkPool.idleRelease`).
    func stopStreaming() -> Bool {
        let pool: ChunkPool? = lock.withLock {
            guard streaming else { return nil }
            streaming = false
            return self.pool
        }
        return pool?.streamEnded() ?? false
    }
}

/// The full-size chunk buffers of one queue's streamed bodies, kept for reuse from one piece and
/// one body to the next. Buffers freed at the end of each body cost the next body a page fault
/// per 4 KiB of its fresh ones (glibc gives memory trimmed from the engine thread's arena back to
/// the system): 137-145 page faults per 10 MiB body were measured, about 200 when each body's
/// request is added from the completion of the one before, which leaves the queue idle in between
/// (bench/README.md). The pool keeps at most `perStream` free chunks for each attempt streaming
/// now, and as many while none streams; they are freed once no attempt has streamed for
/// `idleRelease` seconds (`release`, from the engine's loop) or with the queue, and so are those
/// delivered later.
// @unchecked Sendable: `free`, `streams` and `warm` are only touched under `lock` (a pthread
// mutex, for the reason given at `StreamFlow`).
final class ChunkPool: @unchecked Sendable {
    /// Free chunks kept per streaming attempt: as many as flow control lets wait for delivery,
    /// and two more (the one being filled, the one being delivered).
    static let perStream = StreamFlow.highWater / StreamChunk.capacity + 2
    /// Seconds without a streaming attempt after which the pool frees its chunks.
    static let idleRelease = 1.0

    private let lock = Lock()
    private var free: [StreamChunk] = []
    /// The chunks of this pool that exist (free, filling, waiting, being delivered).
    let counts = ChunkCounts()
    /// Attempts streaming now (from their first chunk to their end).
    private var streams = 0
    /// Whether the chunks are kept while no attempt streams: from the first stream to `release`.
    private var warm = false

    private var limit: Int { max(streams, warm ? 1 : 0) * ChunkPool.perStream }

    /// Engine thread: a free chunk, or a new one (nil when memory ran out).
    func take() -> StreamChunk? {
        if let chunk = lock.withLock({ free.popLast() }) { return chunk }
        return StreamChunk(capacity: StreamChunk.capacity, counts: counts)
    }

    /// A delivered full-size chunk: kept for reuse, or freed beyond the limit (by the caller's
    /// release of it, outside the lock).
    func give(_ chunk: StreamChunk) {
        lock.withLock { if free.count < limit { free.append(chunk) } }
    }

    func streamStarted() {
        lock.withLock {
            streams += 1
            warm = true
        }
    }

    /// An attempt stopped streaming. Frees the chunks beyond the new limit; returns true when no
    /// attempt streams now.
    func streamEnded() -> Bool {
        var dropped: [StreamChunk] = []
        let none: Bool = lock.withLock {
            streams = max(0, streams - 1)
            while free.count > limit, let chunk = free.popLast() { dropped.append(chunk) }
            return streams == 0
        }
        _ = dropped  // freed here, outside the lock
        return none
    }

    /// Engine thread: no attempt has streamed for `idleRelease` seconds, or the queue stops:
    /// unless one streams again, every free chunk is freed, and so is each one delivered later.
    func release() {
        var dropped: [StreamChunk] = []
        lock.withLock {
            guard streams == 0 else { return }
            warm = false
            swap(&dropped, &free)
        }
        _ = dropped  // freed here, outside the lock
    }
}

/// How many chunks a pool made, how many exist now, and the most that existed at once: what the
/// tests read of its memory (`ChunkPool.counts`).
final class ChunkCounts: Sendable {
    let total = Atomic<Int>(0)
    let live = Atomic<Int>(0)
    /// Written by the engine thread only (the one that makes chunks).
    let peak = Atomic<Int>(0)

    /// Engine thread: a chunk was made.
    fileprivate func made() {
        total.add(1, ordering: .relaxed)
        let now = live.add(1, ordering: .relaxed).newValue
        if now > peak.load(ordering: .relaxed) { peak.store(now, ordering: .relaxed) }
    }
}

/// A buffer of a streamed body (malloc'ed, `capacity` bytes), or a piece posted out of one. The
/// engine thread fills a buffer with what libcurl passes (at most 16 KiB at a time, from reads of
/// up to `capacity` bytes; libcurl reads while the socket has data) and, at the end of each turn
/// of its loop and when the buffer is full, posts the bytes it put in since its last post as a
/// piece (`piece(from:offset:)`, no copy; a buffer filled whole between two posts goes as it
/// is), then goes on filling the same buffer. So every byte is copied once, and a buffer is
/// counted once by the flow control however many pieces it was posted in. Buffers are recycled
/// through the queue's `ChunkPool`.
// @unchecked Sendable: a buffer's bytes are written only by the engine thread, each byte before
// the piece holding it is posted, and read by the delivering thread between that post and the
// piece's delivery: the queue's monitor (the post) orders them, and the bytes the engine fills
// meanwhile are past every posted piece. `count` is the engine thread's only (a piece's is set
// before it is posted). A buffer is filled again only after its last hold ended (`holds`, the
// pool's lock).
final class StreamChunk: @unchecked Sendable {
    /// The size of a full chunk, and of libcurl's receive buffer for a streamed body when it is
    /// not decoded (CURLOPT_BUFFERSIZE; libcurl allocates it for each transfer, and frees it
    /// when the transfer ends). Measured on 10 MiB bodies (bench/README.md): libcurl's cost goes
    /// with the number of reads, ours with the number of chunks; at 256 KiB both are below the
    /// C reference's with libcurl's default 16 KiB.
    static let capacity = 256 << 10
    /// libcurl's receive buffer for a streamed body that is decoded: its default, 16 KiB. While
    /// such a transfer is paused, libcurl keeps the decoded rest of the read it was decoding: at
    /// most this many bytes times the compression ratio (about 1030:1 for gzip at worst), and it
    /// copies that rest again at each resume. Measured with 256 MiB of gzip-compressed zeros and
    /// a slow callback: peak RSS 64 MiB with 16 KiB reads, 125 MiB with 48 KiB reads.
    static let decodedReadSize = 16 << 10
    let bytes: UnsafeMutablePointer<UInt8>
    let capacity: Int
    /// The counts of the pool that made it.
    private let counts: ChunkCounts?
    /// A piece's buffer; nil for a buffer.
    let buffer: StreamChunk?
    /// A buffer's holds: the engine's while it fills it, and one per posted piece not delivered
    /// yet (`StreamFlow.delivered` ends one; the last frees the buffer).
    let holds = Atomic<Int>(0)
    /// Bytes filled. (`Transfer.bodyData` copies into the free room directly and sets it.)
    var count = 0
    /// The position in the body of its attempt of a piece, or of a buffer posted whole (set by
    /// the engine thread before it posts it).
    var offset: UInt64

    /// `capacity` > 0; nil when memory ran out.
    init?(capacity: Int, counts: ChunkCounts? = nil) {
        guard capacity > 0, let raw = malloc(capacity) else { return nil }
        bytes = raw.assumingMemoryBound(to: UInt8.self)
        self.capacity = capacity
        self.counts = counts
        buffer = nil
        offset = 0
        counts?.made()
    }

    /// The bytes of `buffer` from `start` to its count, at `offset` in the body: a piece to post,
    /// holding `buffer`.
    private init(_ buffer: StreamChunk, from start: Int, offset: UInt64) {
        bytes = buffer.bytes + start
        count = buffer.count - start
        capacity = count
        counts = nil
        self.buffer = buffer
        self.offset = offset
        buffer.holds.add(1, ordering: .relaxed)
    }

    /// Engine thread: a piece of this buffer's bytes from `start` on, which begin at `offset` in
    /// the body.
    func piece(from start: Int, offset: UInt64) -> StreamChunk { StreamChunk(self, from: start, offset: offset) }

    deinit {
        guard buffer == nil else { return }
        free(bytes)
        counts?.live.subtract(1, ordering: .relaxed)
    }

    var isFull: Bool { count == capacity }

    /// Copies as much of `size` bytes at `data` as there is room for; returns how many it took.
    func fill(_ data: UnsafeRawPointer, _ size: Int) -> Int {
        let taken = min(size, capacity - count)
        UnsafeMutableRawPointer(bytes + count).copyMemory(from: data, byteCount: taken)
        count += taken
        return taken
    }
}

extension Queue {
    /// Delivering thread: runs the body callback for one chunk, then lets the transfer resume if
    /// it was paused waiting for the delivery to catch up.
    func deliverChunk(_ request: Request, _ chunk: StreamChunk) {
        if !request.completionDelivered, !request.streamStopped, let fn = request.bodyCallback {
            if fn(request.context, request.pointer, chunk.bytes, chunk.count, chunk.offset) != 0 {
                request.streamStopped = true
                _ = cancel(request)
            }
        }
        if request.flow?.delivered(chunk) == true { resumeStream(request) }
    }
}

/// The output file of a request (`rq_request_set_output_file`), opened and written by the
/// engine thread. Errors are kept as messages naming the file and the system error.
struct OutputFile {
    /// NUL-terminated.
    let path: [CChar]
    private(set) var fd: Int32 = -1

    init(path: [CChar]) { self.path = path }

    /// The size of a regular file at `path`, or 0 (absent, empty, not a regular file).
    static func resumableSize(_ path: [CChar]) -> Int64 {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 else { return 0 }
        return Int64(info.st_size)
    }

    /// Opens the file to write from byte `from`: 0 creates or truncates it; a positive value keeps
    /// that many bytes (cutting anything after them) and appends. Returns an error message.
    /// Only a regular file (or none, created then) is used: the engine thread must never block,
    /// and opening a FIFO without a reader, or writing to a device, a socket or a full pipe, can.
    /// The file is opened without blocking and checked again once open (it may have been
    /// replaced in between).
    mutating func open(from: Int64) -> String? {
        if existsAndIsNotRegular(path) { return message("cannot open", reason: "not a regular file") }
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (from > 0 ? 0 : O_TRUNC)
        let fd = Glibc.open(path, flags, 0o644)
        guard fd >= 0 else { return message("cannot open", errno) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            Glibc.close(fd)
            return message("cannot open", reason: "not a regular file")
        }
        if from > 0 {
            if ftruncate(fd, off_t(from)) != 0 || lseek(fd, off_t(from), SEEK_SET) < 0 {
                let error = errno
                Glibc.close(fd)
                return message("cannot resume at byte \(from) of", error)
            }
        }
        self.fd = fd
        return nil
    }

    /// Writes all of `data`; returns an error message.
    func write(_ data: UnsafeRawPointer, _ count: Int) -> String? {
        var done = 0
        while done < count {
            let n = Glibc.write(fd, data + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                return message("cannot write", errno)
            }
            done += n
        }
        return nil
    }

    /// Closes the file if open; returns an error message.
    mutating func close() -> String? {
        guard fd >= 0 else { return nil }
        let result = Glibc.close(fd)
        fd = -1
        return result == 0 ? nil : message("cannot write", errno)
    }

    private func message(_ what: String, _ error: Int32) -> String {
        message(what, reason: String(cString: strerror(error)))
    }

    private func message(_ what: String, reason: String) -> String {
        "\(what) \(decodeCString(path)): \(reason)"
    }
}

/// Whether something other than a regular file is at `path` (a FIFO, socket, device, folder):
/// files the engine thread must not open, because opening or reading or writing them can block.
/// stat() itself does not block on them.
func existsAndIsNotRegular(_ path: [CChar]) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFREG
}
