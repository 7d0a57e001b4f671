/*
 * test_bad_input.c: every kind of bad input gets its documented result code, never a crash.
 *
 * NULL and invalid handles (freed, never ours, of the wrong kind), malformed URLs, unsupported
 * schemes, bad methods and headers (with the documented limits, checked on both sides), bad
 * numbers (NaN, negative, infinite, too large), bad enum values, the frozen state of an added
 * request, and the names of result codes and outcomes (never NULL, even for garbage values).
 * Needs no server: nothing here reaches the network.
 */
#include "rqtest.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>

static const char *const URL = "http://127.0.0.1:9/never-sent";

static rq_request *new_request(void) {
    rq_request *request = NULL;
    CHECK_OK(rq_request_new(URL, &request));
    CHECK(request != NULL, "rq_request_new returned RQ_OK and a NULL request");
    return request;
}

/* rq_request_new(url) must give `expected` and leave the out-parameter alone on failure. */
static void check_url(const char *url, rq_result expected, const char *what) {
    rq_request *sentinel = (rq_request *)(uintptr_t)0x5a5a;
    rq_request *request = sentinel;
    int rc = rq_request_new(url, &request);
    if (rc != (int)expected)
        FAIL("URL %s (%.80s%s): rq_request_new returned %d (%s), expected %d (%s)", what, url,
             strlen(url) > 80 ? "..." : "", rc, rq_result_str(rc), (int)expected,
             rq_result_str((int)expected));
    if (expected == RQ_OK)
        CHECK_OK(rq_request_free(request));
    else
        CHECK(request == sentinel, "URL %s: out-parameter written on failure", what);
}

static void check_method(const char *method, rq_result expected, const char *what) {
    rq_request *request = new_request();
    int rc = rq_request_set_method(request, method);
    if (rc != (int)expected)
        FAIL("method %s (\"%.70s\"): returned %d (%s), expected %d (%s)", what, method, rc,
             rq_result_str(rc), (int)expected, rq_result_str((int)expected));
    CHECK_OK(rq_request_free(request));
}

static void check_header(const char *name, const char *value, rq_result expected, const char *what) {
    rq_request *request = new_request();
    int rc = rq_request_set_header(request, name, value);
    if (rc != (int)expected)
        FAIL("header %s: returned %d (%s), expected %d (%s)", what, rc, rq_result_str(rc),
             (int)expected, rq_result_str((int)expected));
    CHECK_OK(rq_request_free(request));
}

static void test_null_arguments(void) {
    rq_queue *queue = NULL;
    rq_request *request = new_request();
    CHECK_RC(rq_queue_new(RQ_DELIVERY_THREADED, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_new(NULL, &request), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_new(URL, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));

    /* Freeing NULL is a no-op. */
    CHECK_OK(rq_queue_free(NULL));
    CHECK_OK(rq_request_free(NULL));
    rq_snapshot_free(NULL);

    /* NULL handles. */
    size_t n = 0;
    int flag = 0;
    rq_order order;
    rq_duplicates duplicates;
    rq_request_state state;
    void *context;
    int fd;
    CHECK_RC(rq_queue_set_max_concurrent(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_get_max_concurrent(NULL, &n), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_set_order(NULL, RQ_ORDER_FIFO), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_get_order(NULL, &order), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_set_duplicates(NULL, RQ_DUPLICATES_ALLOW), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_get_duplicates(NULL, &duplicates), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_suspend(NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_resume(NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_is_suspended(NULL, &flag), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_count(NULL, &n), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_cancel_all(NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_get_fd(NULL, &fd), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_dispatch(NULL, 0, &n), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_wait_idle(NULL, 0), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_add(NULL, request), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_add(queue, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_cancel(NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_method(NULL, "GET"), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_header(NULL, "A", "b"), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_body(NULL, "x", 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_timeout(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_connect_timeout(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_idle_timeout(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_credentials(NULL, "u", "p"), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_completion(NULL, NULL, NULL, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_upload_progress(NULL, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_download_progress(NULL, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_auth_handler(NULL, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_retry(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_retry_delay(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_retry_outcomes(NULL, NULL, 0), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_max_attempts(NULL, 1), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_start(NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_get_state(NULL, &state), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_get_context(NULL, &context), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_auth_use_credential(NULL, "u", "p"), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_auth_continue_without(NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_auth_cancel(NULL), RQ_ERR_NULL_ARGUMENT);

    /* NULL out-parameters and pointer arguments. */
    rq_request **snapshot;
    CHECK_RC(rq_queue_get_max_concurrent(queue, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_get_order(queue, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_get_duplicates(queue, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_is_suspended(queue, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_count(queue, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_snapshot(queue, NULL, &n), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_queue_snapshot(queue, &snapshot, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_get_state(request, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_get_context(request, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_method(request, NULL), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_header(request, NULL, "value"), RQ_ERR_NULL_ARGUMENT);
    CHECK_RC(rq_request_set_body(request, NULL, 5), RQ_ERR_NULL_ARGUMENT);
    CHECK_OK(rq_request_set_body(request, NULL, 0)); /* an empty body */
    CHECK_RC(rq_request_set_retry_outcomes(request, NULL, 2), RQ_ERR_NULL_ARGUMENT);
    CHECK_OK(rq_request_set_retry_outcomes(request, NULL, 0)); /* retry nothing */
    CHECK_OK(rq_request_set_header(request, "X-Absent", NULL)); /* removes (nothing) */
    CHECK_OK(rq_request_set_credentials(request, NULL, NULL)); /* clears */

    /* A valid snapshot of an empty queue. */
    snapshot = NULL;
    n = 99;
    CHECK_OK(rq_queue_snapshot(queue, &snapshot, &n));
    CHECK(n == 0, "snapshot of an empty queue has %zu entries", n);
    rq_snapshot_free(snapshot);

    /* Responses are not checked, but NULL gives neutral values. */
    size_t size = 77;
    const char *name = NULL, *value = NULL;
    CHECK(rq_response_outcome(NULL) == RQ_OUTCOME_TRANSPORT, "outcome of NULL is %d",
          (int)rq_response_outcome(NULL));
    CHECK(rq_response_status(NULL) == 0, "status of NULL is %d", rq_response_status(NULL));
    rq_response_body(NULL, &size);
    CHECK(size == 0, "body size of NULL is %zu", size);
    CHECK(rq_response_header_count(NULL) == 0, "header count of NULL");
    CHECK_RC(rq_response_header_at(NULL, 0, &name, &value), RQ_ERR_NULL_ARGUMENT);
    CHECK(rq_response_header(NULL, "Content-Type") == NULL, "header of NULL is not NULL");
    CHECK(rq_response_attempts(NULL) == 0, "attempts of NULL");
    (void)rq_response_url(NULL);
    (void)rq_response_error_message(NULL);

    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_free(queue));
    printf("NULL arguments: ok\n");
}

static void test_invalid_handles(void) {
    rq_queue *queue;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    rq_request *request = new_request();
    size_t n;
    rq_request_state state;

    /* Never ours: a stack address, a small integer, a heap block. */
    int local = 0;
    void *heap = malloc(64);
    CHECK(heap != NULL, "out of memory");
    memset(heap, 0, 64);
    void *fakes[] = {&local, (void *)(uintptr_t)0x10, heap, (void *)(uintptr_t)UINTPTR_MAX};
    for (size_t i = 0; i < sizeof fakes / sizeof *fakes; i++) {
        rq_queue *fq = fakes[i];
        rq_request *fr = fakes[i];
        rq_auth_challenge *fc = fakes[i];
        CHECK_RC(rq_queue_count(fq, &n), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_queue_free(fq), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_add(fq, request), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_add(queue, fr), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_request_free(fr), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_request_set_method(fr, "GET"), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_request_get_state(fr, &state), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_cancel(fr), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_auth_use_credential(fc, "u", "p"), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_auth_continue_without(fc), RQ_ERR_INVALID_HANDLE);
        CHECK_RC(rq_auth_cancel(fc), RQ_ERR_INVALID_HANDLE);
    }
    free(heap);

    /* The wrong kind: a request where a queue is expected, and the other way round. */
    CHECK_RC(rq_queue_count((rq_queue *)(void *)request, &n), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_queue_free((rq_queue *)(void *)request), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_request_free((rq_request *)(void *)queue), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_add(queue, (rq_request *)(void *)queue), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_auth_cancel((rq_auth_challenge *)(void *)request), RQ_ERR_INVALID_HANDLE);
    /* ... and both still work afterwards. */
    CHECK_OK(rq_queue_count(queue, &n));
    CHECK_OK(rq_request_get_state(request, &state));

    /* Freed handles. */
    CHECK_OK(rq_request_free(request));
    CHECK_RC(rq_request_free(request), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_request_set_method(request, "GET"), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_request_set_header(request, "A", "b"), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_request_set_timeout(request, 1), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_request_get_state(request, &state), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_add(queue, request), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_request_start(request), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_cancel(request), RQ_ERR_INVALID_HANDLE);

    CHECK_OK(rq_queue_free(queue));
    CHECK_RC(rq_queue_free(queue), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_queue_count(queue, &n), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_queue_suspend(queue), RQ_ERR_INVALID_HANDLE);
    CHECK_RC(rq_queue_wait_idle(queue, 0), RQ_ERR_INVALID_HANDLE);
    request = new_request();
    CHECK_RC(rq_add(queue, request), RQ_ERR_INVALID_HANDLE);
    CHECK_OK(rq_request_free(request));

    /* Handle values are never reused: a new handle differs from every freed one. */
    rq_queue *again;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &again));
    CHECK(again != queue, "a new queue reuses the handle of a freed one");
    CHECK_RC(rq_queue_free(queue), RQ_ERR_INVALID_HANDLE);
    CHECK_OK(rq_queue_free(again));

    /* The default queue cannot be freed. */
    rq_queue *def = rq_queue_default();
    CHECK(def != NULL, "rq_queue_default returned NULL");
    CHECK(rq_queue_default() == def, "rq_queue_default returned two different queues");
    CHECK_RC(rq_queue_free(def), RQ_ERR_INVALID_STATE);
    CHECK_OK(rq_queue_count(def, &n));
    printf("invalid handles: ok\n");
}

static void test_urls(void) {
    check_url("http://127.0.0.1:8080/path?q=1#frag", RQ_OK, "plain http");
    check_url("https://example.com/", RQ_OK, "https");
    check_url("http://[::1]:8080/", RQ_OK, "IPv6 literal");
    check_url("", RQ_ERR_INVALID_URL, "empty");
    check_url("not a url", RQ_ERR_INVALID_URL, "words");
    check_url("/relative/path", RQ_ERR_INVALID_URL, "relative");
    check_url("example.com/path", RQ_ERR_INVALID_URL, "no scheme");
    check_url("http://", RQ_ERR_INVALID_URL, "no host");
    check_url("http:///path", RQ_ERR_INVALID_URL, "empty host");
    check_url("http://exa mple.com/", RQ_ERR_INVALID_URL, "space in host");
    check_url("http://example.com/a b", RQ_ERR_INVALID_URL, "space in path");
    check_url("http://example.com/\x01", RQ_ERR_INVALID_URL, "control character");
    check_url("http://example.com/\r\nX-Injected: 1", RQ_ERR_INVALID_URL, "CR LF");
    check_url("http://example.com/\x7f", RQ_ERR_INVALID_URL, "DEL");
    check_url("http://ex\xc3\xa4mple.com/", RQ_ERR_INVALID_URL, "non-ASCII host");
    check_url("http://example.com/\xc3\xa4", RQ_ERR_INVALID_URL, "non-ASCII path");
    check_url("http://example.com:99999/", RQ_ERR_INVALID_URL, "port above 65535");
    check_url("http://example.com:80a/", RQ_ERR_INVALID_URL, "port with letters");
    check_url("http://example.com:-1/", RQ_ERR_INVALID_URL, "negative port");
    check_url("ftp://example.com/file", RQ_ERR_UNSUPPORTED_SCHEME, "ftp");
    check_url("gopher://example.com/", RQ_ERR_UNSUPPORTED_SCHEME, "gopher");
    check_url("ws://example.com/", RQ_ERR_UNSUPPORTED_SCHEME, "ws");
    check_url("smtp://example.com/", RQ_ERR_UNSUPPORTED_SCHEME, "smtp");

    /* At most 65536 bytes. */
    const char *prefix = "http://example.com/";
    char *longest = rqt_repeat('a', 65536 - strlen(prefix), prefix);
    char *too_long = rqt_repeat('a', 65536 - strlen(prefix) + 1, prefix);
    check_url(longest, RQ_OK, "of exactly 65536 bytes");
    check_url(too_long, RQ_ERR_INVALID_URL, "of 65537 bytes");
    free(longest);
    free(too_long);
    printf("URLs: ok\n");
}

static void test_methods_and_headers(void) {
    check_method("GET", RQ_OK, "GET");
    check_method("PATCH", RQ_OK, "PATCH");
    check_method("M-SEARCH", RQ_OK, "with a dash");
    check_method("x!#$%&'*+-.^_`|~9", RQ_OK, "every token character");
    check_method("", RQ_ERR_INVALID_METHOD, "empty");
    check_method("GE T", RQ_ERR_INVALID_METHOD, "with a space");
    check_method("GET\r\n", RQ_ERR_INVALID_METHOD, "with CR LF");
    check_method("G(ET", RQ_ERR_INVALID_METHOD, "with a parenthesis");
    check_method("GET:", RQ_ERR_INVALID_METHOD, "with a colon");
    check_method("G\xc3\x89T", RQ_ERR_INVALID_METHOD, "non-ASCII");
    char *m64 = rqt_repeat('M', 64, ""), *m65 = rqt_repeat('M', 65, "");
    check_method(m64, RQ_OK, "of 64 bytes");
    check_method(m65, RQ_ERR_INVALID_METHOD, "of 65 bytes");
    free(m64);
    free(m65);

    check_header("X-Fine", "any bytes \x01\x7f\xff but CR and LF", RQ_OK, "value with odd bytes");
    check_header("X-Empty", "", RQ_OK, "empty value");
    check_header("", "v", RQ_ERR_INVALID_HEADER, "empty name");
    check_header("X Space", "v", RQ_ERR_INVALID_HEADER, "space in name");
    check_header("X-Colon:", "v", RQ_ERR_INVALID_HEADER, "colon in name");
    check_header("X-\xc3\xa4", "v", RQ_ERR_INVALID_HEADER, "non-ASCII name");
    check_header("X-A", "one\rtwo", RQ_ERR_INVALID_HEADER, "CR in value");
    check_header("X-A", "one\ntwo", RQ_ERR_INVALID_HEADER, "LF in value");
    check_header("X-A", "v\r\nX-Injected: 1", RQ_ERR_INVALID_HEADER, "CR LF in value");
    char *n256 = rqt_repeat('n', 256, ""), *n257 = rqt_repeat('n', 257, "");
    char *v65536 = rqt_repeat('v', 65536, ""), *v65537 = rqt_repeat('v', 65537, "");
    check_header(n256, "v", RQ_OK, "name of 256 bytes");
    check_header(n257, "v", RQ_ERR_INVALID_HEADER, "name of 257 bytes");
    check_header("X-A", v65536, RQ_OK, "value of 65536 bytes");
    check_header("X-A", v65537, RQ_ERR_INVALID_HEADER, "value of 65537 bytes");
    free(n256);
    free(n257);
    free(v65536);
    free(v65537);

    /* At most 1000 headers; replacing one does not add one. */
    rq_request *request = new_request();
    for (int i = 0; i < 1000; i++) {
        char name[32];
        snprintf(name, sizeof name, "X-H%d", i);
        CHECK_OK(rq_request_set_header(request, name, "v"));
    }
    CHECK_OK(rq_request_set_header(request, "x-h7", "replaced"));
    CHECK_RC(rq_request_set_header(request, "X-One-Too-Many", "v"), RQ_ERR_INVALID_HEADER);
    CHECK_OK(rq_request_set_header(request, "X-H0", NULL)); /* remove one: room for another */
    CHECK_OK(rq_request_set_header(request, "X-One-More", "v"));
    CHECK_OK(rq_request_free(request));
    printf("methods and headers: ok\n");
}

static void test_numbers(void) {
    rq_request *request = new_request();
    const double bad[] = {NAN, -NAN, -1.0, -1e-9, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_RC(rq_request_set_timeout(request, bad[i]), RQ_ERR_INVALID_ARGUMENT);
        CHECK_RC(rq_request_set_connect_timeout(request, bad[i]), RQ_ERR_INVALID_ARGUMENT);
        CHECK_RC(rq_request_set_idle_timeout(request, bad[i]), RQ_ERR_INVALID_ARGUMENT);
        CHECK_RC(rq_request_set_retry_delay(request, bad[i]), RQ_ERR_INVALID_ARGUMENT);
    }
    CHECK_OK(rq_request_set_timeout(request, 0));
    CHECK_OK(rq_request_set_timeout(request, 1e6));
    CHECK_RC(rq_request_set_timeout(request, 1e6 + 1), RQ_ERR_INVALID_ARGUMENT);
    CHECK_OK(rq_request_set_retry_delay(request, 0));
    CHECK_OK(rq_request_set_retry_delay(request, 1e6));
    CHECK_RC(rq_request_set_retry_delay(request, 1e6 + 1), RQ_ERR_INVALID_ARGUMENT);
    CHECK_OK(rq_request_set_connect_timeout(request, 0));
    CHECK_OK(rq_request_set_idle_timeout(request, 0.5));
    CHECK_OK(rq_request_set_max_attempts(request, 0));
    CHECK_OK(rq_request_set_max_attempts(request, 1000000));
    CHECK_RC(rq_request_set_max_attempts(request, 1000001), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_request_set_max_attempts(request, UINT_MAX), RQ_ERR_INVALID_ARGUMENT);

    /* Retry outcomes: OK and CANCELLED cannot be retried, unknown values are rejected. */
    const rq_outcome fine[] = {RQ_OUTCOME_TIMEOUT, RQ_OUTCOME_HTTP_STATUS, RQ_OUTCOME_TRANSPORT};
    const rq_outcome with_ok[] = {RQ_OUTCOME_TIMEOUT, RQ_OUTCOME_OK};
    const rq_outcome with_cancelled[] = {RQ_OUTCOME_CANCELLED};
    const rq_outcome unknown[] = {(rq_outcome)64};
    const rq_outcome negative[] = {(rq_outcome)-1};
    CHECK_OK(rq_request_set_retry_outcomes(request, fine, 3));
    CHECK_RC(rq_request_set_retry_outcomes(request, with_ok, 2), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_request_set_retry_outcomes(request, with_cancelled, 1), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_request_set_retry_outcomes(request, unknown, 1), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_request_set_retry_outcomes(request, negative, 1), RQ_ERR_INVALID_ARGUMENT);

    /* Enum values out of range. */
    rq_queue *queue = (rq_queue *)(uintptr_t)0x5a5a;
    CHECK_RC(rq_queue_new((rq_delivery)3, &queue), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_queue_new((rq_delivery)-1, &queue), RQ_ERR_INVALID_ARGUMENT);
    CHECK(queue == (rq_queue *)(uintptr_t)0x5a5a, "rq_queue_new wrote its out-parameter on failure");
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    CHECK_RC(rq_queue_set_order(queue, (rq_order)2), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_queue_set_order(queue, (rq_order)-1), RQ_ERR_INVALID_ARGUMENT);
    CHECK_RC(rq_queue_set_duplicates(queue, (rq_duplicates)7), RQ_ERR_INVALID_ARGUMENT);
    rq_order order = RQ_ORDER_LIFO;
    CHECK_OK(rq_queue_get_order(queue, &order));
    CHECK(order == RQ_ORDER_FIFO, "a rejected order changed the queue's order to %d", (int)order);

    /* A wait's time limit may be negative (no limit), but not NaN. */
    CHECK_RC(rq_queue_wait_idle(queue, NAN), RQ_ERR_INVALID_ARGUMENT);
    CHECK_OK(rq_queue_wait_idle(queue, 0));

    /* The other delivery mode's calls. */
    int fd = -7;
    size_t ran = 7;
    CHECK_RC(rq_queue_get_fd(queue, &fd), RQ_ERR_WRONG_DELIVERY);
    CHECK(fd == -7, "rq_queue_get_fd wrote its out-parameter on failure");
    CHECK_RC(rq_queue_dispatch(queue, 0, &ran), RQ_ERR_WRONG_DELIVERY);
    CHECK_OK(rq_queue_free(queue));
    CHECK_OK(rq_request_free(request));
    printf("numbers and enums: ok\n");
}

static atomic_int frozen_completions;
static void on_frozen_done(void *context, rq_request *request, const rq_response *response) {
    (void)context, (void)request;
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_CANCELLED, "outcome %s for a request of a freed queue",
          rq_outcome_str((int)rq_response_outcome(response)));
    atomic_fetch_add(&frozen_completions, 1);
}

static void test_frozen(void) {
    rq_queue *queue, *other;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &other));
    CHECK_OK(rq_queue_suspend(queue)); /* nothing starts: no network needed */
    rq_request *request = new_request();
    CHECK_RC(rq_cancel(request), RQ_ERR_NOT_ACTIVE); /* never added */
    CHECK_OK(rq_request_set_completion(request, on_frozen_done, NULL, NULL));
    CHECK_OK(rq_add(queue, request));

    CHECK_RC(rq_add(queue, request), RQ_ERR_ALREADY_ADDED);
    CHECK_RC(rq_add(other, request), RQ_ERR_ALREADY_ADDED);
    CHECK_RC(rq_request_start(request), RQ_ERR_ALREADY_ADDED);
    const rq_outcome outcomes[] = {RQ_OUTCOME_TIMEOUT};
    CHECK_RC(rq_request_set_method(request, "POST"), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_header(request, "X-A", "b"), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_body(request, "x", 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_timeout(request, 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_connect_timeout(request, 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_idle_timeout(request, 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_credentials(request, "u", "p"), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_completion(request, NULL, NULL, NULL), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_download_progress(request, NULL), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_upload_progress(request, NULL), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_auth_handler(request, NULL), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_retry(request, 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_retry_delay(request, 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_retry_outcomes(request, outcomes, 1), RQ_ERR_REQUEST_FROZEN);
    CHECK_RC(rq_request_set_max_attempts(request, 3), RQ_ERR_REQUEST_FROZEN);

    size_t n = 0;
    CHECK_OK(rq_queue_count(queue, &n));
    CHECK(n == 1, "a failed second rq_add changed the count to %zu", n);
    CHECK_OK(rq_queue_count(other, &n));
    CHECK(n == 0, "rq_add to another queue added it there (%zu)", n);

    CHECK_OK(rq_queue_free(queue)); /* cancels it and delivers its completion */
    CHECK(atomic_load(&frozen_completions) == 1, "%d completions for the request of the freed queue",
          atomic_load(&frozen_completions));
    rq_request_state state = RQ_STATE_NEW;
    CHECK_OK(rq_request_get_state(request, &state)); /* our handle is still valid */
    CHECK(state == RQ_STATE_COMPLETED, "state %d after its queue was freed", (int)state);
    CHECK_RC(rq_cancel(request), RQ_ERR_NOT_ACTIVE);
    CHECK_RC(rq_add(other, request), RQ_ERR_ALREADY_ADDED); /* single use */
    CHECK_OK(rq_request_free(request));
    CHECK_RC(rq_request_free(request), RQ_ERR_INVALID_HANDLE);
    CHECK_OK(rq_queue_free(other));
    printf("frozen requests: ok\n");
}

static void test_names(void) {
    const char *names[18];
    for (int code = 0; code <= 17; code++) {
        const char *name = rq_result_str(code);
        CHECK(name != NULL && name[0] != '\0', "rq_result_str(%d) is NULL or empty", code);
        CHECK(strcmp(name, "unknown result code") != 0, "rq_result_str(%d) says unknown", code);
        for (int other = 0; other < code; other++)
            CHECK(strcmp(names[other], name) != 0, "results %d and %d are both named \"%s\"", other,
                  code, name);
        names[code] = name;
    }
    const int garbage[] = {18, 19, 100, 1000, -1, -2, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof garbage / sizeof *garbage; i++) {
        const char *name = rq_result_str(garbage[i]);
        CHECK(name != NULL && strcmp(name, "unknown result code") == 0, "rq_result_str(%d) = \"%s\"",
              garbage[i], name ? name : "(null)");
        name = rq_outcome_str(garbage[i] == 18 ? 64 : garbage[i]);
        CHECK(name != NULL && strcmp(name, "unknown outcome") == 0, "rq_outcome_str(%d) = \"%s\"",
              garbage[i] == 18 ? 64 : garbage[i], name ? name : "(null)");
    }
    const char *outcomes[RQ_OUTCOME_FILE_ERROR + 1];
    for (int outcome = 0; outcome <= RQ_OUTCOME_FILE_ERROR; outcome++) {
        const char *name = rq_outcome_str(outcome);
        CHECK(name != NULL && name[0] != '\0', "rq_outcome_str(%d) is NULL or empty", outcome);
        CHECK(strcmp(name, "unknown outcome") != 0, "rq_outcome_str(%d) says unknown", outcome);
        for (int other = 0; other < outcome; other++)
            CHECK(strcmp(outcomes[other], name) != 0, "outcomes %d and %d are both named \"%s\"",
                  other, outcome, name);
        outcomes[outcome] = name;
    }
    printf("names: ok (e.g. %d = \"%s\", outcome %d = \"%s\")\n", RQ_ERR_INVALID_URL,
           rq_result_str(RQ_ERR_INVALID_URL), RQ_OUTCOME_HTTP_STATUS,
           rq_outcome_str(RQ_OUTCOME_HTTP_STATUS));
}

int main(void) {
    test_names();
    test_null_arguments();
    test_invalid_handles();
    test_urls();
    test_methods_and_headers();
    test_numbers();
    test_frozen();
    printf("test_bad_input: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
