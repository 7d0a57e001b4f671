/*
 * test_head.c: the head callback (rq_request_set_head_callback) against the fixture server, in
 * both delivery modes: the order head < body pieces < completion, one head per attempt, none for
 * a followed redirect, a head (and no pieces) for an HTTP error, and a head that arrives while
 * the server holds the body back.
 */
#include "rqtest.h"

static const char *base;

/* What the callbacks of one request saw, in order: "H<status>" per head, "C" per run of body
 * pieces, "D" for the completion. */
struct trace {
    char events[256];
    atomic_int heads;
    atomic_int done;
    int completion_status;
    const rq_response *kept_head; /* the first head, retained */
    char head_x_attempt[16][8];
};

static void append(struct trace *t, const char *event) {
    size_t used = strlen(t->events);
    if (strcmp(event, "C") == 0 && used > 0 && t->events[used - 1] == 'C')
        return;
    snprintf(t->events + used, sizeof t->events - used, "%s%s", used ? " " : "", event);
}

static void on_head(void *context, rq_request *request, const rq_response *head) {
    struct trace *t = context;
    char event[16];
    size_t size = 1;
    (void)request;
    rq_response_body(head, &size);
    CHECK(size == 0, "a head has an empty body, not %zu bytes", size);
    snprintf(event, sizeof event, "H%d", rq_response_status(head));
    append(t, event);
    int n = atomic_load(&t->heads);
    const char *attempt = rq_response_header(head, "X-Attempt");
    if (n < 16)
        snprintf(t->head_x_attempt[n], sizeof t->head_x_attempt[n], "%s", attempt ? attempt : "-");
    if (n == 0)
        t->kept_head = rq_response_retain(head);
    atomic_fetch_add(&t->heads, 1);
}

static int on_data(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    (void)request, (void)data, (void)size, (void)offset;
    append(context, "C");
    return 0;
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct trace *t = context;
    (void)request;
    t->completion_status = rq_response_status(response);
    append(t, "D");
    atomic_store(&t->done, 1);
}

static rq_request *new_request(struct trace *t, const char *path) {
    char *url = rqt_url(base, "%s", path);
    rq_request *r;
    memset(t, 0, sizeof *t);
    CHECK_OK(rq_request_new(url, &r));
    free(url);
    CHECK_OK(rq_request_set_completion(r, on_done, t, NULL));
    CHECK_OK(rq_request_set_body_callback(r, on_data));
    CHECK_OK(rq_request_set_head_callback(r, on_head));
    return r;
}

/* Runs `r` to its completion on a new queue of `mode`. */
static void run(rq_delivery mode, rq_request *r) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(mode, &q));
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
}

static void expect_trace(struct trace *t, const char *expected, const char *what) {
    CHECK(strcmp(t->events, expected) == 0, "%s: callbacks \"%s\", expected \"%s\"", what, t->events, expected);
    if (t->kept_head)
        rq_response_release(t->kept_head);
}

static void test_orders(rq_delivery mode, const char *name) {
    struct trace t;
    run(mode, new_request(&t, "/bytes?n=200000&chunked=1&chunk=10000"));
    CHECK(t.kept_head && rq_response_status(t.kept_head) == 200, "%s: retained head readable", name);
    const char *te = rq_response_header(t.kept_head, "Transfer-Encoding");
    CHECK(te && strcmp(te, "chunked") == 0, "%s: retained head's header %s", name, te ? te : "(none)");
    expect_trace(&t, "H200 C D", "a streamed 200");

    run(mode, new_request(&t, "/redirect/3"));
    CHECK(strstr(rq_response_url(t.kept_head), "/redirect/0") != NULL, "%s: head URL %s", name,
          rq_response_url(t.kept_head));
    expect_trace(&t, "H200 C D", "a followed redirect gives only the final head");

    run(mode, new_request(&t, "/bytes?n=100&status=404"));
    expect_trace(&t, "H404 D", "a 404: a head, its body in the completion");

    static char path[256];
    snprintf(path, sizeof path, "/flaky?key=c-head-%s&fail=2&mode=status&code=503&n=10", name);
    rq_request *r = new_request(&t, path);
    const int statuses[] = {503};
    CHECK_OK(rq_request_set_retry(r, 1));
    CHECK_OK(rq_request_set_retry_delay(r, 0.01));
    CHECK_OK(rq_request_set_retry_statuses(r, statuses, 1));
    run(mode, r);
    CHECK(strcmp(t.head_x_attempt[0], "1") == 0 && strcmp(t.head_x_attempt[2], "3") == 0,
          "%s: heads of attempts %s, %s, %s", name, t.head_x_attempt[0], t.head_x_attempt[1], t.head_x_attempt[2]);
    expect_trace(&t, "H503 H503 H200 C D", "a retried request: one head per attempt");
    printf("%s: head < pieces < completion; redirect, 404 and retries as documented\n", name);
}

/* The server sends its head and holds the body until released: the head comes before. */
static void test_held_body(void) {
    struct trace t;
    rq_queue *q;
    rq_request *r = new_request(&t, "/hold?key=c-head-hold&n=3000&id=c-head-hold");
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    WAIT_FOR(atomic_load(&t.heads) == 1, "no head while the server holds the body");
    CHECK(atomic_load(&t.done) == 0, "completed before the body was released");
    free(rqt_get(base, "/_/release?key=c-head-hold"));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
    expect_trace(&t, "H200 C D", "a held body");
    printf("held body: the head arrived before the server released the body\n");
}

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    test_orders(RQ_DELIVERY_THREADED, "threaded");
    test_orders(RQ_DELIVERY_DISPATCH, "dispatch");
    test_held_body();
    printf("test_head: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
