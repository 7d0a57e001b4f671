/*
 * test_threaded.c: a threaded queue against the fixture server.
 *
 *   1. Several requests with max_concurrent 2: outcomes, statuses, body sizes and bytes; an HTTP
 *      error delivers its body; the server never sees more than 2 at once (and does see 2);
 *      callbacks run on the delivery thread, one at a time; calls that would wait for the running
 *      callback return RQ_ERR_WOULD_DEADLOCK.
 *   2. Cancel of a waiting request: exactly one cancelled completion, never sent; then cancel of a
 *      running one, whose connection the server sees closed.
 *   3. rq_queue_free with requests running and waiting: every completion delivered (cancelled,
 *      "the queue was freed") before it returns, none afterwards; rq_add from those callbacks
 *      gives RQ_ERR_QUEUE_CLOSED.
 *   4. Context finalizers: exactly once per request, after the completion; for a request never
 *      added, by rq_request_free; with no completion callback; for rq_request_start.
 *
 *   test_threaded BASE_URL
 */
#include "rqtest.h"

#include <pthread.h>

static const char *base;
static pthread_t main_thread;
static atomic_int callbacks_running;
static atomic_int callbacks_overlapped;

struct item {
    /* what to fetch and what must come back */
    const char *path;
    int want_status;
    rq_outcome want_outcome;
    size_t want_size;
    const char *want_body; /* NULL: the /bytes pattern */
    int want_logged;       /* how many requests the server logs with this id */
    /* what happened */
    char id[32];
    atomic_int completions;
    atomic_int finalized;
    atomic_int finalized_early; /* finalizer ran before the completion */
    int status;
    rq_outcome outcome;
    size_t size;
    int body_ok;
    unsigned attempts;
    char message[256];
    char url[512];
};

static void record(struct item *it, const rq_response *response) {
    size_t size = 12345;
    const uint8_t *body = rq_response_body(response, &size);
    CHECK(body != NULL, "%s: rq_response_body returned NULL", it->id);
    it->status = rq_response_status(response);
    it->outcome = rq_response_outcome(response);
    it->size = size;
    it->body_ok = it->want_body ? size == strlen(it->want_body) && memcmp(body, it->want_body, size) == 0
                                : rqt_is_pattern(body, size);
    it->attempts = rq_response_attempts(response);
    CHECK(rq_response_error_message(response) != NULL, "%s: NULL error message", it->id);
    CHECK(rq_response_url(response) != NULL, "%s: NULL URL", it->id);
    snprintf(it->message, sizeof it->message, "%s", rq_response_error_message(response));
    snprintf(it->url, sizeof it->url, "%s", rq_response_url(response));
}

static void on_item_free(void *context) {
    struct item *it = context;
    if (atomic_load(&it->completions) == 0)
        atomic_fetch_add(&it->finalized_early, 1);
    atomic_fetch_add(&it->finalized, 1);
}

/* ---- 1. outcomes, statuses, sizes ----------------------------------------------------------- */

static rq_queue *queue1;

#define ITEM(p, s, o, n, b, l)                                                                     \
    {.path = (p), .want_status = (s), .want_outcome = (o), .want_size = (n), .want_body = (b),      \
     .want_logged = (l)}

/* The first two take a while, so that the server sees two at once. */
static struct item items1[] = {
    ITEM("/delay?s=0.3", 200, RQ_OUTCOME_OK, 2, "ok", 1),
    ITEM("/bytes?n=100000&delay=0.2", 200, RQ_OUTCOME_OK, 100000, NULL, 1),
    ITEM("/bytes?n=0", 200, RQ_OUTCOME_OK, 0, NULL, 1),
    ITEM("/bytes?n=1", 200, RQ_OUTCOME_OK, 1, NULL, 1),
    ITEM("/bytes?n=70000&chunked=1", 200, RQ_OUTCOME_OK, 70000, NULL, 1),
    ITEM("/bytes?n=300&status=404", 404, RQ_OUTCOME_HTTP_STATUS, 300, NULL, 1),
    ITEM("/status/404", 404, RQ_OUTCOME_HTTP_STATUS, 10, "status 404", 1),
    ITEM("/status/503", 503, RQ_OUTCOME_HTTP_STATUS, 10, "status 503", 1),
    ITEM("/redirect/2", 200, RQ_OUTCOME_OK, 10, "redirected", 3),
};
#define N_ITEMS1 (sizeof items1 / sizeof *items1)

static void on_done1(void *context, rq_request *request, const rq_response *response) {
    struct item *it = context;
    if (atomic_fetch_add(&callbacks_running, 1) != 0)
        atomic_fetch_add(&callbacks_overlapped, 1);
    CHECK(!pthread_equal(pthread_self(), main_thread), "threaded delivery ran a callback on the main thread");
    CHECK(request != NULL, "%s: NULL request in the completion", it->id);

    void *context_back = NULL;
    CHECK_OK(rq_request_get_context(request, &context_back));
    CHECK(context_back == context, "%s: rq_request_get_context gave %p, not %p", it->id, context_back,
          context);
    rq_request_state state = RQ_STATE_NEW;
    CHECK_OK(rq_request_get_state(request, &state));
    CHECK(state == RQ_STATE_COMPLETED, "%s: state %d inside the completion", it->id, (int)state);

    if (it == &items1[0]) {
        /* Calls that would wait for this very callback refuse instead of hanging. */
        CHECK_RC(rq_queue_free(queue1), RQ_ERR_WOULD_DEADLOCK);
        CHECK_RC(rq_queue_wait_idle(queue1, 0), RQ_ERR_WOULD_DEADLOCK);
        CHECK_RC(rq_queue_wait_idle(queue1, -1), RQ_ERR_WOULD_DEADLOCK);
        size_t count = 99;
        CHECK_OK(rq_queue_count(queue1, &count)); /* ordinary calls work */
    }
    record(it, response);
    rqt_sleep(0.005); /* give an overlapping callback, if the library allowed one, time to show */
    atomic_fetch_add(&it->completions, 1);
    atomic_fetch_sub(&callbacks_running, 1);
}

static void add_items(rq_queue *queue, struct item *items, size_t n, const char *prefix,
                      rq_completion_fn fn, const char *group) {
    for (size_t i = 0; i < n; i++) {
        struct item *it = &items[i];
        snprintf(it->id, sizeof it->id, "%s-%zu", prefix, i);
        char *url = rqt_url(base, "%s%cid=%s&group=%s", it->path, strchr(it->path, '?') ? '&' : '?',
                            it->id, group);
        rq_request *request;
        CHECK_OK(rq_request_new(url, &request));
        CHECK_OK(rq_request_set_completion(request, fn, it, on_item_free));
        CHECK_OK(rq_add(queue, request));
        CHECK_OK(rq_request_free(request)); /* the queue keeps its own reference */
        free(url);
    }
}

static void test_outcomes(void) {
    size_t max = 0;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue1));
    CHECK_OK(rq_queue_get_max_concurrent(queue1, &max));
    CHECK(max == 2, "default max_concurrent is %zu, expected 2", max);
    CHECK_OK(rq_queue_set_max_concurrent(queue1, 2));

    add_items(queue1, items1, N_ITEMS1, "t1", on_done1, "t1");
    CHECK_OK(rq_queue_wait_idle(queue1, WATCHDOG_SECONDS));
    size_t count = 99;
    CHECK_OK(rq_queue_count(queue1, &count));
    CHECK(count == 0, "idle queue counts %zu requests", count);

    int ok = 0, http = 0;
    for (size_t i = 0; i < N_ITEMS1; i++) {
        struct item *it = &items1[i];
        CHECK(atomic_load(&it->completions) == 1, "%s (%s): %d completions", it->id, it->path,
              atomic_load(&it->completions));
        CHECK(atomic_load(&it->finalized) == 1, "%s: finalizer called %d times", it->id,
              atomic_load(&it->finalized));
        CHECK(atomic_load(&it->finalized_early) == 0, "%s: finalizer ran before the completion", it->id);
        CHECK(it->outcome == it->want_outcome, "%s (%s): outcome %s, expected %s (%s)", it->id,
              it->path, rq_outcome_str((int)it->outcome), rq_outcome_str((int)it->want_outcome),
              it->message);
        CHECK(it->status == it->want_status, "%s (%s): status %d, expected %d", it->id, it->path,
              it->status, it->want_status);
        CHECK(it->size == it->want_size, "%s (%s): %zu body bytes, expected %zu", it->id, it->path,
              it->size, it->want_size);
        CHECK(it->body_ok, "%s (%s): the body bytes are not the expected ones", it->id, it->path);
        CHECK(it->attempts == 1, "%s: %u attempts", it->id, it->attempts);
        if (it->want_outcome == RQ_OUTCOME_OK) {
            CHECK(it->message[0] == '\0', "%s: message \"%s\" for a success", it->id, it->message);
            ok++;
        } else {
            char expected[64];
            snprintf(expected, sizeof expected, "The server returned a %d error", it->want_status);
            CHECK(strstr(it->message, expected) != NULL, "%s: message \"%s\" lacks \"%s\"", it->id,
                  it->message, expected);
            http++;
        }
    }
    CHECK(ok == 6 && http == 3, "outcomes: %d OK, %d HTTP status", ok, http);
    CHECK(strstr(items1[8].url, "/redirect/0") != NULL, "effective URL after redirects is %s",
          items1[8].url);
    CHECK(atomic_load(&callbacks_overlapped) == 0, "two callbacks of one queue ran at the same time");

    char *log = rqt_get(base, "/_/log");
    long peak = rqt_log_number(log, "peaks", "t1");
    CHECK(peak == 2, "the server saw at most %ld requests at once, expected exactly 2 (max_concurrent)",
          peak);
    for (size_t i = 0; i < N_ITEMS1; i++)
        CHECK(rqt_log_count_id(log, items1[i].id) == items1[i].want_logged,
              "%s (%s): the server logged it %d times, expected %d", items1[i].id, items1[i].path,
              rqt_log_count_id(log, items1[i].id), items1[i].want_logged);
    free(log);
    CHECK_OK(rq_queue_free(queue1));
    printf("outcomes: %zu requests, %d OK, %d HTTP errors, server peak %ld\n", N_ITEMS1, ok, http, peak);
}

/* ---- 2. cancel ------------------------------------------------------------------------------ */

static struct item running = ITEM("/stall?s=30", 0, RQ_OUTCOME_CANCELLED, 0, "", 1);
static struct item waiting = ITEM("/bytes?n=10", 0, RQ_OUTCOME_CANCELLED, 0, "", 0);

static void on_done_plain(void *context, rq_request *request, const rq_response *response) {
    struct item *it = context;
    (void)request;
    CHECK(!pthread_equal(pthread_self(), main_thread), "threaded delivery ran a callback on the main thread");
    record(it, response);
    atomic_fetch_add(&it->completions, 1);
}

static rq_request *new_item_request(struct item *it, const char *id, const char *group) {
    snprintf(it->id, sizeof it->id, "%s", id);
    char *url = rqt_url(base, "%s%cid=%s&group=%s", it->path, strchr(it->path, '?') ? '&' : '?', id,
                        group);
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_done_plain, it, on_item_free));
    free(url);
    return request;
}

static int server_logged(const char *id) {
    rqt_sleep(0.01); /* when polled in a loop, do not flood the server */
    char *log = rqt_get(base, "/_/log");
    int n = rqt_log_count_id(log, id);
    free(log);
    return n;
}

static long server_inflight(const char *group) {
    rqt_sleep(0.01); /* when polled in a loop, do not flood the server */
    char *log = rqt_get(base, "/_/log");
    long n = rqt_log_number(log, "inflights", group);
    free(log);
    return n < 0 ? 0 : n;
}

static void test_cancel(void) {
    rq_queue *queue;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    CHECK_OK(rq_queue_set_max_concurrent(queue, 1));
    rq_request *run = new_item_request(&running, "t2-run", "t2");
    rq_request *wait = new_item_request(&waiting, "t2-wait", "t2");
    CHECK_OK(rq_add(queue, run));
    CHECK_OK(rq_add(queue, wait));

    rq_request_state state = RQ_STATE_NEW;
    CHECK_OK(rq_request_get_state(wait, &state));
    CHECK(state == RQ_STATE_WAITING, "second request on a max_concurrent 1 queue is in state %d", (int)state);
    size_t count = 0;
    CHECK_OK(rq_queue_count(queue, &count));
    CHECK(count == 2, "count %zu before the cancel", count);

    CHECK_OK(rq_cancel(wait));
    CHECK_RC(rq_cancel(wait), RQ_ERR_NOT_ACTIVE);
    CHECK_OK(rq_queue_count(queue, &count));
    CHECK(count == 1, "count %zu right after cancelling the waiting request", count);
    WAIT_FOR(atomic_load(&waiting.completions) >= 1, "no completion for the cancelled waiting request");
    CHECK(waiting.outcome == RQ_OUTCOME_CANCELLED, "cancelled waiting request: outcome %s",
          rq_outcome_str((int)waiting.outcome));
    CHECK(waiting.attempts == 0 && waiting.status == 0, "never-started request: %u attempts, status %d",
          waiting.attempts, waiting.status);

    /* Now cancel the running one, once the server has it. */
    WAIT_FOR(server_logged("t2-run") == 1, "the server never received the running request");
    CHECK_OK(rq_request_get_state(run, &state));
    CHECK(state == RQ_STATE_RUNNING, "stalled request in state %d", (int)state);
    CHECK_OK(rq_cancel(run));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK(running.outcome == RQ_OUTCOME_CANCELLED && running.attempts == 1,
          "cancelled running request: outcome %s, %u attempts", rq_outcome_str((int)running.outcome),
          running.attempts);
    /* The transfer really stopped: the server sees the connection close. */
    WAIT_FOR(server_inflight("t2") == 0, "the server still serves the cancelled request");

    CHECK(atomic_load(&waiting.completions) == 1 && atomic_load(&running.completions) == 1,
          "completions: waiting %d, running %d (each must be exactly 1)",
          atomic_load(&waiting.completions), atomic_load(&running.completions));
    CHECK(atomic_load(&waiting.finalized) == 1 && atomic_load(&running.finalized) == 1,
          "finalizers: waiting %d, running %d (after the completion, before rq_request_free)",
          atomic_load(&waiting.finalized), atomic_load(&running.finalized));
    CHECK(server_logged("t2-wait") == 0, "the cancelled waiting request was sent anyway");
    CHECK_RC(rq_cancel(run), RQ_ERR_NOT_ACTIVE);
    CHECK_OK(rq_request_free(run));
    CHECK_OK(rq_request_free(wait));
    CHECK_RC(rq_request_free(wait), RQ_ERR_INVALID_HANDLE);
    CHECK(atomic_load(&waiting.finalized) == 1, "rq_request_free ran the finalizer again");
    CHECK_OK(rq_queue_free(queue));
    printf("cancel: waiting and running requests cancelled, one completion each\n");
}

/* ---- 3. rq_queue_free with requests in flight ----------------------------------------------- */

#define N_ITEMS3 5
static struct item items3[N_ITEMS3];
static rq_queue *queue3;
static atomic_int queue3_freeing;
static atomic_int queue3_freed;
static atomic_int late_callbacks;
static atomic_int closed_adds;
static atomic_int orphan_finalized;

static void on_orphan_free(void *context) {
    (void)context;
    atomic_fetch_add(&orphan_finalized, 1);
}

static void on_progress3(void *context, rq_request *request, double progress, int64_t done,
                         int64_t total) {
    (void)context, (void)request, (void)progress, (void)done, (void)total;
    if (atomic_load(&queue3_freed))
        atomic_fetch_add(&late_callbacks, 1);
}

static void on_done3(void *context, rq_request *request, const rq_response *response) {
    struct item *it = context;
    (void)request;
    if (atomic_load(&queue3_freed))
        atomic_fetch_add(&late_callbacks, 1);
    record(it, response);
    CHECK(atomic_load(&queue3_freeing), "%s completed (%s: %s) before rq_queue_free was called", it->id,
          rq_outcome_str((int)it->outcome), it->message);
    /* The queue is being freed: it accepts nothing more. */
    char *url = rqt_url(base, "/bytes?n=1&id=t3-late");
    rq_request *late;
    CHECK_OK(rq_request_new(url, &late));
    CHECK_OK(rq_request_set_completion(late, on_done_plain, NULL, on_orphan_free));
    CHECK_RC(rq_add(queue3, late), RQ_ERR_QUEUE_CLOSED);
    atomic_fetch_add(&closed_adds, 1);
    CHECK_OK(rq_request_free(late)); /* never accepted: its finalizer runs here */
    free(url);
    atomic_fetch_add(&it->completions, 1);
}

static void test_free_in_flight(void) {
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue3));
    for (size_t i = 0; i < N_ITEMS3; i++) {
        struct item *it = &items3[i];
        it->path = "/stall?s=20";
        snprintf(it->id, sizeof it->id, "t3-%zu", i);
        char *url = rqt_url(base, "%s&id=%s&group=t3", it->path, it->id);
        rq_request *request;
        CHECK_OK(rq_request_new(url, &request));
        CHECK_OK(rq_request_set_completion(request, on_done3, it, on_item_free));
        CHECK_OK(rq_request_set_download_progress(request, on_progress3));
        CHECK_OK(rq_add(queue3, request));
        CHECK_OK(rq_request_free(request));
        free(url);
    }
    WAIT_FOR(server_inflight("t3") == 2, "the server never had 2 of the stalled requests at once");
    size_t count = 0;
    CHECK_OK(rq_queue_count(queue3, &count));
    CHECK(count == N_ITEMS3, "count %zu before the free", count);

    atomic_store(&queue3_freeing, 1);
    CHECK_OK(rq_queue_free(queue3));
    atomic_store(&queue3_freed, 1);

    /* Everything was delivered before rq_queue_free returned. */
    for (size_t i = 0; i < N_ITEMS3; i++) {
        struct item *it = &items3[i];
        CHECK(atomic_load(&it->completions) == 1, "%s: %d completions when rq_queue_free returned",
              it->id, atomic_load(&it->completions));
        CHECK(atomic_load(&it->finalized) == 1 && atomic_load(&it->finalized_early) == 0,
              "%s: finalizer called %d times (%d before the completion)", it->id,
              atomic_load(&it->finalized), atomic_load(&it->finalized_early));
        CHECK(it->outcome == RQ_OUTCOME_CANCELLED, "%s: outcome %s", it->id,
              rq_outcome_str((int)it->outcome));
        CHECK(strstr(it->message, "the queue was freed") != NULL, "%s: message \"%s\"", it->id,
              it->message);
    }
    CHECK(atomic_load(&closed_adds) == N_ITEMS3 && atomic_load(&orphan_finalized) == N_ITEMS3,
          "rq_add during the free: %d refused, %d finalized", atomic_load(&closed_adds),
          atomic_load(&orphan_finalized));
    CHECK_RC(rq_queue_free(queue3), RQ_ERR_INVALID_HANDLE);

    /* Give a stray callback, if the library let one escape, the time to show up. */
    rqt_sleep(0.3);
    CHECK(atomic_load(&late_callbacks) == 0, "%d callbacks after rq_queue_free returned",
          atomic_load(&late_callbacks));
    for (size_t i = 0; i < N_ITEMS3; i++)
        CHECK(atomic_load(&items3[i].completions) == 1, "%s: a second completion after the free",
              items3[i].id);
    WAIT_FOR(server_inflight("t3") == 0, "the server still serves requests of the freed queue");
    CHECK(server_logged("t3-late") == 0, "a request refused with RQ_ERR_QUEUE_CLOSED was sent");
    printf("free: %d in-flight requests cancelled and delivered before rq_queue_free returned\n",
           N_ITEMS3);
}

/* ---- 4. finalizers -------------------------------------------------------------------------- */

static atomic_int finalized4;
static void on_free4(void *context) {
    atomic_fetch_add(&finalized4, 1);
    CHECK(context == (void *)&finalized4, "finalizer got context %p", context);
}

static struct item started = ITEM("/bytes?n=3", 200, RQ_OUTCOME_OK, 3, "abc", 1);

static void test_finalizers(void) {
    /* Never added: rq_request_free calls it, once, before returning. */
    char *url = rqt_url(base, "/bytes?n=1&id=t4-never");
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, NULL, &finalized4, on_free4));
    CHECK_OK(rq_request_free(request));
    CHECK(atomic_load(&finalized4) == 1, "finalizer of a never-added request: %d calls",
          atomic_load(&finalized4));
    CHECK_RC(rq_request_free(request), RQ_ERR_INVALID_HANDLE);
    CHECK(atomic_load(&finalized4) == 1, "a second rq_request_free ran the finalizer again");
    free(url);

    /* No completion callback: the finalizer still runs when the request completes. */
    rq_queue *queue;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    url = rqt_url(base, "/bytes?n=1&id=t4-nofn");
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, NULL, &finalized4, on_free4));
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK(atomic_load(&finalized4) == 2, "finalizer without completion callback: %d calls",
          atomic_load(&finalized4) - 1);
    CHECK_OK(rq_queue_free(queue));
    CHECK(atomic_load(&finalized4) == 2, "rq_queue_free ran a finalizer again");
    free(url);

    /* rq_request_start: on its own, threaded delivery. */
    rq_request *alone = new_item_request(&started, "t4-start", "t4");
    CHECK_OK(rq_request_start(alone));
    CHECK_RC(rq_request_start(alone), RQ_ERR_ALREADY_ADDED);
    CHECK_OK(rq_request_free(alone));
    WAIT_FOR(atomic_load(&started.finalized) == 1, "rq_request_start: no finalizer after completion");
    CHECK(atomic_load(&started.completions) == 1 && started.outcome == RQ_OUTCOME_OK &&
              started.status == 200 && started.body_ok,
          "rq_request_start: %d completions, outcome %s, status %d",
          atomic_load(&started.completions), rq_outcome_str((int)started.outcome), started.status);
    printf("finalizers: once each, after the completion\n");
}

/* ---- 5. a retained response ------------------------------------------------------------------ */

static const rq_response *_Atomic kept5;

static void on_done5(void *context, rq_request *request, const rq_response *response) {
    (void)context;
    (void)request;
    atomic_store(&kept5, rq_response_retain(response));
}

static void test_retained_response(void) {
    /* Read after the callback returned and the queue was freed: without the retain, these reads
     * would be use-after-free (the ASan run of this test reports them). */
    rq_queue *queue;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    char *url = rqt_url(base, "/bytes?n=40&header=X-Kept:yes&id=t5");
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_done5, NULL, NULL));
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(queue));
    const rq_response *response = atomic_load(&kept5);
    CHECK(response != NULL, "no response was kept");
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    const char *kept = rq_response_header(response, "x-kept");
    CHECK(rq_response_status(response) == 200 && size == 40 && rqt_is_pattern(body, size),
          "retained response: status %d, %zu bytes", rq_response_status(response), size);
    CHECK(kept != NULL && strcmp(kept, "yes") == 0, "retained response: header %s", kept ? kept : "(none)");
    CHECK(strcmp(rq_response_url(response), url) == 0, "retained response: url %s", rq_response_url(response));
    rq_response_release(response);
    free(url);
    printf("retained response: readable after its callback and its queue\n");
}

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    main_thread = pthread_self();
    test_outcomes();
    test_cancel();
    test_free_in_flight();
    test_finalizers();
    test_retained_response();
    printf("test_threaded: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
