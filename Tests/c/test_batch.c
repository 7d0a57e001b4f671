/*
 * test_batch.c: the calls that do the work of several (rq_add_url, rq_response_retain_summary,
 * rq_response_release_many, rq_request_free_many) against the fixture server: each request added
 * by URL completes exactly once with its own response, its context finalizer runs once after its
 * completion, a summary taken with its response retained stays readable after the callback, and
 * the batch frees and releases let go of everything given.
 *
 *   test_batch BASE_URL
 */
#include "rqtest.h"

#define N 40

struct slot {
    int index;
    rq_request *handle; /* as rq_add_url returned it */
    atomic_int completions;
    atomic_int finalized;
    int finalized_after_completion;
    rq_request *seen; /* the request the completion received */
    rq_response_summary summary;
    const rq_response *retained;
};

static struct slot slots[N];
static char *urls[N];

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct slot *s = context;
    s->seen = request;
    s->summary.size = sizeof s->summary;
    CHECK_OK(rq_response_retain_summary(response, &s->summary));
    s->retained = response;
    atomic_fetch_add(&s->completions, 1);
}

static void on_free(void *context) {
    struct slot *s = context;
    s->finalized_after_completion = atomic_load(&s->completions) == 1;
    atomic_fetch_add(&s->finalized, 1);
}

static void test_add_url(const char *base, rq_delivery delivery) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(delivery, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 8));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    for (int i = 0; i < N; i++) {
        memset(&slots[i], 0, sizeof slots[i]);
        slots[i].index = i;
        urls[i] = rqt_url(base, "/bytes?n=%d&batch=%d-%d", i + 1, (int)delivery, i);
        CHECK_OK(rq_add_url(q, urls[i], on_done, &slots[i], on_free, &slots[i].handle));
        CHECK(slots[i].handle != NULL, "no handle for request %d", i);
    }
    /* Half freed at once (the queue keeps what it needs), half kept and freed in one call. */
    for (int i = 0; i < N; i += 2)
        CHECK_OK(rq_request_free(slots[i].handle));
    CHECK_OK(rq_queue_wait_idle(q, 60));

    const rq_response *retained[N];
    rq_request *kept[N / 2 + 1];
    size_t nkept = 0;
    for (int i = 0; i < N; i++) {
        struct slot *s = &slots[i];
        CHECK(atomic_load(&s->completions) == 1, "request %d completed %d times", i, atomic_load(&s->completions));
        CHECK(atomic_load(&s->finalized) == 1 && s->finalized_after_completion,
              "request %d: its finalizer ran %d times, after its completion: %d", i, atomic_load(&s->finalized),
              s->finalized_after_completion);
        CHECK(s->seen == s->handle, "request %d: the completion got another handle", i);
        /* Read after the callback: the response was retained with its summary. */
        CHECK(s->summary.outcome == RQ_OUTCOME_OK && s->summary.status == 200, "request %d: outcome %d status %d", i,
              (int)s->summary.outcome, s->summary.status);
        CHECK(s->summary.body_size == (size_t)i + 1 && rqt_is_pattern(s->summary.body, (size_t)i + 1),
              "request %d: body of %zu bytes", i, s->summary.body_size);
        CHECK(strcmp(rq_response_url(s->retained), urls[i]) == 0, "request %d: url %s", i, rq_response_url(s->retained));
        retained[i] = s->retained;
        if (i % 2 == 1)
            kept[nkept++] = s->handle;
    }
    kept[nkept++] = NULL; /* skipped */
    rq_response_release_many(retained, N);
    CHECK_OK(rq_request_free_many(kept, nkept));
    for (size_t i = 0; i + 1 < nkept; i++)
        CHECK_RC(rq_cancel(kept[i]), RQ_ERR_INVALID_HANDLE);
    /* Freed twice: the first error is reported, with its index, and the others still freed. */
    rq_request *again[2];
    CHECK_OK(rq_request_new(urls[0], &again[1]));
    again[0] = kept[0];
    CHECK_RC(rq_request_free_many(again, 2), RQ_ERR_INVALID_HANDLE);
    CHECK(strncmp(rq_last_error_message(), "rq_request_free_many: requests[0]: ", 35) == 0, "message: %s",
          rq_last_error_message());
    CHECK_RC(rq_cancel(again[1]), RQ_ERR_INVALID_HANDLE);
    CHECK_OK(rq_queue_free(q));
    for (int i = 0; i < N; i++)
        free(urls[i]);
}

/* rq_summary_completion_fn: each request, added by URL (rq_add_url_with_summary) or made whole
 * (rq_request_set_summary_completion, which replaces an rq_completion_fn set before), completes
 * once with its own response, retained for the callback, whose arguments are its summary: checked
 * against rq_response_get_summary after the callback, and the response readable until released.
 * A cancelled request gets one too (a response made for the cancellation). */
struct summary_slot {
    atomic_int completions;
    atomic_int finalized;
    int finalized_after_completion;
    rq_request *seen;
    rq_response *response;
    rq_outcome outcome;
    int status, http_version;
    const uint8_t *body;
    size_t body_size;
};

static struct summary_slot summary_slots[N];

static void on_summary(void *context, rq_request *request, rq_response *response, rq_outcome outcome, int status,
                       int http_version, const uint8_t *body, size_t body_size) {
    struct summary_slot *s = context;
    s->seen = request;
    s->response = response;
    s->outcome = outcome;
    s->status = status;
    s->http_version = http_version;
    s->body = body;
    s->body_size = body_size;
    atomic_fetch_add(&s->completions, 1);
}

static void on_summary_free(void *context) {
    struct summary_slot *s = context;
    s->finalized_after_completion = atomic_load(&s->completions) == 1;
    atomic_fetch_add(&s->finalized, 1);
}

static void never_called(void *context, rq_request *request, const rq_response *response) {
    (void)context;
    (void)request;
    (void)response;
    FAIL("the completion replaced by rq_request_set_summary_completion was called");
}

static void test_summary_completion(const char *base, rq_delivery delivery) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(delivery, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 8));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    rq_request *handles[N];
    for (int i = 0; i < N; i++) {
        memset(&summary_slots[i], 0, sizeof summary_slots[i]);
        /* The last one waits on a held path and is cancelled. */
        urls[i] = i == N - 1 ? rqt_url(base, "/hold?key=summary-%d&n=1", (int)delivery)
                             : rqt_url(base, "/bytes?n=%d&summary=%d-%d", i + 1, (int)delivery, i);
        if (i % 2 == 0) {
            CHECK_OK(rq_add_url_with_summary(q, urls[i], on_summary, &summary_slots[i], on_summary_free, &handles[i]));
        } else {
            CHECK_OK(rq_request_new(urls[i], &handles[i]));
            CHECK_OK(rq_request_set_completion(handles[i], never_called, NULL, NULL));
            CHECK_OK(rq_request_set_summary_completion(handles[i], on_summary, &summary_slots[i], on_summary_free));
            CHECK_OK(rq_add(q, handles[i]));
        }
    }
    CHECK_OK(rq_cancel(handles[N - 1]));
    CHECK_OK(rq_queue_wait_idle(q, 60));
    for (int i = 0; i < N; i++) {
        struct summary_slot *s = &summary_slots[i];
        CHECK(atomic_load(&s->completions) == 1, "request %d completed %d times", i, atomic_load(&s->completions));
        CHECK(atomic_load(&s->finalized) == 1 && s->finalized_after_completion, "request %d: finalizer %d, after: %d", i,
              atomic_load(&s->finalized), s->finalized_after_completion);
        CHECK(s->seen == handles[i], "request %d: the completion got another handle", i);
        /* After the callback: the response is still the caller's, and says what the arguments said. */
        rq_response_summary summary = {.size = sizeof summary};
        CHECK_OK(rq_response_get_summary(s->response, &summary));
        CHECK(summary.outcome == s->outcome && summary.status == s->status && summary.http_version == s->http_version &&
                  summary.body == s->body && summary.body_size == s->body_size,
              "request %d: the arguments differ from the response's summary", i);
        if (i == N - 1) {
            CHECK(s->outcome == RQ_OUTCOME_CANCELLED && s->status == 0 && s->body != NULL && s->body_size == 0,
                  "cancelled request: outcome %d status %d body %p/%zu", (int)s->outcome, s->status, (void *)s->body,
                  s->body_size);
        } else {
            CHECK(s->outcome == RQ_OUTCOME_OK && s->status == 200 && s->http_version == 11,
                  "request %d: outcome %d status %d version %d", i, (int)s->outcome, s->status, s->http_version);
            CHECK(s->body_size == (size_t)i + 1 && rqt_is_pattern(s->body, (size_t)i + 1), "request %d: body of %zu bytes",
                  i, s->body_size);
            CHECK(strcmp(rq_response_url(s->response), urls[i]) == 0, "request %d: url %s", i, rq_response_url(s->response));
        }
        if (i % 2 == 0)
            rq_response_release(s->response);
        CHECK_OK(rq_request_free(handles[i]));
    }
    const rq_response *rest[N / 2];
    for (int i = 1, n = 0; i < N; i += 2)
        rest[n++] = summary_slots[i].response;
    rq_response_release_many(rest, N / 2);
    CHECK_OK(rq_queue_free(q));
    for (int i = 0; i < N; i++)
        free(urls[i]);
}

/* A refused rq_add_url makes nothing: no handle, no callback, no finalizer. */
static void test_refused(const char *base) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    struct slot s;
    memset(&s, 0, sizeof s);
    rq_request *out = NULL;
    CHECK_RC(rq_add_url(q, "http://a b/", on_done, &s, on_free, &out), RQ_ERR_INVALID_URL);
    CHECK(strncmp(rq_last_error_message(), "rq_add_url: ", 12) == 0, "message: %s", rq_last_error_message());
    char *url = rqt_url(base, "/bytes?n=1");
    rq_queue *freed;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &freed));
    CHECK_OK(rq_queue_free(freed));
    CHECK_RC(rq_add_url(freed, url, on_done, &s, on_free, &out), RQ_ERR_INVALID_HANDLE);
    CHECK_OK(rq_queue_wait_idle(q, 10));
    CHECK_OK(rq_queue_free(q));
    CHECK(out == NULL && atomic_load(&s.completions) == 0 && atomic_load(&s.finalized) == 0,
          "a refused add made something: handle %p, %d completions, %d finalizers", (void *)out,
          atomic_load(&s.completions), atomic_load(&s.finalized));
    free(url);
}

int main(int argc, char **argv) {
    const char *base = rqt_base_url(argc, argv);
    test_add_url(base, RQ_DELIVERY_THREADED);
    test_add_url(base, RQ_DELIVERY_DISPATCH); /* (rq_queue_wait_idle runs the callbacks) */
    test_summary_completion(base, RQ_DELIVERY_THREADED);
    test_summary_completion(base, RQ_DELIVERY_DISPATCH);
    test_summary_completion(base, RQ_DELIVERY_INLINE);
    test_refused(base);
    printf("test_batch: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
