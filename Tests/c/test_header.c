/*
 * test_header.c: what the header's opening sections promise beyond single functions.
 *
 *   1. rq_last_error_message: "" before the thread's first failure; after each failed call, the
 *      function's name and the exact reason (which byte of the URL, which header, which argument
 *      and its value); unchanged by calls that succeed; per thread (another thread's failures do
 *      not change it, and its pointer stays valid while that thread fails again).
 *   2. rq_queue_set_context / rq_queue_get_context: NULL by default, the pointer set, NULL again.
 *   3. Fork, with queues busy (a request stalled on the server in a threaded queue, another in a
 *      dispatch queue, the default queue and rq_request_start in use): in the child every call on
 *      an inherited queue or its requests returns RQ_ERR_QUEUE_CLOSED with the library's message;
 *      rq_queue_free releases an inherited queue at once (RQ_OK, then RQ_ERR_INVALID_HANDLE);
 *      a request made in the parent and never added can be added to a new queue; new queues, the
 *      default queue (a new one) and rq_request_start work. The parent's requests go on: its
 *      connection is still open after the child exits. Then many forks while other threads keep
 *      the library's locks busy: each child must still use the library (a lock left taken by a
 *      thread that does not exist in the child would hang it: CTest's timeout catches that).
 *
 *   test_header BASE_URL
 */
#include "rqtest.h"

#include <pthread.h>
#include <sys/wait.h>

static const char *base;

#define CHECK_MESSAGE(...)                                                                         \
    do {                                                                                           \
        const char *rqt_message_ = rq_last_error_message();                                        \
        const char *rqt_parts_[] = {__VA_ARGS__, NULL};                                            \
        for (int rqt_i_ = 0; rqt_parts_[rqt_i_]; rqt_i_++)                                         \
            CHECK(strstr(rqt_message_, rqt_parts_[rqt_i_]) != NULL, "message \"%s\" lacks \"%s\"", \
                  rqt_message_, rqt_parts_[rqt_i_]);                                               \
    } while (0)

/* ---- 1. the per-thread message ---------------------------------------------------------------- */

static void *other_thread(void *arg) {
    const char **seen = arg;
    seen[0] = strdup(rq_last_error_message()); /* a new thread has none */
    rq_request *r;
    CHECK_RC(rq_request_new("ftp://h/", &r), RQ_ERR_UNSUPPORTED_SCHEME);
    seen[1] = strdup(rq_last_error_message());
    return NULL;
}

static void test_message(void) {
    rq_request *r;
    CHECK(strcmp(rq_last_error_message(), "") == 0, "a thread's message is \"\" before its first failure");

    CHECK_RC(rq_request_new("http://h/a b", &r), RQ_ERR_INVALID_URL);
    CHECK(strncmp(rq_last_error_message(), "rq_request_new: ", 16) == 0, "starts with the function: %s",
          rq_last_error_message());
    CHECK_MESSAGE("byte 10 of the URL is a space (0x20)", "%20");
    CHECK_RC(rq_request_new("http://h/caf\xc3\xa9", &r), RQ_ERR_INVALID_URL);
    CHECK_MESSAGE("byte 12", "non-ASCII byte (0xC3)");
    CHECK_RC(rq_request_new("ftp://h/", &r), RQ_ERR_UNSUPPORTED_SCHEME);
    CHECK_MESSAGE("\"ftp\"", "only http and https");
    CHECK_RC(rq_request_new("http://h:0/", &r), RQ_ERR_INVALID_URL);
    CHECK_MESSAGE("port 0");
    CHECK_RC(rq_request_new("example.com/x", &r), RQ_ERR_INVALID_URL);
    CHECK_MESSAGE("cannot be in a scheme", "http://");
    CHECK_RC(rq_request_new(NULL, &r), RQ_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE("rq_request_new: url is NULL");

    CHECK_OK(rq_request_new("http://h/", &r));
    CHECK_MESSAGE("rq_request_new: url is NULL"); /* a success leaves it as it was */
    CHECK_RC(rq_request_set_header(r, "X-A", "a\nb"), RQ_ERR_INVALID_HEADER);
    CHECK_MESSAGE("rq_request_set_header: ", "header \"X-A\"", "line feed (LF, 0x0A) at byte 1");
    CHECK_RC(rq_request_set_header(r, "Bad Name", "v"), RQ_ERR_INVALID_HEADER);
    CHECK_MESSAGE("byte 3 of the header name is a space");
    CHECK_RC(rq_request_set_method(r, "GE(T"), RQ_ERR_INVALID_METHOD);
    CHECK_MESSAGE("rq_request_set_method: ", "byte 2 of the method is \"(\" (0x28)");
    CHECK_RC(rq_request_set_priority(r, (rq_priority)7), RQ_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rq_request_set_priority: priority is 7", "-2", "2");
    CHECK_RC(rq_request_set_timeout(r, -1), RQ_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rq_request_set_timeout: seconds is -1");
    CHECK_RC(rq_request_set_retry_backoff(r, 2, 10, 1.5), RQ_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("jitter is 1.5");
    int statuses[] = {500, 302};
    CHECK_RC(rq_request_set_retry_statuses(r, statuses, 2), RQ_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("statuses[1] is 302");
    CHECK_RC(rq_queue_count(NULL, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE("rq_queue_count: the queue is NULL");
    CHECK_RC(rq_queue_count((rq_queue *)r, NULL), RQ_ERR_INVALID_HANDLE);
    CHECK_MESSAGE("is a request handle, not a queue");

    /* Per thread: another thread starts with "" and its failure leaves this thread's message. */
    const char *before = rq_last_error_message();
    char *copy = strdup(before);
    const char *seen[2] = {NULL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, seen) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(strcmp(seen[0], "") == 0, "a new thread saw \"%s\"", seen[0]);
    CHECK(strstr(seen[1], "rq_request_new: the scheme is \"ftp\"") != NULL, "other thread: %s", seen[1]);
    CHECK(rq_last_error_message() == before && strcmp(before, copy) == 0, "this thread's message changed");
    free(copy);
    free((void *)seen[0]);
    free((void *)seen[1]);
    CHECK_OK(rq_request_free(r));
}

/* ---- 2. the queue's context pointer ---------------------------------------------------------- */

static void test_context(void) {
    rq_queue *q;
    void *out = &out;
    int mine;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &q));
    CHECK_OK(rq_queue_get_context(q, &out));
    CHECK(out == NULL, "the context is NULL by default");
    CHECK_OK(rq_queue_set_context(q, &mine));
    CHECK_OK(rq_queue_get_context(q, &out));
    CHECK(out == &mine, "the context set is the context read");
    CHECK_RC(rq_queue_get_context(q, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_MESSAGE("rq_queue_get_context: out_context is NULL");
    CHECK_OK(rq_queue_set_context(q, NULL));
    CHECK_OK(rq_queue_get_context(q, &out));
    CHECK(out == NULL, "NULL removes it");
    CHECK_OK(rq_queue_set_context(rq_queue_default(), &mine));
    CHECK_OK(rq_queue_get_context(rq_queue_default(), &out));
    CHECK(out == &mine, "the default queue has one too");
    CHECK_OK(rq_queue_set_context(rq_queue_default(), NULL));
    CHECK_OK(rq_queue_free(q));
    CHECK_RC(rq_queue_set_context(q, &mine), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_queue_get_context(q, &out), RQ_ERR_INVALID_HANDLE);
}

#ifndef RQT_TSAN
/* ---- 3. fork ----------------------------------------------------------------------------------- */

struct done {
    atomic_int count;
    atomic_int outcome;
    atomic_int status;
};

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct done *d = context;
    (void)request;
    atomic_store(&d->outcome, (int)rq_response_outcome(response));
    atomic_store(&d->status, rq_response_status(response));
    atomic_fetch_add(&d->count, 1);
}

static rq_request *new_request(const char *path, struct done *d) {
    rq_request *r;
    char *url = rqt_url(base, "%s", path);
    CHECK_OK(rq_request_new(url, &r));
    free(url);
    CHECK_OK(rq_request_set_completion(r, on_done, d, NULL));
    return r;
}

/* Fetches path on a new queue of this process; returns the status. */
static int fetch_on_new_queue(const char *path, rq_delivery delivery) {
    struct done d = {0, -1, 0};
    rq_queue *q;
    CHECK_OK(rq_queue_new(delivery, &q));
    rq_request *r = new_request(path, &d);
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
    CHECK(atomic_load(&d.count) == 1 && atomic_load(&d.outcome) == RQ_OUTCOME_OK, "fetch %s: outcome %d", path,
          atomic_load(&d.outcome));
    return atomic_load(&d.status);
}

/* The child of test_fork: exits 0 when everything held, or fails (exit 1) with a message. */
static void fork_child(rq_queue *threaded, rq_queue *dispatch, rq_queue *old_default, rq_request *running,
                       rq_request *waiting, rq_request *started, rq_request *fresh, struct done *fresh_done) {
    size_t count;
    int fd;
    rq_request *r;

    /* Every call on an inherited queue or its requests: RQ_ERR_QUEUE_CLOSED, with the reason. */
    CHECK_RC(rq_queue_count(threaded, &count), RQ_ERR_QUEUE_CLOSED);
    CHECK_MESSAGE("rq_queue_count: ", "fork()", "rq_queue_free");
    CHECK_RC(rq_queue_set_max_concurrent(threaded, 4), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_queue_wait_idle(threaded, 0), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_queue_cancel_all(threaded), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_queue_dispatch(dispatch, 0, NULL), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_queue_get_fd(dispatch, &fd), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_queue_count(old_default, &count), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_cancel(running), RQ_ERR_QUEUE_CLOSED);
    CHECK_MESSAGE("rq_cancel: ", "parent process");
    CHECK_RC(rq_request_set_priority(waiting, RQ_PRIORITY_HIGH), RQ_ERR_QUEUE_CLOSED);
    CHECK_RC(rq_cancel(started), RQ_ERR_QUEUE_CLOSED);
    CHECK_OK(rq_request_new("http://127.0.0.1:1/", &r));
    CHECK_RC(rq_add(threaded, r), RQ_ERR_QUEUE_CLOSED);

    /* The default queue is a new one; rq_request_start works; new queues work. */
    rq_queue *def = rq_queue_default();
    CHECK(def != NULL && def != old_default, "the child has its own default queue");
    CHECK_OK(rq_queue_count(def, &count));
    CHECK(fetch_on_new_queue("/bytes?n=3&id=fork-child-threaded", RQ_DELIVERY_THREADED) == 200, "threaded");
    CHECK(fetch_on_new_queue("/bytes?n=3&id=fork-child-dispatch", RQ_DELIVERY_DISPATCH) == 200, "dispatch");
    struct done d = {0, -1, 0};
    rq_request *s = new_request("/bytes?n=2&id=fork-child-start", &d);
    CHECK_OK(rq_request_start(s));
    CHECK_OK(rq_request_free(s));
    WAIT_FOR(atomic_load(&d.count) == 1, "the started request completes in the child");
    CHECK(atomic_load(&d.status) == 200, "started: %d", atomic_load(&d.status));
    /* A request the parent made and never added is the child's to use. */
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_add(q, fresh));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK(atomic_load(&fresh_done->count) == 1 && atomic_load(&fresh_done->status) == 200, "fresh request");
    CHECK_OK(rq_queue_free(q));
    CHECK_RC(rq_add(threaded, r), RQ_ERR_QUEUE_CLOSED);
    CHECK_OK(rq_request_free(r));

    /* rq_queue_free releases inherited queues at once, without their threads. */
    CHECK_OK(rq_request_free(running));
    CHECK_OK(rq_queue_free(threaded));
    CHECK_RC(rq_queue_free(threaded), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_queue_count(threaded, &count), RQ_ERR_INVALID_HANDLE);
    CHECK_OK(rq_queue_free(dispatch));
    CHECK_OK(rq_queue_free(old_default));
    exit(0);
}

static void test_fork(void) {
    struct done running_done = {0, -1, 0}, waiting_done = {0, -1, 0}, started_done = {0, -1, 0},
                dispatch_done = {0, -1, 0}, fresh_done = {0, -1, 0};
    rq_queue *threaded, *dispatch;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &threaded));
    CHECK_OK(rq_queue_set_max_concurrent(threaded, 1));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &dispatch));
    rq_queue *old_default = rq_queue_default();
    CHECK(old_default != NULL, "default queue");
    rq_request *running = new_request("/stall?s=60&id=fork-running", &running_done);
    rq_request *waiting = new_request("/bytes?n=1&id=fork-waiting", &waiting_done);
    rq_request *started = new_request("/stall?s=60&id=fork-started", &started_done);
    rq_request *in_dispatch = new_request("/stall?s=60&id=fork-dispatch", &dispatch_done);
    rq_request *fresh = new_request("/bytes?n=4&id=fork-fresh", &fresh_done);
    CHECK_OK(rq_add(threaded, running));
    CHECK_OK(rq_add(threaded, waiting));
    CHECK_OK(rq_request_start(started));
    CHECK_OK(rq_add(dispatch, in_dispatch));
    char *log;
    do {
        log = rqt_get(base, "/_/log");
        int seen = rqt_log_count_id(log, "fork-running") + rqt_log_count_id(log, "fork-started") +
                   rqt_log_count_id(log, "fork-dispatch");
        free(log);
        if (seen == 3)
            break;
        rqt_sleep(0.01);
    } while (1);

    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        fork_child(threaded, dispatch, old_default, running, waiting, started, fresh, &fresh_done);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);

    /* The parent's queues go on: the stalled requests are still running, their connections open. */
    size_t count;
    CHECK_OK(rq_queue_count(threaded, &count));
    CHECK(count == 2, "the parent's queue still holds its 2 requests, not %zu", count);
    log = rqt_get(base, "/_/log");
    CHECK(rqt_log_count_id(log, "fork-child-threaded") == 1 && rqt_log_count_id(log, "fork-child-dispatch") == 1 &&
              rqt_log_count_id(log, "fork-child-start") == 1 && rqt_log_count_id(log, "fork-fresh") == 1,
          "the child's requests reached the server");
    CHECK(rqt_log_count_id(log, "fork-waiting") == 0, "the parent's waiting request still waits");
    free(log);
    CHECK(atomic_load(&fresh_done.count) == 0, "the child's completion ran in the child only");
    CHECK_OK(rq_cancel(running));
    WAIT_FOR(atomic_load(&waiting_done.count) == 1, "the waiting request runs once the running one is cancelled");
    CHECK(atomic_load(&running_done.outcome) == RQ_OUTCOME_CANCELLED && atomic_load(&waiting_done.status) == 200,
          "parent outcomes");
    CHECK_OK(rq_cancel(started));
    WAIT_FOR(atomic_load(&started_done.count) == 1, "the started request completes");
    CHECK_OK(rq_queue_free(dispatch));
    CHECK(atomic_load(&dispatch_done.outcome) == RQ_OUTCOME_CANCELLED, "dispatch request cancelled by free");
    CHECK_OK(rq_queue_free(threaded));
    CHECK_OK(rq_request_free(running));
    CHECK_OK(rq_request_free(waiting));
    CHECK_OK(rq_request_free(started));
    CHECK_OK(rq_request_free(in_dispatch));
    CHECK_OK(rq_request_free(fresh));
}

/* Threads that keep the library's locks busy (handle table, request and response locks, the
 * default queue) while the main thread forks. */
static atomic_int stop_busy;

static void *busy_thread(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_busy)) {
        rq_request *r;
        rq_request_state state;
        CHECK_OK(rq_request_new("http://127.0.0.1:1/x", &r));
        CHECK_OK(rq_request_set_header(r, "X-A", "b"));
        CHECK_OK(rq_request_get_state(r, &state));
        CHECK(rq_queue_default() != NULL, "default queue");
        CHECK_RC(rq_request_set_method(r, "B AD"), RQ_ERR_INVALID_METHOD);
        CHECK_OK(rq_request_free(r));
    }
    return NULL;
}

static void test_fork_under_load(void) {
    enum { THREADS = 3, FORKS = 100 };
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, busy_thread, NULL) == 0, "pthread_create");
    for (int i = 0; i < FORKS; i++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            rq_request *r;
            CHECK_OK(rq_request_new("http://127.0.0.1:1/y", &r));
            CHECK_OK(rq_request_set_header(r, "X-B", "c"));
            CHECK_RC(rq_request_set_method(r, "B AD"), RQ_ERR_INVALID_METHOD);
            CHECK_MESSAGE("byte 1 of the method is a space");
            CHECK(rq_queue_default() != NULL, "the child's default queue");
            CHECK_OK(rq_request_free(r));
            if (i % 10 == 0)
                CHECK(fetch_on_new_queue("/bytes?n=1", RQ_DELIVERY_THREADED) == 200, "fetch in child %d", i);
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed (status %d)", i, status);
    }
    atomic_store(&stop_busy, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
}

#endif /* RQT_TSAN */

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    test_message();
    test_context();
#ifndef RQT_TSAN
    test_fork();
    test_fork_under_load();
#else
    printf("test_header: fork checks skipped under ThreadSanitizer (no threads in a forked child)\n");
#endif
    printf("test_header: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
