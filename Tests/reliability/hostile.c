/*
 * hostile.c: the library against a server that sends any bytes (issue 13). Run through
 * Tests/c/with_fixture.py --server Tests/reliability/hostile_server.py.
 *
 * For every case of the hostile server: the documented outcome, exactly one completion, the
 * process alive (no trap reachable from a byte the server sends), and the memory the server can
 * make the library hold bounded: the peak RSS of the process during the case (VmHWM, reset before
 * each case through /proc/self/clear_refs) stays within a budget above what it was before.
 *
 *   hostile [--rss-budget-mib N] BASE_URL
 */
#include "rel.h"

static const char *base;
static long rss_budget_kib = 64 * 1024;
static int cases_run;
static long max_growth_kib; /* the largest peak RSS growth of a case */

/* ---- memory ------------------------------------------------------------------------------------ */

static long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long value = -1;
    size_t n = strlen(field);
    if (!f)
        FAIL("cannot open /proc/self/status");
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            value = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return value;
}

/* Resets the peak RSS to the current RSS; returns the current RSS. */
static long reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0 || fclose(f) != 0)
        FAIL("cannot reset the peak RSS through /proc/self/clear_refs");
    return status_kib("VmRSS");
}

/* ---- one request, its completion and progress calls --------------------------------------------- */

typedef struct {
    atomic_int completions;
    rq_outcome outcome;
    int status;
    unsigned attempts;
    size_t body_size;
    char message[512];
    rq_metrics metrics;
    /* streamed pieces */
    atomic_ullong streamed;
    /* progress: every call checked as it comes */
    int progress_calls;
    int64_t last_done;
    char progress_error[256];
    double last_progress;
    int64_t last_total;
    /* authentication */
    int challenges;
    /* cancel the request from its progress callback once this many bytes arrived (0: never) */
    int64_t cancel_after;
} outcome_t;

static void on_done(void *context, rq_request *request, const rq_response *response) {
    outcome_t *o = context;
    (void)request;
    o->outcome = rq_response_outcome(response);
    o->status = rq_response_status(response);
    o->attempts = rq_response_attempts(response);
    rq_response_body(response, &o->body_size);
    snprintf(o->message, sizeof o->message, "%s", rq_response_error_message(response));
    o->metrics.size = sizeof o->metrics;
    rq_response_metrics(response, &o->metrics);
    atomic_fetch_add(&o->completions, 1);
}

static int on_body(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    outcome_t *o = context;
    (void)request, (void)data, (void)offset;
    atomic_fetch_add(&o->streamed, size);
    return 0;
}

static void on_progress(void *context, rq_request *request, double progress, int64_t done, int64_t total) {
    outcome_t *o = context;
    o->progress_calls++;
    if (o->progress_error[0])
        return;
    if (done < o->last_done)
        snprintf(o->progress_error, sizeof o->progress_error, "done went from %lld down to %lld",
                 (long long)o->last_done, (long long)done);
    else if (total >= 0 && done > total)
        snprintf(o->progress_error, sizeof o->progress_error, "done %lld > total %lld (progress %g)",
                 (long long)done, (long long)total, progress);
    else if (progress == 1.0 && done != total)
        snprintf(o->progress_error, sizeof o->progress_error, "progress 1.0 with %lld/%lld bytes",
                 (long long)done, (long long)total);
    o->last_done = done;
    o->last_total = total;
    o->last_progress = progress;
    if (o->cancel_after > 0 && done >= o->cancel_after)
        rq_cancel(request);
}

static void on_challenge(void *context, rq_request *request, rq_auth_challenge *challenge, unsigned failures,
                         const rq_response *response) {
    outcome_t *o = context;
    (void)request, (void)response;
    o->challenges++;
    if (failures == 0)
        rq_auth_use_credential(challenge, "user", "secret");
    else
        rq_auth_continue_without(challenge);
}

typedef void (*setup_fn)(rq_request *request, outcome_t *o, void *arg);

/* Runs one request for base + path on `queue`, with `setup` to change it, and waits for its
 * completion. Checks one completion and the peak RSS budget. */
static void run(rq_queue *queue, const char *path, setup_fn setup, void *arg, outcome_t *o) {
    char *url = rqt_url(base, "%s", path);
    rq_request *request;
    memset(o, 0, sizeof *o);
    o->last_done = -1;
    long before = reset_peak();
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_done, o, NULL));
    if (setup)
        setup(request, o, arg);
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    long peak = status_kib("VmHWM");
    CHECK(atomic_load(&o->completions) == 1, "%s: %d completions", path, atomic_load(&o->completions));
    CHECK(peak - before <= rss_budget_kib, "%s: the peak RSS grew by %ld KiB (budget %ld KiB); outcome %s: %s",
          path, peak - before, rss_budget_kib, rq_outcome_str((int)o->outcome), o->message);
    printf("  %-72s %-16s status %4d, attempts %u, body %zu, peak RSS +%ld KiB: %s\n", path,
           rq_outcome_str((int)o->outcome), o->status, o->attempts, o->body_size, peak - before, o->message);
    fflush(stdout);
    cases_run++;
    if (peak - before > max_growth_kib)
        max_growth_kib = peak - before;
    free(url);
}

static void expect(rq_queue *queue, const char *path, setup_fn setup, void *arg, rq_outcome outcome, int status) {
    outcome_t o;
    run(queue, path, setup, arg, &o);
    CHECK(o.outcome == outcome, "%s: outcome %s (%s), expected %s", path, rq_outcome_str((int)o.outcome),
          o.message, rq_outcome_str((int)outcome));
    CHECK(status < 0 || o.status == status, "%s: status %d, expected %d", path, o.status, status);
}

/* ---- setups ------------------------------------------------------------------------------------- */

static void streamed(rq_request *request, outcome_t *o, void *arg) {
    (void)o, (void)arg;
    CHECK_OK(rq_request_set_body_callback(request, on_body));
}

static void to_file(rq_request *request, outcome_t *o, void *path) {
    (void)o;
    CHECK_OK(rq_request_set_output_file(request, path, 1));
}

static void retried(rq_request *request, outcome_t *o, void *arg) {
    static const int statuses[] = {429, 503};
    (void)o, (void)arg;
    CHECK_OK(rq_request_set_retry(request, 1));
    CHECK_OK(rq_request_set_retry_delay(request, 0.01));
    CHECK_OK(rq_request_set_retry_statuses(request, statuses, 2));
    CHECK_OK(rq_request_set_max_attempts(request, 2));
}

static void retry_default(rq_request *request, outcome_t *o, void *arg) {
    (void)o, (void)arg;
    CHECK_OK(rq_request_set_retry(request, 1));
    CHECK_OK(rq_request_set_retry_delay(request, 0.01));
    CHECK_OK(rq_request_set_max_attempts(request, 3));
}

static void limited(rq_request *request, outcome_t *o, void *arg) {
    (void)o, (void)arg;
    CHECK_OK(rq_request_set_max_response_size(request, 1 << 20));
}

static void with_progress(rq_request *request, outcome_t *o, void *arg) {
    (void)o, (void)arg;
    CHECK_OK(rq_request_set_download_progress(request, on_progress));
}

static void with_auth(rq_request *request, outcome_t *o, void *arg) {
    with_progress(request, o, arg);
    CHECK_OK(rq_request_set_auth_handler(request, on_challenge));
}

/* A POST of 100000 bytes with upload progress, answering the challenge: the body is sent twice
 * within the attempt, and `done` must not go back. */
static void upload_with_auth(rq_request *request, outcome_t *o, void *arg) {
    static uint8_t body[100000];
    (void)o, (void)arg;
    memset(body, 'b', sizeof body);
    CHECK_OK(rq_request_set_method(request, "POST"));
    CHECK_OK(rq_request_set_body(request, body, sizeof body));
    CHECK_OK(rq_request_set_upload_progress(request, on_progress));
    CHECK_OK(rq_request_set_auth_handler(request, on_challenge));
}

/* The number of requests the server logged whose path starts with `prefix`. */
static int server_saw(const char *prefix) {
    char *log = rqt_get(base, "/_/log");
    char needle[512];
    int n = 0;
    snprintf(needle, sizeof needle, "\"path\": \"%s", prefix);
    for (const char *p = strstr(log, needle); p; p = strstr(p + 1, needle))
        n++;
    free(log);
    return n;
}

/* ---- the classes -------------------------------------------------------------------------------- */

/* Retry-After values that no arithmetic may trap on, with retry off (defaults) and on. */
static void retry_after_values(rq_queue *queue) {
    static const char *values[] = {
        "Sun,%2006%20Nov%20100000000000000%2008:49:37%20GMT",
        "Sun,%2006%20Nov%209223372036854775807%2008:49:37%20GMT",
        "Sun,%2006%20Nov%20-9223372036854775808%2008:49:37%20GMT",
        "Sun,%2006%20Nov%20-99999999999999%2008:49:37%20GMT",
        "Sun,%2099999999999999999999%20Nov%201994%2008:49:37%20GMT",
        "Sun,%2006%20Nov%201994%2099999999999999999999:49:37%20GMT",
        "99999999999999999999999999",
        "999999999",
        "-1",
        "1e308",
        "nan",
        "",
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        for (int code = 429; code <= 503; code += 503 - 429) {
            char path[256];
            snprintf(path, sizeof path, "/case/retry-after?status=%d&value=%s", code, values[i]);
            expect(queue, path, NULL, NULL, RQ_OUTCOME_HTTP_STATUS, code);
            if (strcmp(values[i], "999999999") == 0)
                continue; /* a usable delay of 31 years: not waited for */
            outcome_t o;
            run(queue, path, retried, NULL, &o);
            CHECK(o.outcome == RQ_OUTCOME_HTTP_STATUS && o.status == code,
                  "%s with retry: outcome %s, status %d", path, rq_outcome_str((int)o.outcome), o.status);
            /* An unusable or absurd date is ignored: the retry delay applies and both attempts run. */
            CHECK(o.attempts == 2, "%s with retry: %u attempts, expected 2", path, o.attempts);
        }
    }
}

static void header_budget(rq_queue *queue) {
    expect(queue, "/case/endless-headers", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/endless-headers?line=10", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    /* A slow drip (10 ms between pieces of 64 KiB) meets the same budget. */
    expect(queue, "/case/endless-headers?pace=0.01", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/endless-header-line", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
    /* Informational responses without end: each has its own budget, and their number is bounded. */
    expect(queue, "/case/endless-interim", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
}

static void trailer_budget(rq_queue *queue) {
    expect(queue, "/case/endless-trailers", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/endless-trailers", streamed, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/endless-trailers?line=10", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/many-trailers", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/many-trailers?count=10", NULL, NULL, RQ_OUTCOME_OK, 200);
}

static void transfer_codings(rq_queue *queue) {
    /* "chunked" in any case, with blanks around it, is the coding libcurl decodes: taken. */
    static const char *chunked[] = {
        "SFRUUC8xLjEgMjAwIE9LDQpUcmFuc2Zlci1FbmNvZGluZzogQ2h1bmtlZA0KDQo1DQpoZWxsbw0KMA0KDQo%3D",
        "SFRUUC8xLjEgMjAwIE9LDQp0cmFuc2Zlci1lbmNvZGluZzpDSFVOS0VEIA0KDQo1DQpoZWxsbw0KMA0KDQo%3D"};
    for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++) {
        char path[256];
        outcome_t o;
        snprintf(path, sizeof path, "/case/raw?b64=%s", chunked[i]);
        run(queue, path, NULL, NULL, &o);
        CHECK(o.outcome == RQ_OUTCOME_OK && o.status == 200 && o.body_size == 5, "%s: outcome %s (%s), status %d, body %zu",
              path, rq_outcome_str((int)o.outcome), o.message, o.status, o.body_size);
    }
    expect(queue, "/case/te-gzip", streamed, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/te-gzip", limited, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/te-gzip?chunked=0", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
    expect(queue, "/case/te-gzip?size=1000", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 200);
}

static void not_http(rq_queue *queue) {
    expect(queue, "/case/http09", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 0);
    expect(queue, "/case/garbage", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 0);
    /* After a redirect: still a bad response, not a bad redirect. */
    expect(queue, "/case/redirect-body?size=5&to=/case/http09", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
    expect(queue, "/case/redirect-body?size=5&to=/case/garbage", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
    expect(queue, "/case/redirect-body?size=5&to=/case/status%3Fcode%3D1000", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
    static const char *codes[] = {"0", "99", "1000", "600", "abc", "20", "2000", "-200", "99999999999999999999"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/case/status?code=%s", codes[i]);
        expect(queue, path, NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, 0);
        expect(queue, path, retry_default, NULL, RQ_OUTCOME_BAD_RESPONSE, 0);
    }
    expect(queue, "/case/status?code=299", NULL, NULL, RQ_OUTCOME_OK, 299);
    expect(queue, "/case/status?code=599", NULL, NULL, RQ_OUTCOME_HTTP_STATUS, 599);
}

/* Any bytes at any pace: a valid reply one byte at a time, 2 ms apart, is parsed whole. */
static void drip(rq_queue *queue) {
    /* "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n" */
    outcome_t o;
    run(queue,
        "/case/raw?split=1&pace=0.002&b64=SFRUUC8xLjEgMjAwIE9LDQpUcmFuc2Zlci1FbmNvZGluZzogY2h1bmtlZA0KDQo1DQpoZWxsbw0KMA0KWC1UOiAxDQoNCg%3D%3D",
        NULL, NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_OK && o.status == 200 && o.body_size == 5, "drip: outcome %s, status %d, body %zu (%s)",
          rq_outcome_str((int)o.outcome), o.status, o.body_size, o.message);
}

static void chunk_framing(rq_queue *queue) {
    static const char *sizes[] = {"zz", "ffffffffffffffffffffffff", "-5", "%20"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char path[128], prefix[128];
        snprintf(path, sizeof path, "/case/bad-chunk?chunk=%s&n=%zu", sizes[i], i);
        snprintf(prefix, sizeof prefix, "/case/bad-chunk?chunk=%s&n=%zu", sizes[i], i);
        outcome_t o;
        run(queue, path, retry_default, NULL, &o);
        CHECK(o.outcome == RQ_OUTCOME_BAD_RESPONSE, "%s: outcome %s (%s), expected a bad response", path,
              rq_outcome_str((int)o.outcome), o.message);
        CHECK(o.attempts == 1 && server_saw(prefix) == 1, "%s: %u attempts, the server saw %d", path,
              o.attempts, server_saw(prefix));
    }
}

static void lengths_and_ranges(rq_queue *queue, const char *tmp) {
    char file[1024];
    snprintf(file, sizeof file, "%s/hostile-resume", tmp);
    static const char *ranges[] = {
        "bytes%2099999999999999999999999-99999999999999999999999/*",
        "bytes%209223372036854775807-9223372036854775807/*",
        "bytes%20-5-10/20",
        "bytes%205-",
        "bytes",
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        FILE *f = fopen(file, "w");
        CHECK(f && fputs("12345", f) >= 0 && fclose(f) == 0, "cannot write %s", file);
        char path[256];
        snprintf(path, sizeof path, "/case/content-range?range=%s", ranges[i]);
        expect(queue, path, to_file, file, RQ_OUTCOME_BAD_RESPONSE, 206);
        f = fopen(file, "r");
        char buf[16] = {0};
        CHECK(f && fread(buf, 1, sizeof buf, f) == 5 && memcmp(buf, "12345", 5) == 0, "%s: the file changed", path);
        fclose(f);
    }
    unlink(file);
    expect(queue, "/case/content-length?length=99999999999999999999999", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
    expect(queue, "/case/content-length?length=-5", NULL, NULL, RQ_OUTCOME_BAD_RESPONSE, -1);
}

/* The body of an error answer to a streaming request is collected, at most RQ_ERROR_BODY_LIMIT. */
static void error_bodies(rq_queue *queue, const char *tmp) {
    char file[1024];
    snprintf(file, sizeof file, "%s/hostile-error-body", tmp);
    unlink(file);
    outcome_t o;
    run(queue, "/case/endless-error", to_file, file, &o);
    CHECK(o.outcome == RQ_OUTCOME_HTTP_STATUS && o.status == 500 && o.body_size == 1 << 20,
          "endless error body to a file: outcome %s, status %d, body %zu (%s)", rq_outcome_str((int)o.outcome),
          o.status, o.body_size, o.message);
    CHECK(access(file, F_OK) != 0, "the error body created the output file");
    run(queue, "/case/endless-error?code=404", streamed, NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_HTTP_STATUS && o.status == 404 && o.body_size == 1 << 20 &&
              atomic_load(&o.streamed) == 0,
          "endless error body to a callback: outcome %s, status %d, body %zu, streamed %llu", rq_outcome_str((int)o.outcome),
          o.status, o.body_size, (unsigned long long)atomic_load(&o.streamed));
}

/* Progress across the responses of one attempt: a redirect with a body, an answered challenge. */
static void progress(rq_queue *queue) {
    static const char *paths[] = {
        "/case/redirect-body?size=227&to=/case/empty",
        "/case/redirect-body?size=227&to=/case/status%3Fcode%3D200",
        "/case/redirect-body?size=100000&to=/case/status%3Fcode%3D200",
        "/case/challenge?size=227",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        outcome_t o;
        run(queue, paths[i], i == 3 ? with_auth : with_progress, NULL, &o);
        CHECK(o.outcome == RQ_OUTCOME_OK && o.progress_calls > 0, "%s: outcome %s, %d progress calls", paths[i],
              rq_outcome_str((int)o.outcome), o.progress_calls);
        CHECK(o.progress_error[0] == 0, "%s: %s", paths[i], o.progress_error);
        CHECK(o.last_progress == 1.0 && o.last_done == o.last_total, "%s: final progress %g with %lld/%lld", paths[i],
              o.last_progress, (long long)o.last_done, (long long)o.last_total);
        CHECK(i != 3 || o.challenges == 1, "%s: %d challenges", paths[i], o.challenges);
    }
    outcome_t o;
    run(queue, "/case/challenge?size=227&upload=1", upload_with_auth, NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_OK && o.challenges == 1 && o.progress_error[0] == 0 && o.last_done == 100000 &&
              o.last_progress == 1.0,
          "upload across a challenge: outcome %s, %d challenges, final %lld/%lld: %s", rq_outcome_str((int)o.outcome),
          o.challenges, (long long)o.last_done, (long long)o.last_total, o.progress_error);
}

static void cancel_while_streaming(rq_request *request, outcome_t *o, void *arg) {
    (void)arg;
    o->cancel_after = 100000;
    streamed(request, o, NULL);
    with_progress(request, o, NULL);
}

/* A cancelled request's final progress call does not go back to 0. */
static void progress_cancelled(rq_queue *queue) {
    outcome_t o;
    run(queue, "/case/endless-error?code=200", cancel_while_streaming, NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_CANCELLED && o.progress_error[0] == 0 && o.last_done >= 100000,
          "cancelled while streaming: outcome %s, final done %lld: %s", rq_outcome_str((int)o.outcome),
          (long long)o.last_done, o.progress_error);
}

/* Wire and decoded bytes apart in the metrics. */
static void metrics(rq_queue *queue) {
    outcome_t o;
    run(queue, "/case/many-trailers?count=10", NULL, NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_OK && o.metrics.size == sizeof o.metrics, "outcome %s, metrics size %zu",
          rq_outcome_str((int)o.outcome), o.metrics.size);
    /* "HTTP/1.1 200 OK\r\n" + "Transfer-Encoding: chunked\r\n" + "\r\n" at least, trailers maybe. */
    CHECK(o.metrics.bytes_down == 5 && o.metrics.wire_bytes_down == 5 && o.metrics.header_bytes_down >= 47,
          "chunked body of 5 bytes: bytes_down %llu, wire_bytes_down %llu, header_bytes_down %llu",
          (unsigned long long)o.metrics.bytes_down, (unsigned long long)o.metrics.wire_bytes_down,
          (unsigned long long)o.metrics.header_bytes_down);
    run(queue, "/case/redirect-body?size=227&to=/case/status%3Fcode%3D200", NULL, NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_OK && o.metrics.bytes_down == 5 && o.metrics.header_bytes_down > 60,
          "after a redirect: outcome %s, bytes_down %llu, header_bytes_down %llu", rq_outcome_str((int)o.outcome),
          (unsigned long long)o.metrics.bytes_down, (unsigned long long)o.metrics.header_bytes_down);
    CHECK(o.metrics.http_version == 11, "after a redirect: HTTP version %d", o.metrics.http_version);
    /* The version of the status line: HTTP/1.0 ("HTTP/1.0 200 OK", Content-Length: 2, "ok"). */
    run(queue, "/case/raw?b64=SFRUUC8xLjAgMjAwIE9LDQpDb250ZW50LUxlbmd0aDogMg0KQ29ubmVjdGlvbjogY2xvc2UNCg0Kb2s%3D", NULL,
        NULL, &o);
    CHECK(o.outcome == RQ_OUTCOME_OK && o.status == 200 && o.body_size == 2 && o.metrics.http_version == 10,
          "HTTP/1.0: outcome %s (%s), status %d, body %zu, HTTP version %d", rq_outcome_str((int)o.outcome), o.message,
          o.status, o.body_size, o.metrics.http_version);
}

/* A request cancelled while it waits for its retry delay reports the attempts made. */
static void cancel_in_retry_delay(rq_queue *queue) {
    outcome_t o;
    memset(&o, 0, sizeof o);
    char *url = rqt_url(base, "/case/retry-after?status=503&value=3600&id=cancel");
    rq_request *request;
    rq_queue_stats before = {.size = sizeof before}, now = {.size = sizeof now};
    CHECK_OK(rq_queue_get_stats(queue, &before));
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_done, &o, NULL));
    retried(request, &o, NULL);
    CHECK_OK(rq_request_set_max_attempts(request, 0));
    CHECK_OK(rq_add(queue, request));
    WAIT_FOR((rq_queue_get_stats(queue, &now), now.retried > before.retried), "the retry was not scheduled");
    CHECK_OK(rq_cancel(request));
    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    int seen = server_saw("/case/retry-after?status=503&value=3600&id=cancel");
    CHECK(o.completions == 1 && o.outcome == RQ_OUTCOME_CANCELLED && o.attempts == (unsigned)seen && seen == 1,
          "cancelled in its retry delay: outcome %s, attempts %u, the server saw %d", rq_outcome_str((int)o.outcome),
          o.attempts, seen);
    CHECK(o.metrics.attempts == (unsigned)seen, "metrics.attempts %u, the server saw %d", o.metrics.attempts, seen);
    printf("  cancel during the retry delay: attempts %u, server saw %d\n", o.attempts, seen);
    cases_run++;
    free(url);
}

int main(int argc, char **argv) {
    const char *tmp = "/tmp";
    int i = 1;
    for (; i < argc - 1 && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--rss-budget-mib") == 0)
            rss_budget_kib = atol(argv[i + 1]) * 1024;
        else if (strcmp(argv[i], "--tmp") == 0)
            tmp = argv[i + 1];
        else
            FAIL("unknown option %s", argv[i]);
    }
    base = rqt_base_url(argc - i + 1, argv + i - 1);
    rq_queue *queue;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    double started = rqt_now();
    const char *only = getenv("RQ_HOSTILE_ONLY");
#define PART(name, call)                                                                           \
    if (!only || strstr(only, name)) {                                                             \
        printf("%s\n", name);                                                                      \
        call;                                                                                      \
    }
    PART("retry-after", retry_after_values(queue));
    PART("not-http", not_http(queue));
    PART("drip", drip(queue));
    PART("chunk-framing", chunk_framing(queue));
    PART("lengths", lengths_and_ranges(queue, tmp));
    PART("header-budget", header_budget(queue));
    PART("trailer-budget", trailer_budget(queue));
    PART("transfer-codings", transfer_codings(queue));
    PART("error-bodies", error_bodies(queue, tmp));
    PART("progress-responses", progress(queue));
    PART("progress-cancelled", progress_cancelled(queue));
    PART("metrics", metrics(queue));
    PART("cancel-in-retry-delay", cancel_in_retry_delay(queue));
    CHECK_OK(rq_queue_free(queue));
    printf("hostile: cases=%d seconds=%.1f rss_budget_mib=%ld max_peak_growth_kib=%ld\n", cases_run,
           rqt_now() - started, rss_budget_kib / 1024, max_growth_kib);
    printf("hostile: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
