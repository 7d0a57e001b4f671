/*
 * test_conformance.c: HTTP conformance through the C API, against the fixture server (RFC 9110,
 * 9111, 9112, and what users of curl, requests, httpx or OkHttp expect): methods and bodies,
 * bodyless responses, 1xx, Expect: 100-continue, redirects, response headers, content decoding,
 * ranges, URLs and the Host header, header overrides and removal, cookies, Basic auth,
 * keep-alive, HTTP/1.0, chunked trailers, timeouts, (no) silent resending of non-idempotent
 * requests, status codes outside 100-599.
 *
 *   test_conformance BASE_URL [TEST...]   runs every test, or those named
 */
#define _GNU_SOURCE
#include "rqtest.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>

static const char *base;

/* ---- one request ---------------------------------------------------------------------------- */

struct hdr {
    const char *name;
    const char *value; /* NULL: rq_request_set_header(name, NULL), a removal */
};

struct opts {
    const char *method;
    const char *body;
    size_t body_len; /* strlen(body) when 0 and body is set */
    int empty_body;  /* rq_request_set_body(r, NULL, 0) */
    struct hdr headers[8];
    int max_redirects; /* 0: the default; -1: 0 (follow none); n: n */
    const char *user, *password;
    double timeout, idle_timeout;
    int no_decode;
    const char *proxy;
    int retry, retry_non_idempotent;
    const int *retry_statuses;
    size_t retry_status_count;
};

struct result {
    int done;
    const rq_response *response; /* retained */
};

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct result *r = context;
    (void)request;
    r->response = rq_response_retain(response);
    r->done++;
}

static void configure(rq_request *r, const struct opts *o) {
    if (!o)
        return;
    if (o->method)
        CHECK_OK(rq_request_set_method(r, o->method));
    if (o->body)
        CHECK_OK(rq_request_set_body(r, o->body, o->body_len ? o->body_len : strlen(o->body)));
    if (o->empty_body)
        CHECK_OK(rq_request_set_body(r, NULL, 0));
    for (size_t i = 0; i < sizeof o->headers / sizeof o->headers[0] && o->headers[i].name; i++)
        CHECK_OK(rq_request_set_header(r, o->headers[i].name, o->headers[i].value));
    if (o->max_redirects)
        CHECK_OK(rq_request_set_max_redirects(r, o->max_redirects < 0 ? 0 : (unsigned)o->max_redirects));
    if (o->user)
        CHECK_OK(rq_request_set_credentials(r, o->user, o->password));
    if (o->timeout > 0)
        CHECK_OK(rq_request_set_timeout(r, o->timeout));
    if (o->idle_timeout > 0)
        CHECK_OK(rq_request_set_idle_timeout(r, o->idle_timeout));
    if (o->no_decode)
        CHECK_OK(rq_request_set_option_int(r, RQ_OPTION_DECODE_CONTENT, 0));
    if (o->proxy)
        CHECK_OK(rq_request_set_option_string(r, RQ_OPTION_PROXY, o->proxy));
    if (o->retry) {
        CHECK_OK(rq_request_set_retry(r, 1));
        CHECK_OK(rq_request_set_retry_delay(r, 0));
        CHECK_OK(rq_request_set_max_attempts(r, 3));
    }
    if (o->retry_non_idempotent)
        CHECK_OK(rq_request_set_retry_non_idempotent(r, 1));
    if (o->retry_status_count)
        CHECK_OK(rq_request_set_retry_statuses(r, o->retry_statuses, o->retry_status_count));
}

/* Runs one request for `url` on `queue` (a new one when NULL) and returns its retained response. */
static const rq_response *run_on(rq_queue *queue, const char *url, const struct opts *o) {
    struct result res = {0, NULL};
    rq_queue *q = queue;
    rq_request *r;
    if (!q)
        CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_completion(r, on_done, &res, NULL));
    configure(r, o);
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    if (!queue)
        CHECK_OK(rq_queue_free(q));
    CHECK(res.done == 1, "%s: %d completions", url, res.done);
    return res.response;
}

static const rq_response *run(const char *path, const struct opts *o) {
    char *url = rqt_url(base, "%s", path);
    const rq_response *response = run_on(NULL, url, o);
    free(url);
    return response;
}

/* The body as a string (a copy, until the next call; tests call it from one thread). */
static const char *body_of(const rq_response *response) {
    size_t size;
    const uint8_t *body = rq_response_body(response, &size);
    static char copy[4 << 20];
    size = size < sizeof copy - 1 ? size : sizeof copy - 1;
    memcpy(copy, body, size);
    copy[size] = '\0';
    return copy;
}

static size_t body_size(const rq_response *response) {
    size_t size;
    rq_response_body(response, &size);
    return size;
}

static const char *outcome_name(const rq_response *response) {
    return rq_outcome_str((int)rq_response_outcome(response));
}

#define CHECK_STATUS(response, expected_outcome, expected_status)                                  \
    CHECK(rq_response_outcome(response) == (expected_outcome) &&                                   \
              rq_response_status(response) == (expected_status),                                   \
          "outcome %s, status %d (%s), expected %s, %d; body %.200s",                              \
          outcome_name(response), rq_response_status(response),                                    \
          rq_response_error_message(response), rq_outcome_str((int)(expected_outcome)),            \
          (int)(expected_status), body_of(response))

/* ---- what the server saw (/inspect's JSON) -------------------------------------------------- */

/* The number of request headers named `name` (any case) in /inspect's answer. */
static int header_count(const char *json, const char *name) {
    char needle[256];
    int count = 0;
    snprintf(needle, sizeof needle, "[\"%s\", \"", name);
    for (const char *p = strcasestr(json, needle); p; p = strcasestr(p + 1, needle))
        count++;
    return count;
}

/* The value of the first request header named `name` (any case), copied; "" and *found 0 when absent. */
static const char *header_value(const char *json, const char *name) {
    static _Thread_local char value[1024];
    char needle[256];
    snprintf(needle, sizeof needle, "[\"%s\", \"", name);
    const char *p = strcasestr(json, needle);
    value[0] = '\0';
    if (!p)
        return NULL;
    p += strlen(needle);
    size_t n = 0;
    while (p[n] && p[n] != '"' && n < sizeof value - 1) {
        value[n] = p[n];
        n++;
    }
    value[n] = '\0';
    return value;
}

static int has(const char *json, const char *text) { return strstr(json, text) != NULL; }

/* ---- /raw: a response written byte for byte --------------------------------------------------- */

static char *b64url(const char *data, size_t size) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char *out = malloc(size / 3 * 4 + 8);
    size_t o = 0;
    if (!out)
        FAIL("out of memory");
    for (size_t i = 0; i < size; i += 3) {
        unsigned v = (unsigned)(uint8_t)data[i] << 16;
        if (i + 1 < size)
            v |= (unsigned)(uint8_t)data[i + 1] << 8;
        if (i + 2 < size)
            v |= (uint8_t)data[i + 2];
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        if (i + 1 < size)
            out[o++] = alphabet[(v >> 6) & 63];
        if (i + 2 < size)
            out[o++] = alphabet[v & 63];
    }
    out[o] = '\0';
    return out;
}

/* The response to a request for /raw that sends `text` as it is. */
static const rq_response *raw(const char *text, const struct opts *o) {
    char *encoded = b64url(text, strlen(text));
    char *path = rqt_url("/raw?b64=", "%s", encoded);
    const rq_response *response = run(path, o);
    free(encoded);
    free(path);
    return response;
}

/* ---- the tests ---------------------------------------------------------------------------------- */

/* Methods without a body: no Content-Length, no Transfer-Encoding, nothing after the head. */
static void t_methods_without_body(void) {
    const char *methods[] = {"GET", "DELETE", "OPTIONS", "PROPFIND", "TRACE"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        struct opts o = {.method = methods[i]};
        const rq_response *response = run("/inspect", &o);
        CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
        const char *json = body_of(response);
        char expected[64];
        snprintf(expected, sizeof expected, "\"method\": \"%s\"", methods[i]);
        CHECK(has(json, expected), "%s: the server saw %s", methods[i], json);
        CHECK(header_count(json, "Content-Length") == 0 && header_count(json, "Transfer-Encoding") == 0,
              "%s without a body sent a body length: %s", methods[i], json);
        CHECK(header_count(json, "Content-Type") == 0, "%s without a body sent a Content-Type: %s", methods[i], json);
        rq_response_release(response);
    }
}

/* Methods with a body: exactly one Content-Length with its size, no Transfer-Encoding, the bytes
 * as given (binary included), and no Content-Type the caller did not set. */
static void t_methods_with_body(void) {
    const char *methods[] = {"POST", "PUT", "PATCH", "DELETE", "GET", "REPORT", "OPTIONS"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        struct opts o = {.method = methods[i], .body = "hello\0world", .body_len = 11};
        const rq_response *response = run("/inspect", &o);
        CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
        const char *json = body_of(response);
        char expected[64];
        snprintf(expected, sizeof expected, "\"method\": \"%s\"", methods[i]);
        CHECK(has(json, expected), "%s: the server saw %s", methods[i], json);
        CHECK(header_count(json, "Content-Length") == 1 && strcmp(header_value(json, "Content-Length"), "11") == 0,
              "%s: Content-Length: %s", methods[i], json);
        CHECK(header_count(json, "Transfer-Encoding") == 0, "%s: %s", methods[i], json);
        CHECK(has(json, "\"body\": \"hello\\u0000world\""), "%s: body %s", methods[i], json);
        CHECK(header_count(json, "Content-Type") == 0, "%s: a Content-Type nobody set: %s", methods[i], json);
        rq_response_release(response);
    }
    /* The caller's Content-Type, once. */
    struct opts o = {.method = "POST", .body = "{}", .headers = {{"Content-Type", "application/json"}}};
    const rq_response *response = run("/inspect", &o);
    const char *json = body_of(response);
    CHECK(header_count(json, "Content-Type") == 1 && strcmp(header_value(json, "Content-Type"), "application/json") == 0,
          "Content-Type: %s", json);
    rq_response_release(response);
}

/* POST, PUT and PATCH without a body send "Content-Length: 0" (RFC 9110 8.6). */
static void t_empty_bodies(void) {
    const char *methods[] = {"POST", "PUT", "PATCH"};
    for (size_t i = 0; i < 3; i++) {
        for (int set_empty = 0; set_empty < 2; set_empty++) {
            struct opts o = {.method = methods[i], .empty_body = set_empty};
            const rq_response *response = run("/inspect", &o);
            CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
            const char *json = body_of(response);
            CHECK(header_count(json, "Content-Length") == 1 && strcmp(header_value(json, "Content-Length"), "0") == 0,
                  "%s (empty body set: %d): %s", methods[i], set_empty, json);
            CHECK(header_count(json, "Transfer-Encoding") == 0, "%s: %s", methods[i], json);
            rq_response_release(response);
        }
    }
}

/* A Transfer-Encoding: chunked set by the caller: the body goes chunked, with no Content-Length
 * beside it (RFC 9112 6.2: a sender must not send both). */
static void t_chunked_upload(void) {
    struct opts o = {.method = "POST", .body = "chunky body", .headers = {{"Transfer-Encoding", "chunked"}}};
    const rq_response *response = run("/inspect", &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    const char *json = body_of(response);
    CHECK(header_count(json, "Content-Length") == 0, "Content-Length beside chunked: %s", json);
    CHECK(has(json, "\"body\": \"chunky body\""), "body: %s", json);
    rq_response_release(response);
    /* Without a body (a GET, a HEAD), no Transfer-Encoding goes: it announced chunks that never came,
     * and the server waited for them (a timeout bounds the old behaviour). */
    const char *methods[] = {"GET", "HEAD"};
    for (size_t i = 0; i < 2; i++) {
        struct opts bodyless = {.method = methods[i], .timeout = 10, .headers = {{"Transfer-Encoding", "chunked"}}};
        response = run("/inspect", &bodyless);
        CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
        if (i == 0)
            CHECK(header_count(body_of(response), "Transfer-Encoding") == 0, "a GET without a body: %s", body_of(response));
        rq_response_release(response);
    }
    /* Any other transfer coding is refused: the library codes a body in no other way, and sent it
     * raw with that header and a Content-Length beside it (RFC 9112 6.2: never both). */
    rq_request *r;
    char *url = rqt_url(base, "/inspect");
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_header(r, "transfer-encoding", "Chunked"));
    const char *others[] = {"gzip", "chunked, gzip", "gzip, chunked", "identity"};
    for (size_t i = 0; i < 4; i++) {
        rq_result rc = rq_request_set_header(r, "Transfer-Encoding", others[i]);
        CHECK(rc == RQ_ERR_INVALID_HEADER, "Transfer-Encoding: %s gave %s", others[i], rq_result_str(rc));
        CHECK(strstr(rq_last_error_message(), "chunked") != NULL, "the message: %s", rq_last_error_message());
    }
    CHECK_OK(rq_request_free(r));
    free(url);
}

/* A Content-Length set by the caller is the body's size, whatever it said (RFC 9110 8.6: a sender
 * must not send one that differs). The caller's went out as given: too large, the server waited
 * for bytes that never came (the request timed out); too small, the body was cut there and the
 * rest went on the kept connection as the start of the next request; on a GET without a body,
 * the server waited. A timeout bounds the old behaviour. */
static void t_callers_content_length(void) {
    const char *values[] = {"5", "1", "3"};
    for (size_t i = 0; i < 3; i++) {
        struct opts o = {.method = "POST", .body = "abc", .timeout = 10, .headers = {{"Content-Length", values[i]}}};
        const rq_response *response = run("/inspect", &o);
        CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
        const char *json = body_of(response);
        CHECK(header_count(json, "Content-Length") == 1 && strcmp(header_value(json, "Content-Length"), "3") == 0,
              "Content-Length: %s set: %s", values[i], json);
        CHECK(has(json, "\"body\": \"abc\""), "Content-Length: %s set: %s", values[i], json);
        rq_response_release(response);
    }
    struct opts o = {.timeout = 10, .headers = {{"Content-Length", "3"}}};
    const rq_response *response = run("/inspect", &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(header_count(body_of(response), "Content-Length") == 0, "a GET without a body: %s", body_of(response));
    rq_response_release(response);
}

/* HEAD: the Content-Length of the GET, no body read, the connection reused afterwards. */
static void t_head(void) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    char *url = rqt_url(base, "/bytes?n=1000");
    struct opts o = {.method = "HEAD"};
    const rq_response *response = run_on(q, url, &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(body_size(response) == 0, "HEAD delivered %zu bytes", body_size(response));
    CHECK(strcmp(rq_response_header(response, "Content-Length"), "1000") == 0, "Content-Length %s",
          rq_response_header(response, "Content-Length"));
    rq_response_release(response);
    response = run_on(q, url, NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(body_size(response) == 1000, "GET after HEAD: %zu bytes", body_size(response));
    rq_metrics m = {.size = sizeof m};
    CHECK_OK(rq_response_metrics(response, &m));
    CHECK(m.connection_reused == 1, "the GET after a HEAD made a new connection");
    rq_response_release(response);
    free(url);
    CHECK_OK(rq_queue_free(q));
}

/* 204 and 304 have no body, whatever their headers say (RFC 9110 15.3.5, 15.4.5). */
static void t_bodyless_statuses(void) {
    const rq_response *response = raw("HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 204);
    CHECK(body_size(response) == 0 && strcmp(rq_response_header(response, "X-A"), "1") == 0, "204");
    rq_response_release(response);
    response = raw("HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nETag: \"x\"\r\n\r\n", NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 304);
    CHECK(body_size(response) == 0, "304: %zu bytes", body_size(response));
    CHECK(strcmp(rq_response_header(response, "ETag"), "\"x\"") == 0, "ETag");
    rq_response_release(response);
    /* On a kept connection: the next request is answered right (no body bytes were expected). */
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    char *url = rqt_url(base, "/status/204");
    response = run_on(q, url, NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 204);
    rq_response_release(response);
    free(url);
    url = rqt_url(base, "/bytes?n=10");
    response = run_on(q, url, NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(body_size(response) == 10, "after a 204: %zu bytes", body_size(response));
    rq_response_release(response);
    free(url);
    CHECK_OK(rq_queue_free(q));
}

/* 1xx responses before the final one: the final status, its headers only, its body. */
static void t_interim_responses(void) {
    const rq_response *response = raw("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                                      "HTTP/1.1 100 Continue\r\n\r\n"
                                      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Final: yes\r\n\r\nok",
                                      NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(body_of(response), "ok") == 0, "body %s", body_of(response));
    CHECK(rq_response_header(response, "Link") == NULL, "a header of the 103 in the final response");
    CHECK(rq_response_header_count(response) == 2, "%zu headers", rq_response_header_count(response));
    rq_response_release(response);
}

/* A large upload asks "Expect: 100-continue" (libcurl does from 1 MiB): a server that answers 100
 * gets the body; one that answers a final status at once does not get it. */
static void t_expect_continue(void) {
    size_t size = 2 << 20;
    char *big = rqt_repeat('x', size, "");
    struct opts o = {.method = "POST", .body = big, .body_len = size};
    const rq_response *response = run("/inspect", &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    const char *json = body_of(response);
    CHECK(has(json, "\"body_len\": 2097152"), "body_len: %.300s", strstr(json, "\"body_len\""));
    CHECK(strcasecmp(header_value(json, "Expect") ? header_value(json, "Expect") : "", "100-continue") == 0,
          "no Expect: 100-continue on a 2 MiB upload");
    rq_response_release(response);

    response = run("/expect-final?status=413&id=expect413", &o);
    CHECK_STATUS(response, RQ_OUTCOME_HTTP_STATUS, 413);
    rq_response_release(response);
    char *log = NULL;
    for (double deadline = rqt_now() + WATCHDOG_SECONDS;; rqt_sleep(0.01)) {
        free(log);
        log = rqt_get(base, "/_/log");
        if (has(log, "\"drained\": true"))
            break;
        CHECK(rqt_now() < deadline, "the server never saw the connection end: %s", log);
    }
    long sent = rqt_log_number(strstr(log, "expect413"), NULL, "body_len");
    CHECK(sent == 0, "the body was sent after a final answer to Expect: %ld bytes", sent);
    free(log);
    /* A 417 is the response (not repeated without the expectation: see the header). */
    response = run("/expect-final?status=417", &o);
    CHECK_STATUS(response, RQ_OUTCOME_HTTP_STATUS, 417);
    rq_response_release(response);
    /* The caller can turn the expectation off: a header set to an empty value replaces libcurl's. */
    struct opts off = {.method = "POST", .body = big, .body_len = size, .headers = {{"Expect", NULL}}};
    response = run("/inspect", &off);
    json = body_of(response);
    CHECK(header_count(json, "Expect") == 0, "Expect removed, still sent: %s", header_value(json, "Expect"));
    CHECK(has(json, "\"body_len\": 2097152"), "body_len");
    rq_response_release(response);
    free(big);
}

/* Redirects: which method and body follow each status (RFC 9110 15.4, as browsers and httpx do):
 * 301/302 turn POST into GET and 303 turns POST and GET into GET, dropping the body; 307/308 keep
 * method and body; other methods keep theirs, with their body, on 301/302. A 303 answering any
 * other method (PUT, PATCH, DELETE, OPTIONS, ...) is delivered, not followed (then_method NULL):
 * libcurl 7.88 would send that method again to the Location instead of a GET. */
struct hop_case {
    const char *method;
    int status;
    const char *then_method;
    int keeps_body;
};

/* The number of logged requests whose path starts with `prefix`. */
static int log_count(const char *prefix) {
    char *log = rqt_get(base, "/_/log");
    char needle[256];
    int count = 0;
    snprintf(needle, sizeof needle, "\"path\": \"%s", prefix);
    for (const char *p = strstr(log, needle); p; p = strstr(p + 1, needle))
        count++;
    free(log);
    return count;
}

static void t_redirect_methods(void) {
    static const struct hop_case cases[] = {
        {"POST", 301, "GET", 0},   {"POST", 302, "GET", 0},   {"POST", 303, "GET", 0},
        {"POST", 307, "POST", 1},  {"POST", 308, "POST", 1},  {"PUT", 301, "PUT", 1},
        {"PUT", 302, "PUT", 1},    {"PUT", 303, NULL, 0},     {"PUT", 307, "PUT", 1},
        {"PATCH", 302, "PATCH", 1}, {"PATCH", 303, NULL, 0},  {"PATCH", 308, "PATCH", 1},
        {"DELETE", 302, "DELETE", 0}, {"DELETE", 303, NULL, 0}, {"DELETE", 307, "DELETE", 0},
        {"GET", 303, "GET", 0},    {"OPTIONS", 303, NULL, 0}, {"REPORT", 302, "REPORT", 1},
        {"REPORT", 303, NULL, 0},  {"HEAD", 303, "HEAD", 0},  {"GET", 301, "GET", 0},
    };
    char wrong[4096] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct hop_case *c = &cases[i];
        int with_body = strcmp(c->method, "DELETE") != 0 && strcmp(c->method, "GET") != 0 &&
                        strcmp(c->method, "OPTIONS") != 0 && strcmp(c->method, "HEAD") != 0;
        struct opts o = {.method = c->method, .body = with_body ? "payload" : NULL,
                         .headers = {{"Content-Type", with_body ? "text/plain" : NULL}}};
        char path[128];
        snprintf(path, sizeof path, "/redirect-to?status=%d&url=/inspect", c->status);
        int before = log_count("/inspect");
        const rq_response *response = run(path, &o);
        if (!c->then_method) {
            CHECK_STATUS(response, RQ_OUTCOME_OK, 303);
            CHECK(strcmp(rq_response_header(response, "Location"), "/inspect") == 0 &&
                      strstr(rq_response_url(response), "/redirect-to") && log_count("/inspect") == before,
                  "%s then 303: followed to %s", c->method, rq_response_url(response));
            rq_response_release(response);
            continue;
        }
        if (strcmp(c->method, "HEAD") == 0) {
            CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
            CHECK(log_count("/inspect") == before + 1, "HEAD then 303: not followed");
            rq_response_release(response);
            continue;
        }
        CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
        const char *json = body_of(response);
        char expected[64];
        snprintf(expected, sizeof expected, "\"method\": \"%s\"", c->then_method);
        int right = has(json, expected);
        if (c->keeps_body)
            right = right && has(json, "\"body\": \"payload\"") && header_count(json, "Content-Length") == 1 &&
                    strcmp(header_value(json, "Content-Length"), "7") == 0 && header_count(json, "Content-Type") == 1;
        else /* (the caller's Content-Type goes along: libcurl sends the same header lines) */
            right = right && has(json, "\"body_len\": 0") && header_count(json, "Content-Length") == 0;
        if (!right) {
            const char *method = strstr(json, "\"method\": \"");
            size_t used = strlen(wrong);
            snprintf(wrong + used, sizeof wrong - used, "\n  %s then %d: expected %s%s, the server saw %.24s body_len %ld, Content-Type %d",
                     c->method, c->status, c->then_method, c->keeps_body ? " with the body" : " without a body",
                     method ? method + 11 : "?", rqt_log_number(json, NULL, "body_len"), header_count(json, "Content-Type"));
        }
        CHECK(strstr(rq_response_url(response), "/inspect") != NULL, "url %s", rq_response_url(response));
        rq_response_release(response);
    }
    CHECK(wrong[0] == '\0', "redirects that did not go as RFC 9110 says:%s", wrong);
}

/* Relative and scheme-relative Locations are resolved against the request's URL; the effective
 * URL is the last one fetched; a fragment never goes to the server. */
static void t_redirect_locations(void) {
    const char *port = strrchr(base, ':') + 1;
    struct {
        const char *location; /* percent-encoded for the query */
        const char *target;   /* what the server must see */
    } cases[] = {
        {"/inspect%3Fa%3D1", "/inspect?a=1"},
        {"inspect%3Fb%3D2", "/inspect?b=2"},
        {"./inspect", "/inspect"},
        {"/x/../inspect", "/inspect"},
        {"/inspect%23frag", "/inspect"},
        {NULL, NULL},
    };
    char scheme_relative[128];
    snprintf(scheme_relative, sizeof scheme_relative, "//127.0.0.1:%s/inspect%%3Fc%%3D3", port);
    cases[5].location = scheme_relative;
    cases[5].target = "/inspect?c=3";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/redirect-to?url=%s", cases[i].location);
        const rq_response *response = run(path, NULL);
        CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
        char expected[256];
        snprintf(expected, sizeof expected, "\"target\": \"%s\"", cases[i].target);
        CHECK(has(body_of(response), expected), "Location %s: the server saw %s", cases[i].location, body_of(response));
        char *url = rqt_url(base, "%s", cases[i].target);
        CHECK(strncmp(rq_response_url(response), url, strlen(url)) == 0, "Location %s: effective URL %s, expected %s",
              cases[i].location, rq_response_url(response), url);
        free(url);
        rq_response_release(response);
    }
    /* The request's own fragment is not sent either; it stays in the effective URL, also after a
     * redirect whose Location has none (RFC 9110 10.2.2), not after one that has its own. */
    const rq_response *response = run("/inspect?q=1#section", NULL);
    CHECK(has(body_of(response), "\"target\": \"/inspect?q=1\""), "fragment sent: %s", body_of(response));
    CHECK(strcmp(strchr(rq_response_url(response), '#'), "#section") == 0, "url %s", rq_response_url(response));
    rq_response_release(response);
    response = run("/redirect-to?url=/inspect#orig", NULL);
    const char *hash = strchr(rq_response_url(response), '#');
    CHECK(strstr(rq_response_url(response), "/inspect#") && hash && strcmp(hash, "#orig") == 0, "inherited: url %s",
          rq_response_url(response));
    rq_response_release(response);
    response = run("/redirect-to?url=/inspect%23loc#orig", NULL);
    hash = strchr(rq_response_url(response), '#');
    CHECK(hash && strcmp(hash, "#loc") == 0, "Location's own fragment: url %s", rq_response_url(response));
    rq_response_release(response);
}

/* The maximum number of redirects, the error past it, 0 delivering the 3xx itself, and a 3xx
 * without Location delivered as it is. */
static void t_redirect_limits(void) {
    struct opts two = {.max_redirects = 2}, three = {.max_redirects = 3}, none = {.max_redirects = -1};
    const rq_response *response = run("/redirect/3", &two);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_TOO_MANY_REDIRECTS, "3 redirects, max 2: %s",
          outcome_name(response));
    rq_response_release(response);
    response = run("/redirect/3", &three);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(body_of(response), "redirected") == 0, "body %s", body_of(response));
    CHECK(strstr(rq_response_url(response), "/redirect/0") != NULL, "url %s", rq_response_url(response));
    rq_response_release(response);
    response = run("/redirect/3", &none);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 302);
    CHECK(strcmp(rq_response_header(response, "Location"), "/redirect/2") == 0, "Location");
    CHECK(strstr(rq_response_url(response), "/redirect/3") != NULL, "url %s", rq_response_url(response));
    rq_response_release(response);
    response = run("/status/302", NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 302);
    rq_response_release(response);
    /* A 304 answers a conditional request (RFC 9110 15.4.5): it is no redirect, even with a
     * Location (libcurl would follow it and deliver what the Location gave). */
    int before = log_count("/inspect");
    struct opts conditional = {.headers = {{"If-None-Match", "\"v1\""}}};
    response = run("/redirect-to?status=304&url=/inspect", &conditional);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 304);
    CHECK(log_count("/inspect") == before && strstr(rq_response_url(response), "/redirect-to"),
          "304 with a Location followed to %s", rq_response_url(response));
    rq_response_release(response);
    /* The default maximum is 10. */
    response = run("/redirect/11", NULL);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_TOO_MANY_REDIRECTS, "11 redirects: %s", outcome_name(response));
    rq_response_release(response);
    response = run("/redirect-to?url=ftp://127.0.0.1/x", NULL);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_BAD_REDIRECT, "ftp redirect: %s", outcome_name(response));
    rq_response_release(response);
}

/* Response headers: lookup by any case, repeats kept in order, names as sent, blanks around
 * values trimmed, empty values, obs-fold joined with a space (RFC 9112 5.2). */
static void t_response_headers(void) {
    const rq_response *response = raw("HTTP/1.1 200 OK\r\n"
                                      "Content-Length: 2\r\n"
                                      "X-Case: Value\r\n"
                                      "Set-Cookie: a=1\r\n"
                                      "set-cookie: b=2\r\n"
                                      "X-Pad: \t padded \t\r\n"
                                      "X-Empty:\r\n"
                                      "X-Folded: first\r\n"
                                      " second\r\n"
                                      "\tthird: part\r\n"
                                      "X-After: after\r\n"
                                      "\r\nok",
                                      NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(rq_response_header(response, "x-case"), "Value") == 0, "x-case");
    CHECK(strcmp(rq_response_header(response, "X-CASE"), "Value") == 0, "X-CASE");
    CHECK(strcmp(rq_response_header(response, "SET-COOKIE"), "a=1") == 0, "first Set-Cookie");
    CHECK(strcmp(rq_response_header(response, "X-Pad"), "padded") == 0, "X-Pad [%s]", rq_response_header(response, "X-Pad"));
    CHECK(rq_response_header(response, "X-Empty") && strcmp(rq_response_header(response, "X-Empty"), "") == 0, "X-Empty");
    CHECK(rq_response_header(response, "X-Missing") == NULL, "X-Missing");
    const char *folded = rq_response_header(response, "X-Folded");
    CHECK(folded && strcmp(folded, "first second third: part") == 0, "folded value [%s]", folded ? folded : "(null)");
    size_t count = rq_response_header_count(response);
    const char *expected[][2] = {{"Content-Length", "2"}, {"X-Case", "Value"}, {"Set-Cookie", "a=1"},
                                 {"set-cookie", "b=2"}, {"X-Pad", "padded"}, {"X-Empty", ""},
                                 {"X-Folded", "first second third: part"}, {"X-After", "after"}};
    CHECK(count == 8, "%zu headers", count);
    for (size_t i = 0; i < count; i++) {
        const char *name, *value;
        CHECK_OK(rq_response_header_at(response, i, &name, &value));
        CHECK(strcmp(name, expected[i][0]) == 0 && strcmp(value, expected[i][1]) == 0, "header %zu: [%s: %s]", i,
              name, value);
    }
    rq_response_release(response);
}

/* The charset is the server's, in Content-Type; the body is the bytes sent (no conversion). */
static void t_charset(void) {
    const rq_response *response = run("/text?s=%C3%A9t%C3%A9&charset=iso-8859-1", NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(rq_response_header(response, "Content-Type"), "text/plain; charset=iso-8859-1") == 0, "type");
    CHECK(body_size(response) == 3 && (uint8_t)body_of(response)[0] == 0xE9, "latin-1 bytes");
    rq_response_release(response);
}

/* Content decoding: the body is decoded; the headers are the server's (Content-Encoding and the
 * compressed Content-Length); the metrics tell both sizes. */
static void t_content_decoding(void) {
    const char *codings[] = {"gzip", "deflate", "identity"};
    for (size_t i = 0; i < 3; i++) {
        for (int chunked = 0; chunked < 2; chunked++) {
            char path[128];
            snprintf(path, sizeof path, "/encoded?coding=%s&chunked=%d", codings[i], chunked);
            const rq_response *response = run(path, NULL);
            CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
            CHECK(body_size(response) == 2000 && strncmp(body_of(response), "line 0000: the quick", 20) == 0,
                  "%s: %zu bytes", path, body_size(response));
            CHECK(strcmp(rq_response_header(response, "Content-Encoding"), codings[i]) == 0, "Content-Encoding");
            rq_metrics m = {.size = sizeof m};
            CHECK_OK(rq_response_metrics(response, &m));
            CHECK(m.bytes_down == 2000, "%s: bytes_down %llu", path, (unsigned long long)m.bytes_down);
            if (!chunked && strcmp(codings[i], "identity") != 0) {
                long length = strtol(rq_response_header(response, "Content-Length"), NULL, 10);
                CHECK(length < 2000 && (uint64_t)length == m.wire_bytes_down, "%s: Content-Length %ld, wire %llu", path,
                      length, (unsigned long long)m.wire_bytes_down);
            }
            rq_response_release(response);
        }
    }
    /* "deflate" sent raw, without the zlib wrapper (as some servers do): decoded too. */
    const rq_response *raw_deflate = run("/encoded?coding=raw-deflate", NULL);
    CHECK_STATUS(raw_deflate, RQ_OUTCOME_OK, 200);
    CHECK(body_size(raw_deflate) == 2000, "raw deflate: %zu bytes", body_size(raw_deflate));
    rq_response_release(raw_deflate);
    /* Off: the bytes as sent, and no Accept-Encoding. */
    struct opts off = {.no_decode = 1};
    const rq_response *response = run("/encoded?coding=gzip", &off);
    CHECK(body_size(response) < 2000 && (uint8_t)body_of(response)[0] == 0x1f, "raw gzip: %zu bytes", body_size(response));
    rq_response_release(response);
    response = run("/inspect", &off);
    CHECK(header_count(body_of(response), "Accept-Encoding") == 0, "Accept-Encoding with decoding off");
    rq_response_release(response);
    response = run("/inspect", NULL);
    CHECK(header_count(body_of(response), "Accept-Encoding") == 1, "Accept-Encoding sent once");
    rq_response_release(response);
}

/* A coding this libcurl does not decode (RFC 9110 8.4.1 leaves it to the recipient): with decoding
 * on it is refused as RQ_OUTCOME_BAD_RESPONSE; with decoding off the bytes arrive as sent. */
static void t_unknown_coding(void) {
    const rq_response *response = run("/encoded?coding=x-custom&s=abc", NULL);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_BAD_RESPONSE, "x-custom decoded: %s, %s", outcome_name(response),
          body_of(response));
    rq_response_release(response);
    struct opts off = {.no_decode = 1};
    response = run("/encoded?coding=x-custom&s=abc", &off);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(body_of(response), "abc") == 0, "body %s", body_of(response));
    rq_response_release(response);
}

/* A Range header: 206 is a success, with the bytes asked for and the Content-Range. */
static void t_range(void) {
    struct opts o = {.headers = {{"Range", "bytes=10-19"}}};
    const rq_response *response = run("/bytes?n=100&ranges=1", &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 206);
    CHECK(body_size(response) == 10 && memcmp(body_of(response), "klmnopqrst", 10) == 0, "range body %s", body_of(response));
    CHECK(strcmp(rq_response_header(response, "Content-Range"), "bytes 10-19/100") == 0, "Content-Range");
    rq_response_release(response);
    struct opts past = {.headers = {{"Range", "bytes=500-"}}};
    response = run("/bytes?n=100&ranges=1", &past);
    CHECK_STATUS(response, RQ_OUTCOME_HTTP_STATUS, 416);
    rq_response_release(response);
}

/* URLs: the query and percent-encoding go to the server as written; upper-case scheme and host
 * are accepted; spaces and non-ASCII bytes are refused with a message (percent-encode them). */
static void t_urls(void) {
    const rq_response *response = run("/inspect?q=a%20b&x=%2F&y=%C3%A9&e=&flag", NULL);
    CHECK(has(body_of(response), "\"target\": \"/inspect?q=a%20b&x=%2F&y=%C3%A9&e=&flag\""), "target %s",
          body_of(response));
    rq_response_release(response);
    response = run("/x/./y/../../inspect?p=%2E%2E", NULL); /* dot segments go (RFC 3986 5.2.4) */
    CHECK(has(body_of(response), "\"target\": \"/inspect?p=%2E%2E\""), "target %s", body_of(response));
    rq_response_release(response);
    char upper[256];
    snprintf(upper, sizeof upper, "HTTP://127.0.0.1:%s/inspect", strrchr(base, ':') + 1);
    response = run_on(NULL, upper, NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%s", strrchr(base, ':') + 1);
    CHECK(strcmp(header_value(body_of(response), "Host"), host) == 0, "Host %s", header_value(body_of(response), "Host"));
    rq_response_release(response);
    rq_request *r = NULL;
    char *spaced = rqt_url(base, "/inspect?q=a b");
    CHECK_RC(rq_request_new(spaced, &r), RQ_ERR_INVALID_URL);
    CHECK(strstr(rq_last_error_message(), "space") != NULL, "message %s", rq_last_error_message());
    free(spaced);
    char *accented = rqt_url(base, "/caf\xc3\xa9");
    CHECK_RC(rq_request_new(accented, &r), RQ_ERR_INVALID_URL);
    free(accented);
}

/* The Host header, default ports and case, through a proxy (the fixture answers absolute-form
 * requests): the authority as RFC 9110 7.2 says, without the default port. */
static void t_host_header(void) {
    struct opts o = {.proxy = base};
    const rq_response *response = run_on(NULL, "http://Example.TEST:80/inspect?p=1", &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    const char *json = body_of(response);
    const char *hostv = header_value(json, "Host");
    CHECK(hostv && strcasecmp(hostv, "example.test") == 0, "Host [%s] for a URL with the default port", hostv);
    rq_response_release(response);
    response = run_on(NULL, "http://example.test:8080/inspect", &o);
    CHECK(strcmp(header_value(body_of(response), "Host"), "example.test:8080") == 0, "Host %s",
          header_value(body_of(response), "Host"));
    rq_response_release(response);
    /* The caller's Host wins. */
    struct opts own = {.headers = {{"Host", "virtual.example"}}};
    response = run("/inspect", &own);
    CHECK(header_count(body_of(response), "Host") == 1 && strcmp(header_value(body_of(response), "Host"), "virtual.example") == 0,
          "Host %s", body_of(response));
    rq_response_release(response);
}

/* An IPv6 literal: "[::1]" in the URL, the Host header "[::1]:port" (RFC 9110 7.2). The server is
 * this program's own listener on ::1 (skipped where the machine has no IPv6 loopback). */
struct v6_server {
    int fd;
    char request[4096];
};

static void *v6_serve(void *arg) {
    struct v6_server *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    size_t n = 0;
    while (n < sizeof s->request - 1 && !strstr(s->request, "\r\n\r\n")) {
        ssize_t got = recv(c, s->request + n, sizeof s->request - 1 - n, 0);
        if (got <= 0)
            break;
        n += (size_t)got;
        s->request[n] = '\0';
    }
    const char *answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nv6";
    if (send(c, answer, strlen(answer), 0) < 0)
        perror("send");
    close(c);
    return NULL;
}

static void t_ipv6_literal(void) {
    struct v6_server s = {.fd = socket(AF_INET6, SOCK_STREAM, 0)};
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    socklen_t len = sizeof a;
    if (s.fd < 0 || bind(s.fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s.fd, 4) != 0 ||
        getsockname(s.fd, (struct sockaddr *)&a, &len) != 0) {
        printf("ipv6_literal: skipped, no IPv6 loopback here\n");
        if (s.fd >= 0)
            close(s.fd);
        return;
    }
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, v6_serve, &s) == 0, "thread");
    char url[128];
    snprintf(url, sizeof url, "http://[::1]:%d/six?x=1", ntohs(a.sin6_port));
    const rq_response *response = run_on(NULL, url, NULL);
    pthread_join(thread, NULL);
    close(s.fd);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    char host[64];
    snprintf(host, sizeof host, "Host: [::1]:%d\r\n", ntohs(a.sin6_port));
    CHECK(strstr(s.request, "GET /six?x=1 HTTP/1.1\r\n") == s.request && strstr(s.request, host), "request: %s", s.request);
    CHECK(strcmp(rq_response_url(response), url) == 0, "url %s", rq_response_url(response));
    rq_response_release(response);
}

/* Headers set by the caller replace the library's and libcurl's (once each); a NULL value removes
 * the header altogether, those the library or libcurl would add included. */
static void t_header_overrides(void) {
    struct opts o = {.headers = {{"User-Agent", "conformance/1"}, {"Accept", "application/json"},
                                 {"Accept-Encoding", "identity"}, {"X-Custom", "v"}}};
    const rq_response *response = run("/inspect", &o);
    const char *json = body_of(response);
    CHECK(header_count(json, "User-Agent") == 1 && strcmp(header_value(json, "User-Agent"), "conformance/1") == 0, "%s", json);
    CHECK(header_count(json, "Accept") == 1 && strcmp(header_value(json, "Accept"), "application/json") == 0, "%s", json);
    CHECK(header_count(json, "Accept-Encoding") == 1 && strcmp(header_value(json, "Accept-Encoding"), "identity") == 0,
          "%s", json);
    CHECK(strcmp(header_value(json, "X-Custom"), "v") == 0, "%s", json);
    rq_response_release(response);
    /* Defaults: a User-Agent, an Accept, an Accept-Encoding. */
    response = run("/inspect", NULL);
    json = body_of(response);
    CHECK(header_count(json, "User-Agent") == 1 && strncmp(header_value(json, "User-Agent"), "librequestqueue/", 16) == 0,
          "%s", json);
    CHECK(header_count(json, "Accept") == 1, "%s", json);
    rq_response_release(response);
    /* Removal. */
    struct opts removed = {.headers = {{"Accept", NULL}, {"User-Agent", NULL}, {"Accept-Encoding", NULL}}};
    response = run("/inspect", &removed);
    json = body_of(response);
    CHECK(header_count(json, "Accept") == 0, "Accept removed, still sent: %s", json);
    CHECK(header_count(json, "User-Agent") == 0, "User-Agent removed, still sent: %s", json);
    CHECK(header_count(json, "Accept-Encoding") == 0, "Accept-Encoding removed, still sent: %s", json);
    rq_response_release(response);
    /* Set then removed: not sent; an empty value: sent empty. */
    struct opts again = {.headers = {{"X-Gone", "1"}, {"X-Gone", NULL}, {"X-Blank", ""}}};
    response = run("/inspect", &again);
    json = body_of(response);
    CHECK(header_count(json, "X-Gone") == 0 && header_count(json, "X-Blank") == 1 && strcmp(header_value(json, "X-Blank"), "") == 0,
          "%s", json);
    rq_response_release(response);
}

/* Cookies (RQ_OPTION_COOKIES): a Set-Cookie is sent back to the same site. */
static void t_cookies(void) {
    rq_queue *q;
    rq_request *defaults;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_get_defaults(q, &defaults));
    CHECK_OK(rq_request_set_option_int(defaults, RQ_OPTION_COOKIES, 1));
    char *url = rqt_url(base, "/status/200?header=Set-Cookie:sid%%3Dabc%%3B%%20Path%%3D/");
    const rq_response *response = run_on(q, url, NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    rq_response_release(response);
    free(url);
    url = rqt_url(base, "/inspect");
    response = run_on(q, url, NULL);
    CHECK(strcmp(header_value(body_of(response), "Cookie"), "sid=abc") == 0, "Cookie %s", body_of(response));
    rq_response_release(response);
    /* Cookie lines of the request's own join the jar's in one line (RFC 6265 5.4: one Cookie
     * header), and follow a redirect to the same origin only (as a Cookie line without the jar). */
    struct opts own = {.headers = {{"Cookie", "mine=1; theirs=2"}}};
    response = run_on(q, url, &own);
    CHECK(header_count(body_of(response), "Cookie") == 1 &&
              strcmp(header_value(body_of(response), "Cookie"), "sid=abc; mine=1; theirs=2") == 0,
          "own Cookie lines with the jar: %s", body_of(response));
    rq_response_release(response);
    free(url);
    const char *port = strrchr(base, ':') + 1;
    char redirect[256];
    snprintf(redirect, sizeof redirect, "/redirect-to?url=http://localhost:%s/redirect-to%%3Furl=http://127.0.0.1:%s/inspect",
             port, port);
    url = rqt_url(base, "%s", redirect);
    response = run_on(q, url, &own);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(header_count(body_of(response), "Cookie") == 1 &&
              strcmp(header_value(body_of(response), "Cookie"), "sid=abc; mine=1; theirs=2") == 0,
          "own Cookie lines back at the origin after a redirect: %s", body_of(response));
    rq_response_release(response);
    free(url);
    snprintf(redirect, sizeof redirect, "/redirect-to?url=http://localhost:%s/inspect", port);
    url = rqt_url(base, "%s", redirect);
    response = run_on(q, url, &own);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strstr(body_of(response), "mine=1") == NULL, "own Cookie lines sent to another host: %s", body_of(response));
    rq_response_release(response);
    free(url);
    /* A cookie the server deletes (Max-Age=0, RFC 6265 5.3) is gone: not sent, and neither listed nor
     * saved (libcurl kept it, expired, as the last cookie it stored: the list showed "sid" with an
     * empty value and expiry 1). */
    url = rqt_url(base, "/status/200?header=Set-Cookie:sid%%3D%%3B%%20Max-Age%%3D0%%3B%%20Path%%3D/");
    rq_response_release(run_on(q, url, NULL));
    free(url);
    char *text;
    CHECK_OK(rq_queue_cookies_list(q, &text));
    CHECK(strcmp(text, "") == 0, "the jar lists a deleted cookie: %s", text);
    rq_string_free(text);
    char path[] = "/tmp/rq-conformance-jar-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    CHECK_OK(rq_queue_cookies_save(q, path));
    FILE *file = fopen(path, "r");
    CHECK(file != NULL, "open %s", path);
    char line[512];
    while (fgets(line, sizeof line, file))
        CHECK(line[0] == '#' || line[0] == '\n', "the saved jar has a deleted cookie: %s", line);
    fclose(file);
    unlink(path);
    url = rqt_url(base, "/inspect");
    response = run_on(q, url, NULL);
    CHECK(header_count(body_of(response), "Cookie") == 0, "Cookie after its deletion: %s", body_of(response));
    rq_response_release(response);
    free(url);
    CHECK_OK(rq_queue_free(q));
}

/* Basic authentication: credentials set, credentials in the URL (percent-decoded), not sent to
 * another host after a redirect, and the URL's userinfo never in the Host header. */
static void t_basic_auth(void) {
    struct opts o = {.user = "user", .password = "pa:ss"};
    const rq_response *response = run("/inspect", &o);
    CHECK(strcmp(header_value(body_of(response), "Authorization"), "Basic dXNlcjpwYTpzcw==") == 0, "%s", body_of(response));
    rq_response_release(response);
    response = run("/basic-auth/user/pa:ss", &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    rq_response_release(response);
    struct opts wrong = {.user = "user", .password = "nope"};
    response = run("/basic-auth/user/pass", &wrong);
    CHECK_STATUS(response, RQ_OUTCOME_HTTP_STATUS, 401);
    rq_response_release(response);
    char url[256];
    const char *port = strrchr(base, ':') + 1;
    snprintf(url, sizeof url, "http://us%%40er:p%%3Aw@127.0.0.1:%s/inspect", port);
    response = run_on(NULL, url, NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    /* base64("us@er:p:w") */
    CHECK(strcmp(header_value(body_of(response), "Authorization"), "Basic dXNAZXI6cDp3") == 0, "%s", body_of(response));
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%s", port);
    CHECK(strcmp(header_value(body_of(response), "Host"), host) == 0, "Host %s", header_value(body_of(response), "Host"));
    CHECK(strcmp(rq_response_url(response), url) == 0, "the effective URL is the URL as given: %s", rq_response_url(response));
    rq_response_release(response);
    /* Both: rq_request_set_credentials wins over the URL's userinfo. */
    response = run_on(NULL, url, &o);
    CHECK(strcmp(header_value(body_of(response), "Authorization"), "Basic dXNlcjpwYTpzcw==") == 0, "both: %s",
          header_value(body_of(response), "Authorization"));
    rq_response_release(response);
    /* Another host (localhost is not 127.0.0.1 by name): no credentials. */
    char path[256];
    snprintf(path, sizeof path, "/redirect-to?url=http://localhost:%s/inspect", port);
    response = run(path, &o);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(header_count(body_of(response), "Authorization") == 0, "credentials sent to another host: %s", body_of(response));
    rq_response_release(response);
}

/* Keep-alive: requests of a queue reuse a connection; after a "Connection: close" response a new
 * one is made; an HTTP/1.0 response without length is read to the end of the connection. */
static void t_connections(void) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    char *url = rqt_url(base, "/inspect");
    long conns[3];
    for (int i = 0; i < 3; i++) {
        const rq_response *response = run_on(q, url, NULL);
        conns[i] = rqt_log_number(body_of(response), NULL, "conn");
        rq_metrics m = {.size = sizeof m};
        CHECK_OK(rq_response_metrics(response, &m));
        CHECK(m.connection_reused == (i == 1), "request %d: reused %d", i, m.connection_reused);
        rq_response_release(response);
        if (i == 1) {
            char *closing = rqt_url(base, "/status/200?header=Connection:close");
            response = run_on(q, closing, NULL);
            rq_response_release(response);
            free(closing);
        }
    }
    CHECK(conns[0] == conns[1], "keep-alive: connections %ld then %ld", conns[0], conns[1]);
    CHECK(conns[2] != conns[1], "after Connection: close, the same connection %ld", conns[2]);
    free(url);
    CHECK_OK(rq_queue_free(q));

    const rq_response *response = raw("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from 1.0", NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(body_of(response), "hello from 1.0") == 0 && rq_response_http_version(response) == 10, "1.0: %s, %d",
          body_of(response), rq_response_http_version(response));
    rq_response_release(response);
    response = raw("HTTP/1.1 200 OK\r\n\r\nuntil close", NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(body_of(response), "until close") == 0, "body %s", body_of(response));
    rq_response_release(response);
    response = raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", NULL);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_CONNECTION_LOST, "a short body: %s", outcome_name(response));
    rq_response_release(response);
}

/* Chunked responses: extensions ignored, trailers delivered after the headers (RFC 9112 7.1.2),
 * Transfer-Encoding winning over a Content-Length (RFC 9112 6.3). */
static void t_chunked_responses(void) {
    const rq_response *response = raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
                                      "5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\n\r\n",
                                      NULL);
    CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
    CHECK(strcmp(body_of(response), "hello world") == 0, "body %s", body_of(response));
    const char *trailer = rq_response_header(response, "X-Checksum");
    CHECK(trailer && strcmp(trailer, "abc") == 0, "trailer %s", trailer ? trailer : "(none)");
    const char *name, *value;
    CHECK_OK(rq_response_header_at(response, rq_response_header_count(response) - 1, &name, &value));
    CHECK(strcmp(name, "X-Checksum") == 0, "the trailer is not last: %s", name);
    rq_response_release(response);
    response = raw("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", NULL);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_OK && strcmp(body_of(response), "hello") == 0 ,
          "chunked with a Content-Length: %s, %s", outcome_name(response), body_of(response));
    rq_response_release(response);
}

/* Time limits end with RQ_OUTCOME_TIMEOUT (total and idle). */
static void t_timeouts(void) {
    struct opts total = {.timeout = 0.3};
    const rq_response *response = run("/delay?s=5", &total);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_TIMEOUT && rq_response_status(response) == 0, "total: %s",
          outcome_name(response));
    rq_response_release(response);
    struct opts idle = {.idle_timeout = 0.3};
    response = run("/stall?s=5", &idle);
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_TIMEOUT, "idle: %s", outcome_name(response));
    rq_response_release(response);
}

/* A kept connection that the server closes after reading a request, without answering it: an
 * idempotent request is sent again on a new connection (as libcurl, browsers and OkHttp do); a
 * POST is not (the server may have acted on it), unless the caller allows retries of
 * non-idempotent requests. */
static void t_no_silent_resend(void) {
    const char *methods[] = {"POST", "PATCH", "GET", "PUT"};
    for (size_t i = 0; i < 4; i++) {
        int idempotent = i >= 2;
        rq_queue *q;
        CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
        char *warm = rqt_url(base, "/bytes?n=1");
        const rq_response *response = run_on(q, warm, NULL);
        rq_response_release(response);
        char *url = rqt_url(base, "/drop?key=%s&n=1", methods[i]);
        struct opts o = {.method = methods[i], .body = idempotent ? NULL : "order=1"};
        response = run_on(q, url, &o);
        rq_metrics m = {.size = sizeof m};
        CHECK_OK(rq_response_metrics(response, &m));
        char prefix[64];
        snprintf(prefix, sizeof prefix, "/drop?key=%s", methods[i]);
        int sent = log_count(prefix);
        if (idempotent) {
            CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
            CHECK(sent == 2, "%s: sent %d times", methods[i], sent);
        } else {
            CHECK(rq_response_outcome(response) == RQ_OUTCOME_CONNECTION_LOST && sent == 1,
                  "%s on a kept connection that closed unanswered: outcome %s, status %d, sent %d times", methods[i],
                  outcome_name(response), rq_response_status(response), sent);
            CHECK(strstr(rq_response_error_message(response), "not sent again") != NULL, "message %s",
                  rq_response_error_message(response));
        }
        rq_response_release(response);
        free(url);
        /* Allowed: sent again (by the retry policy). */
        if (!idempotent) {
            response = run_on(q, warm, NULL);
            rq_response_release(response);
            url = rqt_url(base, "/drop?key=%s-allowed&n=1", methods[i]);
            struct opts allowed = {.method = methods[i], .body = "order=1", .retry = 1, .retry_non_idempotent = 1};
            response = run_on(q, url, &allowed);
            CHECK_STATUS(response, RQ_OUTCOME_OK, 200);
            snprintf(prefix, sizeof prefix, "/drop?key=%s-allowed", methods[i]);
            CHECK(log_count(prefix) == 2, "%s allowed: sent %d times", methods[i], log_count(prefix));
            rq_response_release(response);
            free(url);
        }
        free(warm);
        CHECK_OK(rq_queue_free(q));
    }
}

/* Retry statuses: a POST is not retried unless allowed; a GET is. */
static void t_retry_methods(void) {
    static const int statuses[] = {503};
    struct opts post = {.method = "POST", .body = "x", .retry = 1, .retry_statuses = statuses, .retry_status_count = 1};
    const rq_response *response = run("/flaky?key=rp&fail=1&mode=status&code=503", &post);
    CHECK(rq_response_status(response) == 503 && rq_response_attempts(response) == 1, "POST: %d after %u attempts",
          rq_response_status(response), rq_response_attempts(response));
    rq_response_release(response);
    struct opts get = {.retry = 1, .retry_statuses = statuses, .retry_status_count = 1};
    response = run("/flaky?key=rg&fail=1&mode=status&code=503", &get);
    CHECK(rq_response_status(response) == 200 && rq_response_attempts(response) == 2, "GET: %d after %u attempts",
          rq_response_status(response), rq_response_attempts(response));
    rq_response_release(response);
    post.retry_non_idempotent = 1;
    response = run("/flaky?key=rpa&fail=1&mode=status&code=503", &post);
    CHECK(rq_response_status(response) == 200 && rq_response_attempts(response) == 2, "POST allowed: %d after %u",
          rq_response_status(response), rq_response_attempts(response));
    rq_response_release(response);
}

/* Status codes: any three digits from 100 to 599 by their class; outside, or not three digits, a
 * bad response with status 0; a status line without a reason phrase is fine. */
static void t_status_codes(void) {
    struct {
        const char *line;
        rq_outcome outcome;
        int status;
    } cases[] = {
        {"HTTP/1.1 299 Whatever\r\n", RQ_OUTCOME_OK, 299},
        {"HTTP/1.1 499 Custom\r\n", RQ_OUTCOME_HTTP_STATUS, 499},
        {"HTTP/1.1 599 Custom\r\n", RQ_OUTCOME_HTTP_STATUS, 599},
        {"HTTP/1.1 200 \r\n", RQ_OUTCOME_OK, 200},
        {"HTTP/1.1 200\r\n", RQ_OUTCOME_OK, 200},
        {"HTTP/1.1 600 Too Far\r\n", RQ_OUTCOME_BAD_RESPONSE, 0},
        {"HTTP/1.1 099 Too Low\r\n", RQ_OUTCOME_BAD_RESPONSE, 0},
        {"HTTP/1.1 2000 Long\r\n", RQ_OUTCOME_BAD_RESPONSE, 0},
        {"HTTP/1.1 20 Short\r\n", RQ_OUTCOME_BAD_RESPONSE, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "%sContent-Length: 2\r\n\r\nok", cases[i].line);
        const rq_response *response = raw(text, NULL);
        CHECK(rq_response_outcome(response) == cases[i].outcome && rq_response_status(response) == cases[i].status,
              "%.20s: outcome %s, status %d", cases[i].line, outcome_name(response), rq_response_status(response));
        rq_response_release(response);
    }
}

/* A program that ends (exit(), or a return from main) without freeing its queues, requests in
 * flight. OpenSSL, which libcurl initialises, registered an exit handler that frees its state while
 * the queues' engine threads go on using it: a TLS transfer in flight then crashed the process at
 * exit (about 1 run in 30 with 16 https downloads). The child registers, before any queue, an exit
 * handler that runs after every later one (they run last in, first out) and asks OpenSSL whether
 * it was cleaned up: it must not have been. */
static void after_every_exit_handler(void) {
    /* OPENSSL_init_crypto(OPENSSL_INIT_BASE_ONLY) returns 0 once OPENSSL_cleanup has run. */
    int (*init)(uint64_t, const void *);
    *(void **)&init = dlsym(NULL, "OPENSSL_init_crypto"); /* (POSIX's way to a function pointer) */
    _exit(init && init(0x00040000L, NULL) == 0 ? 3 : 0);
}

static void t_exit_with_requests_in_flight(void) {
#ifdef RQT_TSAN
    /* ThreadSanitizer cannot run threads in a forked child (and its lock checker gives up on the
     * fork handler's stripes): the release and ASan runs check this. */
    printf("exit_with_requests_in_flight: skipped under ThreadSanitizer (no threads in a forked child)\n");
    return;
#endif
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        atexit(after_every_exit_handler);
        rq_queue *q;
        rq_request *r;
        char *url = rqt_url(base, "/hold?n=10&key=exit-in-flight-%d", (int)getpid());
        if (rq_queue_new(RQ_DELIVERY_THREADED, &q) != RQ_OK || rq_request_new(url, &r) != RQ_OK || rq_add(q, r) != RQ_OK)
            _exit(2);
        exit(0); /* the queue never freed, its request in flight */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child ended with %s %d (3: OpenSSL cleaned up at exit, under the engine's feet)",
          WIFEXITED(status) ? "status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* ---- main ------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*fn)(void);
} tests[] = {
    {"methods_without_body", t_methods_without_body},
    {"methods_with_body", t_methods_with_body},
    {"empty_bodies", t_empty_bodies},
    {"chunked_upload", t_chunked_upload},
    {"callers_content_length", t_callers_content_length},
    {"head", t_head},
    {"bodyless_statuses", t_bodyless_statuses},
    {"interim_responses", t_interim_responses},
    {"expect_continue", t_expect_continue},
    {"redirect_methods", t_redirect_methods},
    {"redirect_locations", t_redirect_locations},
    {"redirect_limits", t_redirect_limits},
    {"response_headers", t_response_headers},
    {"charset", t_charset},
    {"content_decoding", t_content_decoding},
    {"unknown_coding", t_unknown_coding},
    {"range", t_range},
    {"urls", t_urls},
    {"host_header", t_host_header},
    {"ipv6_literal", t_ipv6_literal},
    {"header_overrides", t_header_overrides},
    {"cookies", t_cookies},
    {"basic_auth", t_basic_auth},
    {"connections", t_connections},
    {"chunked_responses", t_chunked_responses},
    {"timeouts", t_timeouts},
    {"no_silent_resend", t_no_silent_resend},
    {"retry_methods", t_retry_methods},
    {"status_codes", t_status_codes},
    {"exit_with_requests_in_flight", t_exit_with_requests_in_flight},
};

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    size_t count = sizeof tests / sizeof tests[0];
    for (size_t i = 0; i < count; i++) {
        int wanted = argc <= 2;
        for (int a = 2; a < argc; a++)
            wanted |= strcmp(argv[a], tests[i].name) == 0;
        if (!wanted)
            continue;
        tests[i].fn();
        printf("conformance: %s ok\n", tests[i].name);
        fflush(stdout);
    }
    printf("%d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
