/* System calls that the Glibc module does not import. */
#ifndef CCURL_SYSCALLS_H
#define CCURL_SYSCALLS_H

#include <stddef.h>
#include <sys/eventfd.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <semaphore.h>
#include <time.h>
#include <malloc.h> /* malloc_usable_size */
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

extern char **environ;

/* Whether the environment has a variable http_proxy, https_proxy or all_proxy, in any case (the
 * names libcurl 7.88 reads for an http or https transfer are among them). Read for every turn of
 * the engine that starts a transfer, as libcurl would read it: one test of the first letter of
 * most names. `c | 0x29` is 0x69 exactly for c in "`ahiAHI@" (0x20 folds the case, 0x09 is 'h' ^ 'a'),
 * so one compare passes the names starting with h or a, and a few others, to the full checks. */
static inline int ccurl_environment_names_proxy(void) {
    char **entry = environ;
    if (!entry)
        return 0;
    for (const char *name; (name = *entry) != NULL; entry++) {
        if (((unsigned char)name[0] | 0x29) != 0x69)
            continue;
        char first = (char)(name[0] | 0x20);
        if (first == 'h' && (name[1] | 0x20) == 't' &&
            (strncasecmp(name, "http_proxy=", 11) == 0 || strncasecmp(name, "https_proxy=", 12) == 0))
            return 1;
        if (first == 'a' && (name[1] | 0x20) == 'l' && strncasecmp(name, "all_proxy=", 10) == 0)
            return 1;
    }
    return 0;
}

/* Names the calling thread (at most 15 bytes show), as `top -H` and gdb see it; prctl is variadic. */
static inline void ccurl_name_thread(const char *name) { (void)prctl(PR_SET_NAME, name, 0, 0, 0); }

/* Asks the processor to load the cache line holding `address` for a write, without waiting for it
 * (a hint: never faults, whatever the address). */
static inline void ccurl_prefetch(const void *address) { __builtin_prefetch(address, 1, 3); }

/* A non-blocking, close-on-exec eventfd, or -1. */
static inline int ccurl_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/* glibc 2.30 and later; declared here because <semaphore.h> shows it only to _GNU_SOURCE. */
extern int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime);

/* Waits for a post of `sem` for at most `ms` milliseconds on the monotonic clock (a change of the
 * wall clock neither shortens nor prolongs it). 0 after a post, else -1 (timed out). */
static inline int ccurl_sem_wait_ms(sem_t *sem, long ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    for (;;) {
        if (sem_clockwait(sem, CLOCK_MONOTONIC, &deadline) == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Tells the processor that the caller spins waiting for another thread (x86 `pause`, Arm
 * `yield`): the sibling hyperthread gets the core's resources meanwhile, and the loop does not
 * flood the memory system. */
static inline void ccurl_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/* The counters of bytes acknowledged (sent) and received on the TCP socket `fd` (struct
 * tcp_info, Linux 4.1 and later), TLS records and partial header lines included; 0 when known.
 * One non-blocking getsockopt. */
static inline int ccurl_tcp_counters(int fd, unsigned long long *sent, unsigned long long *got) {
    /* glibc's struct tcp_info stops at tcpi_total_retrans; the kernel's (linux/tcp.h, which
     * cannot be included beside glibc's) goes on with the __u64 fields tcpi_pacing_rate,
     * tcpi_max_pacing_rate, tcpi_bytes_acked and tcpi_bytes_received (Linux 4.1), 8-aligned. */
    enum { acked = (offsetof(struct tcp_info, tcpi_total_retrans) + 4 + 7) / 8 * 8 + 16, received = acked + 8 };
    unsigned long long buffer[32];
    socklen_t length = sizeof buffer;
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, buffer, &length) != 0 || length < received + 8)
        return -1;
    memcpy(sent, (const char *)buffer + acked, 8);
    memcpy(got, (const char *)buffer + received, 8);
    return 0;
}

/* Bytes received plus bytes sent and acknowledged on the TCP socket `fd`; -1 when unknown. */
static inline long long ccurl_tcp_bytes(int fd) {
    unsigned long long sent, got;
    if (ccurl_tcp_counters(fd, &sent, &got) != 0)
        return -1;
    unsigned long long sum = sent + got;
    return sum < sent || sum > 0x7fffffffffffffffULL ? 0x7fffffffffffffffLL : (long long)sum;
}

/* The local port of socket `fd`, or -1. */
static inline int ccurl_local_port(int fd) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&address, &length) != 0)
        return -1;
    if (address.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&address)->sin_port);
    if (address.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    return -1;
}

/* Whether something waits to be read on socket `fd` (bytes, the peer's close, an error): 0 when
 * nothing does. Peeks without taking anything and without waiting. */
static inline int ccurl_socket_has_input(int fd) {
    char byte;
    if (recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0)
        return 1;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}


/* Bytes the program has read from the TCP socket `fd` so far: those received less those waiting
 * to be read (FIONREAD); -1 when unknown (not a TCP socket). Two non-blocking system calls. */
static inline long long ccurl_tcp_bytes_read(int fd) {
    unsigned long long sent, got;
    int waiting = 0;
    if (ccurl_tcp_counters(fd, &sent, &got) != 0 || ioctl(fd, FIONREAD, &waiting) != 0 || waiting < 0)
        return -1;
    if (got > 0x7fffffffffffffffULL)
        got = 0x7fffffffffffffffULL;
    return (long long)got > waiting ? (long long)got - waiting : 0;
}

/* What the descriptor `fd` stands for (its inode number, unique among the open sockets), to tell
 * a socket from a later one given the same number; 0 when unknown. */
static inline unsigned long long ccurl_file_identity(int fd) {
    struct stat status;
    return fd >= 0 && fstat(fd, &status) == 0 ? (unsigned long long)status.st_ino : 0;
}

/* Resets the TCP connection of socket `fd` at once and keeps the descriptor: a connect() to
 * AF_UNSPEC disconnects it (the kernel sends a reset and drops what waits to be read). What
 * reads the descriptor then gets an error (ECONNRESET, then ENOTCONN), a poll sees it ready, and
 * the close of its owner closes it as before. 0 when done. */
static inline int ccurl_tcp_reset(int fd) {
    struct sockaddr unspecified;
    memset(&unspecified, 0, sizeof unspecified);
    unspecified.sa_family = AF_UNSPEC;
    return connect(fd, &unspecified, sizeof unspecified);
}

#endif
