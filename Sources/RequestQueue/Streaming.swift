import CCurl
import Glibc
import Synchronization

// Streaming of response bodies: to a callback (chunks delivered like progress events, with flow
// control) or to a file written on the engine thread. See "Streaming" in include/requestqueue.h.

/// Flow control of a body streamed to a callback, and the chunk buffers it recycles. It counts
/// the memory of the chunks that the engine thread filled and the delivery has not given back yet
/// (the capacity of each, not only the bytes in it: a chunk holding a few bytes costs its whole
/// buffer). When that reaches `highWater`, the engine pauses the transfer (libcurl stops reading
/// the socket), and the delivery asks for it to resume once it dropped to `lowWater`. Shared by
/// the attempts of one request.
// @unchecked: `resumeWanted`, `spare` and `recycling` are only touched under `lock`, a pthread
// mutex (not Synchronization's Mutex, which ThreadSanitizer cannot see on Linux: the swift-tsan
// step would report its accesses as races). `pending` is atomic: it is read without the lock
// (`backlogged`), and decreased under the lock only (`delivered`), where `resumeWanted` is
// checked against it, so a resume is never missed.
final class StreamFlow: @unchecked Sendable {
    /// Memory of undelivered chunks at which a transfer pauses.
    static let highWater = 1 << 20
    /// Memory of undelivered chunks at or below which a paused transfer resumes.
    static let lowWater = highWater / 2
    /// Delivered chunks kept for reuse while an attempt streams: as many as flow control lets
    /// wait for delivery, and two more (the one being filled, the one being delivered).
    static let spareLimit = highWater / StreamChunk.capacity + 2

    private let lock = Lock()
    private let pending = Atomic<Int>(0)
    private var resumeWanted = false
    /// Delivered full-size chunks, for the engine to fill again; kept only while `recycling`.
    private var spare: [StreamChunk] = []
    private var recycling = false

    enum Take {
        case chunk(StreamChunk)
        /// The undelivered memory reached `highWater`: the caller pauses its transfer, and a
        /// later `delivered` returns true when it should resume.
        case full
        case outOfMemory
    }

    /// Engine thread: an empty full-size chunk for the piece of the body that starts at `offset`
    /// (a delivered one when there is one), unless the undelivered memory reached `highWater`
    /// (and not `beyondLimit`).
    func takeChunk(offset: UInt64, beyondLimit: Bool) -> Take {
        let taken: (Bool, StreamChunk?) = lock.withLock {
            if !beyondLimit, pending.load(ordering: .relaxed) >= StreamFlow.highWater {
                resumeWanted = true
                return (false, nil)
            }
            recycling = true
            pending.add(StreamChunk.capacity, ordering: .relaxed)
            return (true, spare.popLast())
        }
        guard taken.0 else { return .full }
        guard let chunk = taken.1 ?? StreamChunk(capacity: StreamChunk.capacity) else {
            _ = delivered(nil, capacity: StreamChunk.capacity)
            return .outOfMemory
        }
        chunk.reset(offset: offset)
        return .chunk(chunk)
    }

    /// Whether the undelivered memory reached half the pause threshold: the delivery should run
    /// now, before the transfer has to pause.
    var backlogged: Bool { pending.load(ordering: .relaxed) >= StreamFlow.lowWater }

    /// Engine thread: a chunk of its own size holding the bytes of `chunk` (a small piece: so that
    /// the full-size buffer can go on filling); nil when memory ran out.
    func copy(of chunk: StreamChunk) -> StreamChunk? {
        guard let small = StreamChunk(capacity: chunk.count) else { return nil }
        small.reset(offset: chunk.offset)
        _ = small.fill(chunk.bytes, chunk.count)
        pending.add(small.capacity, ordering: .relaxed)
        return small
    }

    /// `chunk` was delivered, skipped, or never posted: its memory is free (kept for reuse when
    /// full-size). Returns true when a paused transfer should now resume.
    func delivered(_ chunk: StreamChunk) -> Bool { delivered(chunk, capacity: chunk.capacity) }

    private func delivered(_ chunk: StreamChunk?, capacity: Int) -> Bool {
        lock.withLock {
            let left = pending.subtract(capacity, ordering: .relaxed).newValue
            if let chunk, recycling, capacity == StreamChunk.capacity, spare.count < StreamFlow.spareLimit {
                spare.append(chunk)
            }
            if resumeWanted, left <= StreamFlow.lowWater {
                resumeWanted = false
                return true
            }
            return false
        }
    }

    /// Engine thread: the attempt stopped streaming; the spare chunks are freed, and so are
    /// those delivered from now on (until an attempt streams again).
    func stopRecycling() {
        let dropped: [StreamChunk] = lock.withLock {
            recycling = false
            defer { spare = [] }
            return spare
        }
        _ = dropped  // freed here, outside the lock
    }
}

/// A piece of a streamed body in a malloc'ed buffer: the engine thread fills it with what libcurl
/// passed during one turn of its loop (libcurl passes at most 16 KiB at a time, from reads of up
/// to `capacity` bytes, and reads while the socket has data), then posts it to the delivery.
/// Full-size chunks are recycled through the request's `StreamFlow`.
// @unchecked Sendable: written only by the engine thread, before it posts the chunk or after it
// took it back from the flow's spares; the delivering thread only reads it between the post and
// its return to the flow. The queue's monitor (the post) and the flow's lock (the return) order
// these accesses.
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
    /// Bytes filled. (`Transfer.bodyData` copies into the free room directly and sets it.)
    var count = 0
    /// Position of the first byte in the body of its attempt.
    private(set) var offset: UInt64 = 0

    /// `capacity` > 0; nil when memory ran out.
    init?(capacity: Int) {
        guard capacity > 0, let raw = malloc(capacity) else { return nil }
        bytes = raw.assumingMemoryBound(to: UInt8.self)
        self.capacity = capacity
    }

    deinit { free(bytes) }

    func reset(offset: UInt64) {
        count = 0
        self.offset = offset
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
