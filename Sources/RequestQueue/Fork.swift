import Glibc

/// fork() (see "Fork" in include/requestqueue.h). A child has only the thread that called fork():
/// the queues it inherits have lost their engine and delivery threads, and any lock another thread
/// held at that instant would stay taken forever. So around fork() the library takes the locks
/// that a child still uses (the handle table, the shared locks of requests and responses, the
/// default queues' locks), and releases them on both sides; in the child it also forgets the
/// default queues and counts one more process generation. A queue remembers the generation it
/// was made in: one from an earlier generation is inherited, and every call on it but
/// `rq_queue_free` is refused without touching its own locks (which a vanished thread may hold).
enum ForkGuard {
    /// Something holding locks that a child needs free. `rank` orders them: lower ranks are taken
    /// first (the order the code itself nests them in), and released last.
    protocol Participant: AnyObject {
        var forkRank: Int { get }
        func forkPrepare()
        func forkParent()
        func forkChild()
    }

    /// The process generation: 0 in the process that loaded the library, one more in each child
    /// forked since. Written only by the child handler, while the child has a single thread.
    nonisolated(unsafe) private(set) static var generation: UInt = 0

    private static let lock = Lock()
    // nonisolated(unsafe): under `lock` (a Lock: the fork handlers hold it from prepare to parent/child).
    nonisolated(unsafe) private static var participants: [Participant] = []
    nonisolated(unsafe) private static var installed = false
    /// Inherited queues freed in this child: kept, never deinitialised (their memory may hold
    /// locks taken by threads that do not exist here, and libcurl state shared with the parent's
    /// connections); the handle table no longer knows them.
    nonisolated(unsafe) private static var abandoned: [AnyObject] = [] // under `lock`

    /// Takes part in the fork handlers from now on (installs them on first use).
    static func register(_ participant: Participant) {
        lock.withLock {
            if !installed {
                installed = true
                pthread_atfork({ ForkGuard.prepare() }, { ForkGuard.parent() }, { ForkGuard.child() })
            }
            participants.append(participant)
            participants.sort { $0.forkRank < $1.forkRank }
        }
    }

    private static func prepare() {
        lock.acquire()
        for p in participants { p.forkPrepare() }
    }

    private static func parent() {
        for p in participants.reversed() { p.forkParent() }
        lock.release()
    }

    private static func child() {
        generation &+= 1
        for p in participants.reversed() { p.forkChild() }
        lock.release()
    }

    /// Keeps an inherited queue's objects alive for good; false if it was already abandoned.
    static func abandon(_ object: AnyObject) -> Bool {
        lock.withLock {
            guard !abandoned.contains(where: { $0 === object }) else { return false }
            abandoned.append(object)
            return true
        }
    }
}

/// Ranks of the participants (see `ForkGuard.Participant`).
extension ForkGuard {
    static let rankProcessQueue = 0
    static let rankStripes = 1
    static let rankHandles = 2
    static let rankPerformWatch = 3
}
