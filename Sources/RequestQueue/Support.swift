import CCurl
import Glibc

/// A mutex with a condition variable (pthread), for state shared between the caller's threads,
/// the engine thread and the delivery thread.
// @unchecked Sendable: it is the protection (a pthread mutex and condition); its pointers never change.
final class Monitor: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        initAdaptiveMutex(mutex)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits for a broadcast, with the lock held; `deadline` is a monotonic time in seconds, nil
    /// for no limit. Returns false when the deadline passed.
    func wait(until deadline: Double?) -> Bool {
        guard let deadline else {
            pthread_cond_wait(condition, mutex)
            return true
        }
        if deadline <= Clock.now() { return false }
        var ts = timespec()
        ts.tv_sec = Int(deadline)
        ts.tv_nsec = Int((deadline - Double(ts.tv_sec)) * 1e9)
        return pthread_cond_timedwait(condition, mutex, &ts) != ETIMEDOUT
    }

    func broadcast() { pthread_cond_broadcast(condition) }
}

/// Wakes a thread that waits for it (a POSIX semaphore): `post` makes a system call only when a
/// thread is blocked in `wait`, and `wait` only when no post came before it. (A thread woken from
/// a condition variable takes its mutex back marked as contended, so that its next unlock always
/// makes a futex call: a third system call per hand-over.)
// @unchecked Sendable: it is the protection (a semaphore); its pointer never changes.
final class Wakeup: @unchecked Sendable {
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init() { sem_init(semaphore, 0, 0) }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func post() { sem_post(semaphore) }

    /// Returns after a post (its own, or one made before).
    func wait() { while sem_wait(semaphore) != 0 {} }

    /// Returns after a post, or after `milliseconds` (monotonic clock) without one; whether a
    /// post came.
    @discardableResult
    func wait(milliseconds: Int32) -> Bool { ccurl_sem_wait_ms(semaphore, Int(max(0, milliseconds))) == 0 }

    /// Takes a post if one comes within `seconds`, looking for it without a system call (and
    /// without blocking: a post made meanwhile makes none either, no thread being blocked);
    /// false when none came. For a wake-up expected within microseconds, where blocking and
    /// being woken cost two futex calls and ~15 us of scheduling on this kind of machine.
    func spin(seconds: Double) -> Bool {
        if sem_trywait(semaphore) == 0 { return true }
        let deadline = Clock.now() + seconds
        while true {
            // About 3 us per round on this machine (a pause is ~100 ns): the clock is read once
            // per round.
            for _ in 0..<32 {
                ccurl_spin_pause()
                if sem_trywait(semaphore) == 0 { return true }
            }
            if Clock.now() >= deadline { return false }
        }
    }
}

/// Bounded, adaptive spinning before a blocking wait on a `Wakeup`, where the post is expected
/// within microseconds: a spin takes it without a system call on either side, where blocking and
/// being woken cost two futex calls and ~15 us (measured on a 2-core VM: a semaphore ping-pong
/// round trip 28 us, a spinning one 3-5 us). A spin lasts `seconds` at most; after n spins in a
/// row that saw no post, the next 2^n - 1 waits do not spin (n up to 6): a wait that is seldom
/// short soon costs 1 spin in 64 at most. Owned by the one thread that waits.
struct SpinningWait {
    private var misses = 0
    private var skipped = 0
    let seconds: Double

    init(seconds: Double) { self.seconds = seconds }

    /// Spins on `wakeup` unless recent spins missed; whether it took a post.
    mutating func spin(_ wakeup: Wakeup) -> Bool {
        if skipped > 0 {
            skipped -= 1
            return false
        }
        if wakeup.spin(seconds: seconds) {
            misses = 0
            return true
        }
        misses = min(misses + 1, 6)
        skipped = (1 << misses) - 1
        return false
    }
}

/// The library's locks are held for short sections by two or three threads at once (a caller, the
/// engine, the delivering thread): a thread that finds one taken spins a little (glibc's adaptive
/// mutex) before it sleeps, which saves the two futex calls of a sleep and a wake-up when the
/// holder is about to release it (on another core).
private func initAdaptiveMutex(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) {
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
    pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
}

/// Starts a joinable thread running `body`; nil when the system refuses.
func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let created = pthread_create(&thread, nil, { box in
        guard let box else { return nil }
        Unmanaged<Box>.fromOpaque(box).takeRetainedValue().body()
        return nil
    }, box)
    if created != 0 {
        Unmanaged<Box>.fromOpaque(box).release()
        return nil
    }
    return thread
}

/// A plain pthread mutex, for state that is never waited on.
// @unchecked Sendable: it is the protection (a pthread mutex; held across the fork handlers, which
// a Mutex cannot be).
final class Lock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { initAdaptiveMutex(mutex) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// For sections that do not nest in a closure: the fork handlers (ForkGuard), which take locks
    /// in one handler and release them in another, and the dispatch descriptor's write
    /// (`Queue.signalOwedEvents`), taken under the monitor and released after it.
    func acquire() { pthread_mutex_lock(mutex) }
    func release() { pthread_mutex_unlock(mutex) }
}

/// A fixed set of locks shared by many small objects (requests, responses), so that each one
/// needs no mutex of its own. Only for short sections that take no other lock of the same set.
/// A child process created by fork() finds them all free (ForkGuard).
// @unchecked Sendable: the mutexes are the protection; the pointer and count never change.
final class LockStripes: @unchecked Sendable, ForkGuard.Participant {
    /// The mutexes, allocated once: a stripe is handed out as its mutex's address
    /// (`StripedLock`), with no reference to count at each use (an object per stripe cost a retain
    /// and a release for every lock taken, on objects that every thread shares).
    private let mutexes: UnsafeMutablePointer<pthread_mutex_t>
    private let count: Int

    /// `count` is a power of two (keys are masked with `count - 1`).
    init(count: Int) {
        self.count = count
        mutexes = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: count)
        for index in 0..<count { initAdaptiveMutex(mutexes + index) }
        ForkGuard.register(self)
    }

    deinit {
        for index in 0..<count { pthread_mutex_destroy(mutexes + index) }
        mutexes.deallocate()
    }

    /// The lock of `key`, valid while these stripes live (the users' are static: for ever).
    @inline(__always)
    func lock(for key: Int) -> StripedLock { StripedLock(mutex: mutexes + (key & (count - 1))) }

    var forkRank: Int { ForkGuard.rankStripes }
    func forkPrepare() { for index in 0..<count { pthread_mutex_lock(mutexes + index) } }
    func forkParent() { for index in (0..<count).reversed() { pthread_mutex_unlock(mutexes + index) } }
    func forkChild() { forkParent() }
}

/// One lock of a `LockStripes`.
struct StripedLock {
    fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

enum Clock {
    /// Monotonic time in seconds.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// The queue whose callback the current thread is running, to refuse calls that would wait for
/// that very callback.
enum CallbackContext {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    static var currentQueue: UInt {
        get { UInt(bitPattern: pthread_getspecific(key)) }
        set { pthread_setspecific(key, UnsafeRawPointer(bitPattern: newValue)) }
    }
}

/// A growable byte buffer in malloc'ed memory, whose address is stable once it stops growing, so
/// that C callers can borrow it. Allocation failure is reported, never a trap.
// @unchecked Sendable: a transfer's buffers stay on the engine thread.
final class ByteBuffer: @unchecked Sendable {
    private(set) var base: UnsafeMutablePointer<UInt8>?
    private(set) var count = 0
    private var capacity = 0

    init() {}

    deinit { free(base) }

    /// Appends bytes; returns false when memory ran out (the buffer is unchanged).
    func append(_ bytes: UnsafeRawPointer, _ size: Int) -> Bool {
        if size == 0 { return true }
        let needed = count + size
        // The first piece is often the whole body: take its size, then double.
        if needed > capacity, !grow(to: Swift.max(capacity * 2, needed)) { return false }
        guard let base else { return false }
        (base + count).update(from: bytes.assumingMemoryBound(to: UInt8.self), count: size)
        count = needed
        return true
    }

    /// Makes room for `size` bytes in all, when there is less (a body whose length is announced:
    /// one allocation instead of a realloc, and a copy, at each doubling). False when memory ran
    /// out; the buffer is unchanged then.
    func reserve(_ size: Int) -> Bool {
        size <= capacity || grow(to: size)
    }

    private func grow(to newCapacity: Int) -> Bool {
        // A large buffer must not take the last of the memory: the small allocations of the
        // rest of the process would then fail, and in Swift code that is a crash.
        if newCapacity >= MemoryReserve.largeBuffer, !MemoryReserve.remains(after: newCapacity) { return false }
        guard let grown = realloc(base, newCapacity) else { return false }
        base = grown.assumingMemoryBound(to: UInt8.self)
        capacity = newCapacity
        return true
    }

    var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

    /// Empties the buffer, keeping its memory for what comes next.
    func removeAll() { count = 0 }

    /// Drops bytes from the end while `drop` says so.
    func removeLast(while drop: (UInt8) -> Bool) {
        guard let base else { return }
        while count > 0, drop(base[count - 1]) { count -= 1 }
    }

    /// Hands the memory and its byte count to the caller, who frees it; the buffer is empty after.
    func detach() -> (base: UnsafeMutablePointer<UInt8>?, count: Int) {
        defer {
            base = nil
            count = 0
            capacity = 0
        }
        return (base, count)
    }
}

/// The memory kept free for everything else when large buffers (bodies, header blocks) grow. A
/// failed allocation is a result the library can report for the one request that needed it only
/// when it is large, made in C (malloc): Swift's own small allocations end the process when they
/// fail. So before a large buffer grows, it checks that its new size and a reserve of address
/// space (and of commit charge, under strict overcommit) are still there, and gives up (an
/// out-of-memory outcome for its request) when they are not, leaving that reserve to the small
/// allocations.
enum MemoryReserve {
    /// Buffers at least this large check the reserve when they grow.
    static let largeBuffer = 64 << 10
    static let reserve = 16 << 20

    /// Whether `size` bytes and the reserve could still be mapped now. Under an address-space
    /// limit (RLIMIT_AS), from the limit and the process's size; otherwise probed with a mapping
    /// that is never touched, so it costs no memory. (A probe under such a limit took the reserve
    /// itself for a moment, and another thread's small allocation could fail in that moment: the
    /// reliability suite's memory shortage crashed once in about 25 runs on a loaded machine.)
    static func remains(after size: Int) -> Bool {
        let (total, overflow) = size.addingReportingOverflow(reserve)
        guard !overflow else { return false }
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max { // RLIM_INFINITY
            guard let mapped = mappedBytes() else { return false }
            return limit.rlim_cur >= mapped && limit.rlim_cur - mapped >= UInt(total)
        }
        let probe = mmap(nil, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let probe, UInt(bitPattern: probe) != UInt.max else { return false }
        munmap(probe, total)
        return true
    }

    /// The process's mapped address space in bytes (the first field of /proc/self/statm, in
    /// pages), or nil when it cannot be read.
    private static func mappedBytes() -> UInt? {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var text = (UInt64(0), UInt64(0), UInt64(0), UInt64(0)) // 32 bytes: the first field fits
        let count = withUnsafeMutableBytes(of: &text) { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        var pages: UInt = 0
        let digits: Bool = withUnsafeBytes(of: &text) { bytes in
            var seen = false
            for byte in bytes.prefix(count) {
                guard byte >= 48, byte <= 57 else { break }
                let (times, o1) = pages.multipliedReportingOverflow(by: 10)
                let (plus, o2) = times.addingReportingOverflow(UInt(byte - 48))
                guard !o1, !o2 else { return false }
                pages = plus
                seen = true
            }
            return seen
        }
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        guard digits, pageSize > 0 else { return nil }
        let (bytes, overflow) = pages.multipliedReportingOverflow(by: UInt(pageSize))
        return overflow ? nil : bytes
    }
}

/// Allocates a NUL-terminated copy of `bytes` with malloc (never NULL: an empty string on failure).
func mallocCString<Bytes: Collection>(_ bytes: Bytes) -> UnsafeMutablePointer<CChar> where Bytes.Element == UInt8 {
    guard let raw = malloc(bytes.count + 1) else { return strdup("") ?? UnsafeMutablePointer<CChar>(mutating: emptyCString) }
    let out = raw.assumingMemoryBound(to: UInt8.self)
    var i = 0
    for b in bytes { out[i] = b; i += 1 }
    out[i] = 0
    return raw.assumingMemoryBound(to: CChar.self)
}

/// A static empty C string.
// nonisolated(unsafe): set once at its lazy (thread-safe) initialization; its byte is never written after.
nonisolated(unsafe) let emptyCString: UnsafePointer<CChar> = {
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    p.pointee = 0
    return UnsafePointer(p)
}()

/// A copy of a C string as it is, bytes and terminating NUL (no UTF-8 repair).
typealias CString = [CChar]

func copyCString(_ pointer: UnsafePointer<CChar>) -> CString {
    Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer) + 1))
}

/// The text of a C string copy, up to its NUL (invalid UTF-8 repaired, as `String(cString:)` does).
func decodeCString(_ string: CString) -> String {
    String(decoding: string.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The bytes of a C string, or nil for NULL.
func cStringBytes(_ pointer: UnsafePointer<CChar>?) -> UnsafeBufferPointer<UInt8>? {
    guard let pointer else { return nil }
    return UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
}
