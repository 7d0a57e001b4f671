/*
 * resources.c: the library never takes its host down when the system is short of something.
 *
 *   files    Nothing on the engine thread may block: an output file that is a FIFO (with or without
 *            a reader), a device, a folder, or a CA file that is a FIFO, ends that request with
 *            RQ_OUTCOME_FILE_ERROR (RQ_OUTCOME_TLS for the CA file) saying "not a regular file",
 *            while the other requests of the queue go on and their timeouts fire, and
 *            rq_queue_free returns.
 *   threads  A shortage of threads is an error code, and only while it lasts (run in a child
 *            process that, as root, becomes an unprivileged user of its own with a low
 *            RLIMIT_NPROC and uses up its threads): rq_queue_new and rq_request_start give RQ_ERR_SYSTEM and
 *            rq_queue_default() NULL; an existing queue still completes its requests; once the
 *            threads are back, the same calls succeed.
 *   descriptors  The same for file descriptors (a child under a low RLIMIT_NOFILE): a dispatch
 *            queue (which needs one) is RQ_ERR_SYSTEM only while none is left; a request of an
 *            existing queue that cannot open its connection completes with a failure outcome.
 *   memory   Running out of memory is the outcome of the request that needed it (run in a child
 *            process under RLIMIT_AS, 16 MiB above what it uses): of 32 bodies of 8 MiB received
 *            at once, those that do not fit end with an outcome whose message says "out of memory"
 *            (and so does a body of 512 MiB), the process lives on, and the same queue completes
 *            the next request.
 *
 *   dns      A host name whose resolution never ends does not block the engine: a request
 *            waiting for it is cancelled at once, a timeout fires, other requests complete, and
 *            rq_queue_free returns (run in a child process that, as root, gets a mount namespace
 *            of its own where /etc/resolv.conf names a local DNS server that never answers;
 *            skipped, and said so, without root).
 *
 *   resources [--only files|threads|descriptors|memory|dns] --tmp DIR BASE_URL
 *
 * The children are this program again (`--child NAME`), started before the parent uses the
 * library. Prints "resources: N checks passed" at the end.
 */
#define _GNU_SOURCE /* setgroups, unshare */
#include "rel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ---- running requests and waiting for them with a watchdog ---------------------------------- */

struct done {
    atomic_int count;
    rq_outcome outcome;
    int status;
    size_t size;
    char message[512];
    const rq_response *kept;  /* retained, when `keep` is set */
    int keep;
};

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct done *d = context;
    (void)request;
    d->outcome = rq_response_outcome(response);
    d->status = rq_response_status(response);
    rq_response_body(response, &d->size);
    snprintf(d->message, sizeof d->message, "%s", rq_response_error_message(response));
    if (d->keep)
        d->kept = rq_response_retain(response);
    atomic_fetch_add(&d->count, 1);
}

static rq_request *make(const char *base, const char *path, struct done *d) {
    rq_request *r;
    char *url = rqt_url(base, "%s", path);
    CHECK_OK(rq_request_new(url, &r));
    free(url);
    memset(d, 0, sizeof *d);
    CHECK_OK(rq_request_set_completion(r, on_done, d, NULL));
    return r;
}

/* Waits for one completion; `what` names it when it does not come (a blocked engine). */
static void wait_done(struct done *d, const char *what) {
    double deadline = rqt_now() + 20;
    while (atomic_load(&d->count) == 0) {
        if (rqt_now() > deadline)
            FAIL("%s: no completion after 20 s (the engine thread is blocked?)", what);
        rqt_sleep(0.002);
    }
    CHECK(atomic_load(&d->count) == 1, "%s: %d completions", what, atomic_load(&d->count));
}

#define EXPECT(d, what, want, text)                                                                \
    CHECK((d)->outcome == (want) && strstr((d)->message, (text)) != NULL,                           \
          "%s: outcome %s, message \"%s\" (expected %s with \"%s\")", what,                        \
          rq_outcome_str((int)(d)->outcome), (d)->message, rq_outcome_str((int)(want)), text)

/* ---- files ---------------------------------------------------------------------------------- */

static void *free_queue(void *queue) {
    CHECK_OK(rq_queue_free(queue));
    return NULL;
}

static void files(const char *base, const char *tmp) {
    char fifo[4096], reader_fifo[4096], ca_fifo[4096], folder[4096];
    snprintf(fifo, sizeof fifo, "%s/no-reader.fifo", tmp);
    snprintf(reader_fifo, sizeof reader_fifo, "%s/with-reader.fifo", tmp);
    snprintf(ca_fifo, sizeof ca_fifo, "%s/ca.fifo", tmp);
    snprintf(folder, sizeof folder, "%s/folder", tmp);
    CHECK(mkfifo(fifo, 0600) == 0 && mkfifo(reader_fifo, 0600) == 0 && mkfifo(ca_fifo, 0600) == 0,
          "mkfifo: %s", strerror(errno));
    CHECK(mkdir(folder, 0700) == 0, "mkdir: %s", strerror(errno));
    int reader = open(reader_fifo, O_RDONLY | O_NONBLOCK);
    CHECK(reader >= 0, "open the FIFO's reader: %s", strerror(errno));

    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 0));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    struct done d_fifo, d_resume, d_reader, d_folder, d_null, d_ca, d_stall, d_ok;
    rq_request *r_fifo = make(base, "/bytes?n=100000", &d_fifo);
    CHECK_OK(rq_request_set_output_file(r_fifo, fifo, 0));
    rq_request *r_resume = make(base, "/bytes?n=100000&ranges=1", &d_resume);
    CHECK_OK(rq_request_set_output_file(r_resume, fifo, 1));
    rq_request *r_reader = make(base, "/bytes?n=100000", &d_reader);
    CHECK_OK(rq_request_set_output_file(r_reader, reader_fifo, 0));
    rq_request *r_folder = make(base, "/bytes?n=100", &d_folder);
    CHECK_OK(rq_request_set_output_file(r_folder, folder, 0));
    rq_request *r_null = make(base, "/bytes?n=100", &d_null);
    CHECK_OK(rq_request_set_output_file(r_null, "/dev/null", 0));
    rq_request *r_ca = make(base, "/bytes?n=100", &d_ca);
    CHECK_OK(rq_request_set_ca_file(r_ca, ca_fifo));
    /* Timeouts keep firing and other requests complete while those above fail. */
    rq_request *r_stall = make(base, "/stall?s=30", &d_stall);
    CHECK_OK(rq_request_set_idle_timeout(r_stall, 0.3));
    rq_request *r_ok = make(base, "/bytes?n=100", &d_ok);
    rq_request *all[] = {r_fifo, r_resume, r_reader, r_folder, r_null, r_ca, r_stall, r_ok};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        CHECK_OK(rq_add(q, all[i]));
        CHECK_OK(rq_request_free(all[i]));
    }
    wait_done(&d_fifo, "output file: a FIFO without a reader");
    EXPECT(&d_fifo, "FIFO without a reader", RQ_OUTCOME_FILE_ERROR, "not a regular file");
    CHECK(strstr(d_fifo.message, fifo) != NULL, "the message names the file: %s", d_fifo.message);
    wait_done(&d_resume, "output file with resume: a FIFO");
    EXPECT(&d_resume, "FIFO with resume", RQ_OUTCOME_FILE_ERROR, "not a regular file");
    wait_done(&d_reader, "output file: a FIFO with a reader");
    EXPECT(&d_reader, "FIFO with a reader", RQ_OUTCOME_FILE_ERROR, "not a regular file");
    char byte;
    CHECK(read(reader, &byte, 1) <= 0, "the FIFO's reader got data");
    wait_done(&d_folder, "output file: a folder");
    EXPECT(&d_folder, "a folder", RQ_OUTCOME_FILE_ERROR, "not a regular file");
    wait_done(&d_null, "output file: /dev/null");
    EXPECT(&d_null, "/dev/null", RQ_OUTCOME_FILE_ERROR, "not a regular file");
    wait_done(&d_ca, "CA file: a FIFO");
    EXPECT(&d_ca, "CA file FIFO", RQ_OUTCOME_TLS, "not a regular file");
    wait_done(&d_stall, "idle timeout beside the FIFOs");
    CHECK(d_stall.outcome == RQ_OUTCOME_TIMEOUT, "stalled request: %s", rq_outcome_str((int)d_stall.outcome));
    wait_done(&d_ok, "a plain request beside the FIFOs");
    CHECK(d_ok.outcome == RQ_OUTCOME_OK && d_ok.size == 100, "plain request: %s, %zu bytes",
          rq_outcome_str((int)d_ok.outcome), d_ok.size);

    /* And a request stuck on a FIFO could not keep rq_queue_free from returning. */
    struct done d_last;
    rq_request *r_last = make(base, "/bytes?n=100000", &d_last);
    CHECK_OK(rq_request_set_output_file(r_last, fifo, 0));
    CHECK_OK(rq_add(q, r_last));
    CHECK_OK(rq_request_free(r_last));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_queue, q) == 0, "pthread_create");
    wait_done(&d_last, "rq_queue_free with a FIFO output file");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    close(reader);
    printf("files: FIFOs (with and without reader, with resume), a folder, /dev/null and a FIFO CA file refused; "
           "timeouts and other requests went on\n");
}

/* ---- threads (child) ------------------------------------------------------------------------ */

static int hold_pipe[2];

static void *holder(void *arg) {
    char c;
    (void)arg;
    while (read(hold_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

static void threads_child(const char *base) {
    /* Root is not held by RLIMIT_NPROC: become an unprivileged user first, one of its own (the
     * limit counts every thread of the user, system-wide, so that runs at once must not share
     * one). */
    if (geteuid() == 0) {
        uid_t uid = (uid_t)(200000 + getpid() % 100000);
        CHECK(setgroups(0, NULL) == 0 && setgid(uid) == 0 && setuid(uid) == 0, "cannot become user %u: %s",
              (unsigned)uid, strerror(errno));
    }
    struct rlimit limit = {64, 64};
    CHECK(setrlimit(RLIMIT_NPROC, &limit) == 0, "setrlimit(RLIMIT_NPROC): %s", strerror(errno));
    CHECK(pipe(hold_pipe) == 0, "pipe");

    /* A queue made while threads are available keeps working during the shortage. */
    rq_queue *early;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &early));

    static pthread_t held[4096];
    int count = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    while (count < 4096 && pthread_create(&held[count], &attr, holder, NULL) == 0)
        count++;
    CHECK(count > 0 && count < 4096, "%d threads made before the limit", count);

    rq_queue *q = (rq_queue *)1;
    CHECK_RC(rq_queue_new(RQ_DELIVERY_THREADED, &q), RQ_ERR_SYSTEM);
    CHECK(q == (rq_queue *)1, "rq_queue_new wrote its out-parameter on failure");
    CHECK(rq_queue_default() == NULL, "rq_queue_default() without threads");
    struct done d_start, d_early;
    rq_request *r_start = make(base, "/bytes?n=10", &d_start);
    CHECK_RC(rq_request_start(r_start), RQ_ERR_SYSTEM);
    rq_request *r_early = make(base, "/bytes?n=10", &d_early);
    CHECK_OK(rq_add(early, r_early));
    CHECK_OK(rq_request_free(r_early));
    wait_done(&d_early, "a request of a queue made before the shortage");
    CHECK(d_early.outcome == RQ_OUTCOME_OK, "during the shortage: %s (%s)", rq_outcome_str((int)d_early.outcome),
          d_early.message);
    /* Retried while the shortage lasts: still an error, never a crash. */
    CHECK(rq_queue_default() == NULL, "rq_queue_default() without threads, again");
    CHECK_RC(rq_request_start(r_start), RQ_ERR_SYSTEM);

    /* The threads come back. */
    for (int i = 0; i < count; i++)
        CHECK(write(hold_pipe[1], "x", 1) == 1, "write");
    for (int i = 0; i < count; i++)
        pthread_join(held[i], NULL);

    CHECK(rq_queue_default() != NULL, "rq_queue_default() is still NULL once threads are available again");
    CHECK_OK(rq_request_start(r_start));
    CHECK_OK(rq_request_free(r_start));
    wait_done(&d_start, "rq_request_start after the shortage");
    CHECK(d_start.outcome == RQ_OUTCOME_OK, "after the shortage: %s", rq_outcome_str((int)d_start.outcome));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    struct done d_new;
    rq_request *r_new = make(base, "/bytes?n=10", &d_new);
    CHECK_OK(rq_add(q, r_new));
    CHECK_OK(rq_request_free(r_new));
    wait_done(&d_new, "a request of a queue made after the shortage");
    CHECK(d_new.outcome == RQ_OUTCOME_OK, "new queue after the shortage: %s", rq_outcome_str((int)d_new.outcome));
    CHECK_OK(rq_queue_free(q));
    CHECK_OK(rq_queue_free(early));
    printf("threads: %d threads held; RQ_ERR_SYSTEM / NULL during the shortage, success after it\n", count);
}

/* ---- descriptors (child) -------------------------------------------------------------------- */

static void descriptors_child(const char *base) {
    struct rlimit limit = {64, 64};
    CHECK(setrlimit(RLIMIT_NOFILE, &limit) == 0, "setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    rq_queue *early;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &early));
    int held[64], count = 0;
    while (count < 64 && (held[count] = dup(0)) >= 0)
        count++;
    CHECK(count > 0 && count < 64, "%d descriptors taken before the limit", count);

    /* A dispatch queue needs its descriptor. */
    rq_queue *q = (rq_queue *)1;
    CHECK_RC(rq_queue_new(RQ_DELIVERY_DISPATCH, &q), RQ_ERR_SYSTEM);
    CHECK(q == (rq_queue *)1, "rq_queue_new wrote its out-parameter on failure");
    /* A threaded queue may do without (libcurl then has no wake-up pair): an error, or a queue
     * that works once descriptors are back. */
    rq_queue *threaded = NULL;
    int rc = rq_queue_new(RQ_DELIVERY_THREADED, &threaded);
    CHECK(rc == RQ_OK || rc == RQ_ERR_SYSTEM, "rq_queue_new without descriptors: %s", rq_result_str(rc));
    /* A queue that exists cannot open a connection: an outcome, not a crash or a hang. */
    struct done d_early, d_after;
    rq_request *r_early = make(base, "/bytes?n=10", &d_early);
    CHECK_OK(rq_add(early, r_early));
    CHECK_OK(rq_request_free(r_early));
    double deadline = rqt_now() + 20;
    while (atomic_load(&d_early.count) == 0 && rqt_now() < deadline)
        (void)rq_queue_wait_idle(early, 0.01);
    wait_done(&d_early, "a request while no descriptor is left");
    CHECK(d_early.outcome != RQ_OUTCOME_OK, "a connection without a descriptor: %s",
          rq_outcome_str((int)d_early.outcome));
    char kept[600];
    snprintf(kept, sizeof kept, "%s: %s", rq_outcome_str((int)d_early.outcome), d_early.message);

    while (count > 0)
        close(held[--count]);
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &q));
    rq_queue *queues[] = {q, early, threaded};
    for (size_t i = 0; i < sizeof queues / sizeof queues[0]; i++) {
        if (!queues[i])
            continue;
        rq_request *r = make(base, "/bytes?n=10", &d_after);
        CHECK_OK(rq_add(queues[i], r));
        CHECK_OK(rq_request_free(r));
        CHECK_OK(rq_queue_wait_idle(queues[i], WATCHDOG_SECONDS));
        wait_done(&d_after, "a request once descriptors are back");
        CHECK(d_after.outcome == RQ_OUTCOME_OK, "after the shortage: %s", rq_outcome_str((int)d_after.outcome));
        CHECK_OK(rq_queue_free(queues[i]));
    }
    printf("descriptors: a dispatch queue is RQ_ERR_SYSTEM during the shortage, a request of an existing queue "
           "ended as \"%s\"; every queue works after it\n", kept);
}

/* ---- memory (child) ------------------------------------------------------------------------- */

static void memory_child(const char *base) {
    enum { BIG = 32 };
    rq_queue *q;
    struct done d, big[BIG];
    rq_request *r;
    /* A new queue whose threads have not allocated anything yet. */
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 0));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    /* 16 MiB of address space left: 32 bodies of 8 MiB at once, each response kept (with what it
     * received) until the end, as a host holding on to its data does; then one of 512 MiB. */
    rlim_t room = (rlim_t)rel_status_kib("VmSize") * 1024 + (rlim_t)16 * 1024 * 1024;
    struct rlimit limit = {room, room};
    CHECK(setrlimit(RLIMIT_AS, &limit) == 0, "setrlimit(RLIMIT_AS): %s", strerror(errno));
    for (int i = 0; i < BIG; i++) {
        r = make(base, "/bytes?n=8388608", &big[i]);
        big[i].keep = 1;
        CHECK_OK(rq_add(q, r));
        CHECK_OK(rq_request_free(r));
    }
    int ok = 0, short_of_memory = 0;
    for (int i = 0; i < BIG; i++) {
        wait_done(&big[i], "32 bodies of 8 MiB at once");
        if (big[i].outcome == RQ_OUTCOME_OK) {
            CHECK(big[i].size == 8388608, "a whole body of %zu bytes", big[i].size);
            ok++;
        } else {
            CHECK(strstr(big[i].message, "out of memory") != NULL, "8 MiB body: %s, \"%s\"",
                  rq_outcome_str((int)big[i].outcome), big[i].message);
            short_of_memory++;
        }
    }
    CHECK(short_of_memory > 0, "32 bodies of 8 MiB fitted in 16 MiB");
    r = make(base, "/bytes?n=536870912", &d);
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    wait_done(&d, "a body larger than the memory left");
    CHECK(d.outcome != RQ_OUTCOME_OK && strstr(d.message, "out of memory") != NULL,
          "a body larger than the memory left: %s, \"%s\"", rq_outcome_str((int)d.outcome), d.message);
    char kept[600];
    snprintf(kept, sizeof kept, "%s: %s", rq_outcome_str((int)d.outcome), d.message);

    /* The queue goes on. */
    r = make(base, "/bytes?n=1000", &d);
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    wait_done(&d, "the next request");
    CHECK(d.outcome == RQ_OUTCOME_OK && d.size == 1000, "after running out of memory: %s",
          rq_outcome_str((int)d.outcome));
    CHECK_OK(rq_queue_free(q));
    for (int i = 0; i < BIG; i++)
        rq_response_release(big[i].kept);
    printf("memory: 16 MiB of address space left: of 32 bodies of 8 MiB at once %d completed, %d ended out of "
           "memory; a 512 MiB body ended as \"%s\"; the queue went on\n", ok, short_of_memory, kept);
}

/* ---- dns (child) ---------------------------------------------------------------------------- */

static void dns_child(const char *base, const char *tmp) {
    if (geteuid() != 0) {
        printf("dns: skipped (needs root for a mount namespace)\n");
        return;
    }
    /* A DNS server on 127.0.0.1 that receives and never answers. */
    int server = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in address;
    socklen_t length = sizeof address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(server >= 0 && bind(server, (struct sockaddr *)&address, sizeof address) == 0 &&
              getsockname(server, (struct sockaddr *)&address, &length) == 0,
          "UDP socket: %s", strerror(errno));
    /* glibc's resolver asks port 53 only: the silent server needs port 53 of its own address. */
    close(server);
    server = socket(AF_INET, SOCK_DGRAM, 0);
    address.sin_addr.s_addr = inet_addr("127.0.0.53");
    address.sin_port = htons(53);
    if (bind(server, (struct sockaddr *)&address, sizeof address) != 0) {
        address.sin_addr.s_addr = inet_addr("127.0.0.1");
        CHECK(bind(server, (struct sockaddr *)&address, sizeof address) == 0, "bind port 53: %s", strerror(errno));
    }
    char conf[4096];
    snprintf(conf, sizeof conf, "%s/resolv.conf", tmp);
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL, "%s: %s", conf, strerror(errno));
    fprintf(f, "nameserver %s\noptions timeout:30 attempts:1\n", inet_ntoa(address.sin_addr));
    fclose(f);
    /* This process only: a private copy of the mounts, then our resolv.conf over the system's. */
    CHECK(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "mount private: %s", strerror(errno));
    CHECK(mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) == 0, "bind resolv.conf: %s", strerror(errno));

    const char *port = strrchr(base, ':');
    CHECK(port != NULL, "no port in %s", base);
    char url[256];
    snprintf(url, sizeof url, "http://rq-silent-dns.test%s/bytes?n=10", port);
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 0));
    struct done d_cancelled, d_timeout, d_stall, d_ok, d_freed;
    rq_request *r_cancelled, *r_timeout, *r_freed;
    CHECK_OK(rq_request_new(url, &r_cancelled));
    memset(&d_cancelled, 0, sizeof d_cancelled);
    CHECK_OK(rq_request_set_completion(r_cancelled, on_done, &d_cancelled, NULL));
    CHECK_OK(rq_add(q, r_cancelled));
    /* Its resolution has started when the engine runs the transfer: wait for that. */
    rq_request_state state = RQ_STATE_NEW;
    while (rq_request_get_state(r_cancelled, &state) == RQ_OK && state != RQ_STATE_RUNNING)
        rqt_sleep(0.001);
    rqt_sleep(0.2);
    CHECK_OK(rq_cancel(r_cancelled));
    CHECK_OK(rq_request_free(r_cancelled));
    /* While that resolution goes on (30 s), the engine serves the others. */
    CHECK_OK(rq_request_new(url, &r_timeout));
    memset(&d_timeout, 0, sizeof d_timeout);
    CHECK_OK(rq_request_set_completion(r_timeout, on_done, &d_timeout, NULL));
    CHECK_OK(rq_request_set_timeout(r_timeout, 0.3));
    CHECK_OK(rq_add(q, r_timeout));
    CHECK_OK(rq_request_free(r_timeout));
    rq_request *r_stall = make(base, "/stall?s=30", &d_stall);
    CHECK_OK(rq_request_set_idle_timeout(r_stall, 0.3));
    CHECK_OK(rq_add(q, r_stall));
    CHECK_OK(rq_request_free(r_stall));
    rq_request *r_ok = make(base, "/bytes?n=100", &d_ok);
    CHECK_OK(rq_add(q, r_ok));
    CHECK_OK(rq_request_free(r_ok));
    wait_done(&d_cancelled, "a request cancelled while its host name resolves");
    CHECK(d_cancelled.outcome == RQ_OUTCOME_CANCELLED, "cancelled: %s", rq_outcome_str((int)d_cancelled.outcome));
    wait_done(&d_timeout, "a total timeout while the host name resolves");
    CHECK(d_timeout.outcome == RQ_OUTCOME_TIMEOUT, "timeout: %s (%s)", rq_outcome_str((int)d_timeout.outcome),
          d_timeout.message);
    wait_done(&d_stall, "an idle timeout beside resolutions that never end");
    CHECK(d_stall.outcome == RQ_OUTCOME_TIMEOUT, "stall: %s", rq_outcome_str((int)d_stall.outcome));
    wait_done(&d_ok, "a plain request beside resolutions that never end");
    CHECK(d_ok.outcome == RQ_OUTCOME_OK, "plain request: %s", rq_outcome_str((int)d_ok.outcome));
    /* And freeing the queue does not wait for a resolution either. */
    CHECK_OK(rq_request_new(url, &r_freed));
    memset(&d_freed, 0, sizeof d_freed);
    CHECK_OK(rq_request_set_completion(r_freed, on_done, &d_freed, NULL));
    CHECK_OK(rq_add(q, r_freed));
    CHECK_OK(rq_request_free(r_freed));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, free_queue, q) == 0, "pthread_create");
    wait_done(&d_freed, "rq_queue_free while a host name resolves");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    close(server);
    printf("dns: a resolution that never ends blocked nothing: cancel, timeouts, other requests and rq_queue_free "
           "went on\n");
}

/* ---- the parent ----------------------------------------------------------------------------- */

static void run_child(const char *self, const char *name, const char *base, const char *tmp) {
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        execl(self, self, "--child", name, "--tmp", tmp, base, (char *)NULL);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s child: %s %d", name,
          WIFSIGNALED(status) ? "killed by signal" : "exit status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

int main(int argc, char **argv) {
    const char *only = NULL, *tmp = NULL, *child = NULL, *base = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--tmp") == 0 && i + 1 < argc)
            tmp = argv[++i];
        else if (strcmp(argv[i], "--child") == 0 && i + 1 < argc)
            child = argv[++i];
        else
            base = argv[i];
    }
    if (!base || (!child && !tmp)) {
        fprintf(stderr, "usage: resources [--only files|threads|descriptors|memory|dns] --tmp DIR BASE_URL\n");
        return 2;
    }
    if (child) {
        if (strcmp(child, "threads") == 0)
            threads_child(base);
        else if (strcmp(child, "memory") == 0)
            memory_child(base);
        else if (strcmp(child, "dns") == 0)
            dns_child(base, tmp);
        else if (strcmp(child, "descriptors") == 0)
            descriptors_child(base);
        else
            return 2;
        return 0;
    }
    /* The children first: they must start from a process that has not used the library. */
    if (!only || strcmp(only, "threads") == 0)
        run_child("/proc/self/exe", "threads", base, tmp);
    if (!only || strcmp(only, "descriptors") == 0)
        run_child("/proc/self/exe", "descriptors", base, tmp);
    if (!only || strcmp(only, "memory") == 0)
        run_child("/proc/self/exe", "memory", base, tmp);
    if (!only || strcmp(only, "dns") == 0)
        run_child("/proc/self/exe", "dns", base, tmp);
    if (!only || strcmp(only, "files") == 0)
        files(base, tmp);
    printf("resources: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
