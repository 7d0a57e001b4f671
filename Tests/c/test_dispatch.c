/*
 * test_dispatch.c: a dispatch-mode queue driven from the main thread.
 *
 *   1. A poll() loop on rq_queue_get_fd calling rq_queue_dispatch: every callback runs on the main
 *      thread, inside the dispatch call; the descriptor is readable only while callbacks are
 *      pending (readable => dispatch runs at least one; all dispatched => poll(0) says not
 *      readable); a completion adds a follow-up request; calls that would wait for the running
 *      callback return RQ_ERR_WOULD_DEADLOCK.
 *   2. max_callbacks: three pending completions are run one per call, the descriptor staying
 *      readable until the last.
 *   3. rq_queue_wait_idle runs the callbacks on the calling thread.
 *   4. rq_queue_free runs the remaining completion (cancelled) on the calling thread, inside it.
 *
 *   test_dispatch BASE_URL
 */
#include "rqtest.h"

#include <poll.h>
#include <pthread.h>

enum inside { INSIDE_NOTHING, INSIDE_DISPATCH, INSIDE_WAIT_IDLE, INSIDE_FREE };

static const char *base;
static pthread_t main_thread;
static rq_queue *queue;
static int fd = -1;
static enum inside inside = INSIDE_NOTHING; /* only the main thread touches it */
static int completions;

struct req {
    const char *path;
    size_t want_size;
    char id[32];
    int done;
    int status;
    rq_outcome outcome;
    size_t size;
    char message[256];
};

static struct req reqs[] = {
    {.path = "/bytes?n=1000", .want_size = 1000},
    {.path = "/delay?s=0.2", .want_size = 2},
    {.path = "/status/404", .want_size = 10},
    {.path = "/redirect/1", .want_size = 10},
    {.path = "/bytes?n=7", .want_size = 7}, /* the follow-up, added by the first completion */
};
#define N_REQS (sizeof reqs / sizeof *reqs)

/* 1 if the queue's descriptor is readable within timeout_ms. */
static int readable(int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
    }
    CHECK(n >= 0, "poll failed: %s", strerror(errno));
    CHECK(!(p.revents & (POLLERR | POLLNVAL)), "poll reports revents 0x%x on the queue's fd", p.revents);
    return n == 1 && (p.revents & POLLIN);
}

static void on_done(void *context, rq_request *request, const rq_response *response);

static rq_request *add(struct req *r, const char *id) {
    snprintf(r->id, sizeof r->id, "%s", id);
    char *url = rqt_url(base, "%s%cid=%s", r->path, strchr(r->path, '?') ? '&' : '?', id);
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_done, r, NULL));
    CHECK_OK(rq_add(queue, request));
    free(url);
    return request;
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct req *r = context;
    CHECK(pthread_equal(pthread_self(), main_thread), "%s: dispatch-mode callback off the main thread",
          r->id);
    CHECK(inside != INSIDE_NOTHING, "%s: callback outside dispatch, wait_idle and free", r->id);
    if (inside != INSIDE_FREE) {
        CHECK_RC(rq_queue_dispatch(queue, 0, NULL), RQ_ERR_WOULD_DEADLOCK);
        CHECK_RC(rq_queue_wait_idle(queue, 0), RQ_ERR_WOULD_DEADLOCK);
        CHECK_RC(rq_queue_free(queue), RQ_ERR_WOULD_DEADLOCK);
    }
    rq_request_state state = RQ_STATE_NEW;
    CHECK_OK(rq_request_get_state(request, &state));
    CHECK(state == RQ_STATE_COMPLETED, "%s: state %d in its completion", r->id, (int)state);

    rq_response_body(response, &r->size);
    r->status = rq_response_status(response);
    r->outcome = rq_response_outcome(response);
    snprintf(r->message, sizeof r->message, "%s", rq_response_error_message(response));
    r->done++;
    completions++;

    if (r == &reqs[0]) {
        /* API calls from inside a callback: add a follow-up request. */
        rq_request *next = add(&reqs[4], "d1-follow-up");
        CHECK_OK(rq_request_free(next));
    }
}

static void test_poll_loop(void) {
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &queue));
    CHECK_OK(rq_queue_get_fd(queue, &fd));
    CHECK(fd >= 0, "rq_queue_get_fd gave %d", fd);
    CHECK(!readable(0), "the fd of a new queue is readable");

    for (size_t i = 0; i < 4; i++) {
        char id[32];
        snprintf(id, sizeof id, "d1-%zu", i);
        CHECK_OK(rq_request_free(add(&reqs[i], id)));
    }

    size_t total_ran = 0, wakeups = 0;
    while (completions < (int)N_REQS) {
        CHECK(readable((int)(WATCHDOG_SECONDS * 1000)), "no callback pending for %.0f s (%d of %zu completions)",
              WATCHDOG_SECONDS, completions, N_REQS);
        size_t ran = 0;
        inside = INSIDE_DISPATCH;
        CHECK_OK(rq_queue_dispatch(queue, 0, &ran));
        inside = INSIDE_NOTHING;
        CHECK(ran >= 1, "the fd was readable but rq_queue_dispatch ran no callback");
        total_ran += ran;
        wakeups++;
    }
    CHECK(total_ran == N_REQS, "%zu callbacks ran for %zu requests", total_ran, N_REQS);

    /* Everything completed and was dispatched: nothing is pending, so the fd must not be readable. */
    CHECK(!readable(0), "the fd is readable with no callback pending");
    size_t ran = 99;
    CHECK_OK(rq_queue_dispatch(queue, 0, &ran));
    CHECK(ran == 0, "dispatch with nothing pending ran %zu callbacks", ran);
    CHECK_OK(rq_queue_dispatch(queue, 0, NULL)); /* out_ran may be NULL */
    size_t count = 99;
    CHECK_OK(rq_queue_count(queue, &count));
    CHECK(count == 0, "count %zu after all completions", count);

    for (size_t i = 0; i < N_REQS; i++) {
        struct req *r = &reqs[i];
        int want_status = i == 2 ? 404 : 200;
        rq_outcome want_outcome = i == 2 ? RQ_OUTCOME_HTTP_STATUS : RQ_OUTCOME_OK;
        CHECK(r->done == 1, "%s (%s): %d completions", r->id, r->path, r->done);
        CHECK(r->status == want_status && r->outcome == want_outcome && r->size == r->want_size,
              "%s (%s): status %d, outcome %s, %zu bytes (%s)", r->id, r->path, r->status,
              rq_outcome_str((int)r->outcome), r->size, r->message);
    }
    char *log = rqt_get(base, "/_/log");
    CHECK(rqt_log_count_id(log, "d1-follow-up") == 1, "the follow-up reached the server %d times",
          rqt_log_count_id(log, "d1-follow-up"));
    free(log);
    printf("poll loop: %zu callbacks in %zu wakeups, all on the main thread\n", total_ran, wakeups);
}

static void test_max_callbacks(void) {
    static struct req three[3] = {{.path = "/bytes?n=1", .want_size = 1},
                                  {.path = "/bytes?n=2", .want_size = 2},
                                  {.path = "/bytes?n=3", .want_size = 3}};
    rq_request *handles[3];
    int before = completions;
    for (size_t i = 0; i < 3; i++) {
        char id[32];
        snprintf(id, sizeof id, "d2-%zu", i);
        handles[i] = add(&three[i], id);
    }
    for (size_t i = 0; i < 3; i++) {
        rq_request_state state = RQ_STATE_NEW;
        WAIT_FOR(rq_request_get_state(handles[i], &state) == RQ_OK && state == RQ_STATE_COMPLETED,
                 "request %zu never completed (state %d)", i, (int)state);
    }
    CHECK(completions == before, "callbacks ran without a dispatch call");
    /* All three completions are pending now; the engine hands them over within a millisecond
     * (it batches them), and from then on the fd stays readable until the last one ran. */
    CHECK(readable(5000), "the fd did not become readable with 3 callbacks pending");
    for (int left = 3; left > 0; left--) {
        CHECK(readable(0), "the fd is not readable with %d callbacks pending", left);
        size_t ran = 0;
        inside = INSIDE_DISPATCH;
        CHECK_OK(rq_queue_dispatch(queue, 1, &ran));
        inside = INSIDE_NOTHING;
        CHECK(ran == 1, "dispatch with max_callbacks 1 ran %zu callbacks", ran);
    }
    CHECK(!readable(0), "the fd is readable after the last pending callback ran");
    CHECK(completions == before + 3, "%d completions for 3 requests", completions - before);
    for (size_t i = 0; i < 3; i++) {
        CHECK(three[i].done == 1 && three[i].size == three[i].want_size, "%s: %d completions, %zu bytes",
              three[i].id, three[i].done, three[i].size);
        CHECK_OK(rq_request_free(handles[i]));
    }
    printf("max_callbacks: one callback per call, fd readable until the last\n");
}

static void test_wait_idle(void) {
    static struct req two[2] = {{.path = "/bytes?n=20", .want_size = 20},
                                {.path = "/delay?s=0.1", .want_size = 2}};
    int before = completions;
    CHECK_OK(rq_request_free(add(&two[0], "d3-0")));
    CHECK_OK(rq_request_free(add(&two[1], "d3-1")));
    inside = INSIDE_WAIT_IDLE;
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    inside = INSIDE_NOTHING;
    CHECK(completions == before + 2 && two[0].done == 1 && two[1].done == 1,
          "rq_queue_wait_idle returned after %d of 2 callbacks", completions - before);
    CHECK(!readable(0), "the fd is readable after rq_queue_wait_idle");
    printf("wait_idle: callbacks ran on the calling thread\n");
}

static int server_logged(const char *id) {
    char *log = rqt_get(base, "/_/log");
    int n = rqt_log_count_id(log, id);
    free(log);
    return n;
}

static void test_free(void) {
    static struct req stalled = {.path = "/stall?s=30", .want_size = 0};
    int before = completions;
    CHECK_OK(rq_request_free(add(&stalled, "d4-stalled")));
    WAIT_FOR(server_logged("d4-stalled") == 1, "the server never received the stalled request");
    inside = INSIDE_FREE;
    CHECK_OK(rq_queue_free(queue));
    inside = INSIDE_NOTHING;
    CHECK(completions == before + 1 && stalled.done == 1,
          "rq_queue_free returned after %d of 1 completions", completions - before);
    CHECK(stalled.outcome == RQ_OUTCOME_CANCELLED && strstr(stalled.message, "the queue was freed"),
          "request of a freed queue: outcome %s, message \"%s\"", rq_outcome_str((int)stalled.outcome),
          stalled.message);
    printf("free: the cancelled completion ran inside rq_queue_free, on the calling thread\n");
}

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    main_thread = pthread_self();
    test_poll_loop();
    test_max_callbacks();
    test_wait_idle();
    test_free();
    printf("test_dispatch: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
