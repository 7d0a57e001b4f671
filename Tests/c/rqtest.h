/*
 * rqtest.h: small helpers shared by the C tests of Tests/c and Tests/reliability (header-only; each
 * test is one program). Tests/reliability/rel.h adds what only the reliability programs use.
 *
 * A failed check prints file:line and a message to stderr and ends the process with status 1 at
 * once (_exit, so that a failure on a library thread cannot hang in exit handlers).
 */
#ifndef RQTEST_H
#define RQTEST_H

#include <requestqueue.h>

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* RQT_TSAN: built under ThreadSanitizer, which cannot start threads in the child of a
 * multi-threaded fork (it dies there): the fork checks are left to the other builds. */
#if defined(__SANITIZE_THREAD__)
#define RQT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RQT_TSAN 1
#endif
#endif
#include <unistd.h>

#if defined(__GNUC__) || defined(__clang__)
#define RQT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define RQT_NORETURN __attribute__((noreturn))
#define RQT_UNUSED __attribute__((unused))
#else
#define RQT_PRINTF(f, a)
#define RQT_NORETURN
#define RQT_UNUSED
#endif

RQT_UNUSED static atomic_int rqt_checks;

RQT_NORETURN RQT_PRINTF(3, 4) RQT_UNUSED static void rqt_fail(const char *file, int line,
                                                               const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s:%d: FAIL: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _exit(1);
}

#define FAIL(...) rqt_fail(__FILE__, __LINE__, __VA_ARGS__)

/* CHECK(condition, "format", args...): the message says what was observed. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        atomic_fetch_add(&rqt_checks, 1);                                                          \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            FAIL(__VA_ARGS__);                                                                     \
        }                                                                                          \
    } while (0)

/* CHECK_RC(call, expected result): names both codes on failure. */
#define CHECK_RC(expr, expected)                                                                   \
    do {                                                                                           \
        int rqt_rc_ = (int)(expr);                                                                 \
        int rqt_ex_ = (int)(expected);                                                             \
        atomic_fetch_add(&rqt_checks, 1);                                                          \
        if (rqt_rc_ != rqt_ex_)                                                                    \
            FAIL("%s returned %d (%s), expected %d (%s)", #expr, rqt_rc_, rq_result_str(rqt_rc_),  \
                 rqt_ex_, rq_result_str(rqt_ex_));                                                 \
    } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, RQ_OK)

/* The fixture's base URL: argv[1], else $RQ_TEST_BASE_URL, else http://127.0.0.1:$RQ_TEST_PORT. */
RQT_UNUSED static const char *rqt_base_url(int argc, char **argv) {
    static char built[64];
    const char *port = getenv("RQ_TEST_PORT");
    if (argc > 1)
        return argv[1];
    if (getenv("RQ_TEST_BASE_URL"))
        return getenv("RQ_TEST_BASE_URL");
    if (port) {
        snprintf(built, sizeof built, "http://127.0.0.1:%s", port);
        return built;
    }
    fprintf(stderr, "usage: %s BASE_URL (or set RQ_TEST_PORT); run it through with_fixture.py\n",
            argv[0]);
    exit(2);
}

/* A new string: base followed by the formatted path. Never NULL. */
RQT_PRINTF(2, 0) RQT_UNUSED static char *rqt_vurl(const char *base, const char *fmt, va_list ap) {
    char path[2048];
    vsnprintf(path, sizeof path, fmt, ap);
    size_t size = strlen(base) + strlen(path) + 1;
    char *url = malloc(size);
    if (!url)
        FAIL("out of memory");
    snprintf(url, size, "%s%s", base, path);
    return url;
}

RQT_PRINTF(2, 3) RQT_UNUSED static char *rqt_url(const char *base, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *url = rqt_vurl(base, fmt, ap);
    va_end(ap);
    return url;
}

/* A new string: prefix followed by n times c. Never NULL. */
RQT_UNUSED static char *rqt_repeat(char c, size_t n, const char *prefix) {
    size_t p = strlen(prefix);
    char *s = malloc(p + n + 1);
    if (!s)
        FAIL("out of memory");
    memcpy(s, prefix, p);
    memset(s + p, c, n);
    s[p + n] = '\0';
    return s;
}

/* The fixture's /bytes pattern, repeated from offset 0. */
RQT_UNUSED static const char RQT_PATTERN[] = "abcdefghijklmnopqrstuvwxyz0123456789";

/* 1 when body[0..size) is the fixture's /bytes pattern from offset 0. */
RQT_UNUSED static int rqt_is_pattern(const uint8_t *body, size_t size) {
    for (size_t i = 0; i < size; i++)
        if (body[i] != (uint8_t)RQT_PATTERN[i % (sizeof RQT_PATTERN - 1)])
            return 0;
    return 1;
}

RQT_UNUSED static double rqt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

RQT_UNUSED static void rqt_sleep(double seconds) {
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Waits until *counter >= target. The limit is a watchdog that turns a hang into a clear
 * failure, not a condition of success. */
#define WATCHDOG_SECONDS 60.0
#define WAIT_FOR(cond, ...)                                                                        \
    do {                                                                                           \
        double rqt_deadline_ = rqt_now() + WATCHDOG_SECONDS;                                       \
        while (!(cond)) {                                                                          \
            if (rqt_now() > rqt_deadline_) {                                                       \
                fprintf(stderr, "%s:%d: still not true after %.0f s: %s\n", __FILE__, __LINE__,    \
                        WATCHDOG_SECONDS, #cond);                                                  \
                FAIL(__VA_ARGS__);                                                                 \
            }                                                                                      \
            rqt_sleep(0.002);                                                                      \
        }                                                                                          \
    } while (0)

/* ---- one request, synchronously, on a private threaded queue --------------------------------- */

struct rqt_result {
    int done;
    int status;
    rq_outcome outcome;
    unsigned attempts;
    size_t size;
    char *body;        /* NUL-terminated copy, free it */
    char message[512];
    char url[1024];
};

/* A completion callback that fills the struct rqt_result given as context. */
RQT_UNUSED static void rqt_result_done(void *context, rq_request *request, const rq_response *response) {
    struct rqt_result *r = context;
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    (void)request;
    r->status = rq_response_status(response);
    r->outcome = rq_response_outcome(response);
    r->attempts = rq_response_attempts(response);
    r->size = size;
    r->body = malloc(size + 1);
    if (!r->body)
        FAIL("out of memory");
    memcpy(r->body, body, size);
    r->body[size] = '\0';
    snprintf(r->message, sizeof r->message, "%s", rq_response_error_message(response));
    snprintf(r->url, sizeof r->url, "%s", rq_response_url(response));
    r->done++;
}

typedef void (*rqt_configure_fn)(rq_request *request, const void *arg);

/* Runs `url` (configured by `configure` unless NULL) to its completion and returns what came back.
 * Fails the test if the request is not accepted or does not complete exactly once. */
RQT_UNUSED static struct rqt_result rqt_run(const char *url, rqt_configure_fn configure, const void *arg) {
    struct rqt_result r;
    memset(&r, 0, sizeof r);
    rq_queue *queue;
    rq_request *request;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, rqt_result_done, &r, NULL));
    if (configure)
        configure(request, arg);
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(queue));
    CHECK(r.done == 1, "%s: %d completions", url, r.done);
    return r;
}

/* GETs base+path (used to read the fixture's log) and returns the body (free it). Fails the test
 * unless the answer is a 200. */
RQT_PRINTF(2, 3) RQT_UNUSED static char *rqt_get(const char *base, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *url = rqt_vurl(base, fmt, ap);
    va_end(ap);
    struct rqt_result r = rqt_run(url, NULL, NULL);
    CHECK(r.status == 200 && r.outcome == RQ_OUTCOME_OK, "GET %s: status %d, outcome %s", url, r.status,
          rq_outcome_str((int)r.outcome));
    free(url);
    return r.body;
}

/* ---- reading the fixture's JSON log (json.dumps format: `"key": value`) ----------------------- */

/* The number of logged requests whose "id" is `id`. */
RQT_UNUSED static int rqt_log_count_id(const char *log, const char *id) {
    char needle[256];
    int count = 0;
    snprintf(needle, sizeof needle, "\"id\": \"%s\"", id);
    for (const char *p = strstr(log, needle); p; p = strstr(p + 1, needle))
        count++;
    return count;
}

/* The integer value of `"key": N` inside the object named `object` (or anywhere if NULL), or -1. */
RQT_UNUSED static long rqt_log_number(const char *log, const char *object, const char *key) {
    char needle[256];
    const char *start = log;
    if (object) {
        snprintf(needle, sizeof needle, "\"%s\": {", object);
        start = strstr(log, needle);
        if (!start)
            return -1;
    }
    const char *end = object ? strchr(start, '}') : NULL;
    snprintf(needle, sizeof needle, "\"%s\": ", key);
    const char *p = strstr(start, needle);
    if (!p || (end && p > end))
        return -1;
    return strtol(p + strlen(needle), NULL, 10);
}

#endif
