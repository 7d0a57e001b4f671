/*
 * bad_input_matrix.c: every exported function of requestqueue.h called with NULL and with invalid
 * values; each call must return its documented code (or value), never crash.
 *
 * The table is the list of ROW(...) lines below, grouped by function. Each row names the
 * function, the kind of input, the input in words, the expected result, and the call itself:
 *
 *   ROW(function, kind, "input", EXPECTED, call)       call returns an rq_result
 *   ROWV(function, kind, "input", "expected", cond)    call returns something else; cond must hold
 *
 * Kinds: NULL (a NULL pointer), INVALID (a bad value: empty, huge, non-UTF-8, CR/LF, bad method,
 * negative, NaN, infinite or absurd number, unknown enum), FREED (a handle used after it was
 * freed or answered), FOREIGN (a pointer that was never a handle of that kind), STATE (a call
 * the object's state forbids: frozen, already added, wrong delivery mode, from its own callback),
 * VALID (a boundary value that must be accepted, so that the rejections above mean something).
 *
 * The program reads the header (--header PATH), lists every function declared with RQ_API, and
 * fails if one has no row, if one that takes a pointer has no NULL row, or if one that takes
 * arguments has no INVALID/FREED/FOREIGN/STATE row. --markdown FILE writes the table there.
 *
 *   bad_input_matrix --header include/requestqueue.h --tmp DIR [--markdown FILE] BASE_URL
 * (BASE_URL: the fixture server, for the rows that need a real response or an authentication
 * challenge; run it through with_servers.py.)
 */
#include "rel.h"

#include <ctype.h>
#include <float.h>
#include <limits.h>
#include <math.h>

/* ---- the table ----------------------------------------------------------------------------- */

enum row_kind { K_NULL, K_INVALID, K_FREED, K_FOREIGN, K_STATE, K_VALID, K_KINDS };
static const char *const kind_names[K_KINDS] = {"NULL", "INVALID", "FREED", "FOREIGN", "STATE", "VALID"};

struct row {
    const char *function;
    enum row_kind kind;
    const char *input;
    char expected[64];
    char got[96];
    int pass;
    int line;
};

#define MAX_ROWS 1024
static struct row rows[MAX_ROWS];
static int nrows;
static pthread_mutex_t rows_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_row(const char *function, const char *call_text, enum row_kind kind, const char *input,
                    const char *expected, const char *got, int pass, int line) {
    /* The row must call the function it is filed under. */
    if (!strstr(call_text, function))
        FAIL("line %d: the row filed under %s does not call it: %s", line, function, call_text);
    pthread_mutex_lock(&rows_lock);
    if (nrows == MAX_ROWS)
        FAIL("more than %d rows", MAX_ROWS);
    struct row *r = &rows[nrows++];
    r->function = function;
    r->kind = kind;
    r->input = input;
    snprintf(r->expected, sizeof r->expected, "%s", expected);
    snprintf(r->got, sizeof r->got, "%s", got);
    r->pass = pass;
    r->line = line;
    pthread_mutex_unlock(&rows_lock);
}

static const char *result_name(int rc) {
    /* Names of the codes this file knows; a newer code prints as its number. */
    static const char *const names[] = {
        "RQ_OK", "RQ_ERR_NULL_ARGUMENT", "RQ_ERR_INVALID_HANDLE", "RQ_ERR_INVALID_ARGUMENT",
        "RQ_ERR_INVALID_URL", "RQ_ERR_UNSUPPORTED_SCHEME", "RQ_ERR_INVALID_METHOD", "RQ_ERR_INVALID_HEADER",
        "RQ_ERR_ALREADY_ADDED", "RQ_ERR_REQUEST_FROZEN", "RQ_ERR_NOT_ACTIVE", "RQ_ERR_INVALID_STATE",
        "RQ_ERR_WRONG_DELIVERY", "RQ_ERR_QUEUE_CLOSED", "RQ_ERR_TIMED_OUT", "RQ_ERR_WOULD_DEADLOCK",
        "RQ_ERR_OUT_OF_MEMORY", "RQ_ERR_SYSTEM"};
    static char other[8][32];
    static atomic_int next;
    if (rc >= 0 && rc < (int)(sizeof names / sizeof *names))
        return names[rc];
    char *buf = other[atomic_fetch_add(&next, 1) & 7];
    snprintf(buf, 32, "result %d (%s)", rc, rq_result_str(rc));
    return buf;
}

/* Every call that returns an error also says why, on its thread: rq_last_error_message() must
 * then start with the function's name and ": " and go on with a reason. (The row's call is the
 * last call of the library made on this thread before this check.) */
static void row_rc(const char *function, const char *call_text, enum row_kind kind, const char *input,
                   int expected, int got, int line) {
    const char *message = rq_last_error_message();
    size_t n = strlen(function);
    if (got != RQ_OK && got == expected &&
        !(message && strncmp(message, function, n) == 0 && strncmp(message + n, ": ", 2) == 0 && message[n + 2])) {
        char text[96];
        snprintf(text, sizeof text, "%s, message \"%.50s\"", result_name(got), message ? message : "(NULL)");
        add_row(function, call_text, kind, input, result_name(expected), text, 0, line);
        return;
    }
    add_row(function, call_text, kind, input, result_name(expected), result_name(got), got == expected, line);
}

#define ROW(fn, kind, input, expected, call)                                                       \
    row_rc(#fn, #call, K_##kind, input, (int)(expected), (int)(call), __LINE__)
static void row_cond(const char *function, const char *call_text, enum row_kind kind, const char *input,
                     const char *expected, int holds, int line) {
    add_row(function, call_text, kind, input, expected, holds ? expected : "something else", holds, line);
}

/* The condition is evaluated once. */
#define ROWV(fn, kind, input, expected_text, cond)                                                 \
    row_cond(#fn, #cond, K_##kind, input, expected_text, (cond) ? 1 : 0, __LINE__)

/* ---- inputs -------------------------------------------------------------------------------- */

static const char *base;
static const char *tmpdir;

/* Enum ranges read from the header (so that a value added later stays covered): the last result
 * code, the last outcome, the last duplicates mode, the priority range. */
static int last_result, last_outcome, last_duplicates, min_priority, max_priority;
static char past_result_text[64], past_outcome_text[64], past_duplicates_text[64], past_priority_text[64],
    below_priority_text[64];
static char *huge_url, *max_url, *huge_method, *max_method, *huge_name, *max_name, *huge_value, *max_value,
    *huge_string;
static int stack_word;
static void *heap_block;

/* Pointers that were never handles: a stack address, a small integer, a heap block, the top of
 * the address space, an odd address. */
#define N_FOREIGN 5
static void *foreign(int i) {
    void *values[N_FOREIGN] = {&stack_word, (void *)(uintptr_t)0x10, heap_block, (void *)(uintptr_t)UINTPTR_MAX,
                               (void *)(uintptr_t)0x5a5b};
    return values[i];
}
static const char *const foreign_names[N_FOREIGN] = {"a stack address", "0x10", "a heap block", "UINTPTR_MAX",
                                                     "an odd address 0x5a5b"};

static rq_request *new_request(void) {
    rq_request *r = NULL;
    CHECK_OK(rq_request_new("http://127.0.0.1:9/never-sent", &r));
    return r;
}

/* ---- rows that need a running callback ------------------------------------------------------ */

struct cb_context {
    rq_queue *queue;
    int dispatch; /* the delivery mode: 0 threaded, 1 dispatch, 2 inline */
    atomic_int done;
};

/* A completion that records the rows about the live response and calls from a callback. */
static void response_rows(void *context, rq_request *request, const rq_response *response) {
    struct cb_context *c = context;
    size_t count = rq_response_header_count(response);
    const char *name = "x", *value = "x";
    size_t size = 7;
    (void)request;
    ROW(rq_response_header_at, INVALID, "index == header count", RQ_ERR_INVALID_ARGUMENT,
        rq_response_header_at(response, count, &name, &value));
    ROW(rq_response_header_at, INVALID, "index SIZE_MAX", RQ_ERR_INVALID_ARGUMENT,
        rq_response_header_at(response, SIZE_MAX, &name, &value));
    ROW(rq_response_header_at, NULL, "out_name NULL", RQ_ERR_NULL_ARGUMENT,
        rq_response_header_at(response, 0, NULL, &value));
    ROW(rq_response_header_at, NULL, "out_value NULL", RQ_ERR_NULL_ARGUMENT,
        rq_response_header_at(response, 0, &name, NULL));
    ROW(rq_response_header_at, VALID, "index 0 of a real response", RQ_OK, rq_response_header_at(response, 0, &name, &value));
    ROWV(rq_response_header, NULL, "name NULL", "NULL", rq_response_header(response, NULL) == NULL);
    ROWV(rq_response_header, INVALID, "name \"\"", "NULL", rq_response_header(response, "") == NULL);
    ROWV(rq_response_header, INVALID, "non-UTF-8 name \"\\xff\\xfe\"", "NULL", rq_response_header(response, "\xff\xfe") == NULL);
    ROWV(rq_response_header, INVALID, "name with CR LF", "NULL", rq_response_header(response, "Content-Type\r\n") == NULL);
    ROWV(rq_response_header, INVALID, "a 1 MiB name", "NULL", rq_response_header(response, huge_string) == NULL);
    ROWV(rq_response_header, VALID, "\"content-length\" (any case)", "\"16\"",
         rq_response_header(response, "CONTENT-length") != NULL && strcmp(rq_response_header(response, "CONTENT-length"), "16") == 0);
    ROWV(rq_response_body, NULL, "out_size NULL", "a non-NULL pointer", rq_response_body(response, NULL) != NULL);
    ROWV(rq_response_body, VALID, "a real 16-byte response", "16 pattern bytes",
         rel_is_pattern(rq_response_body(response, &size), 16) && size == 16);
    ROWV(rq_response_url, VALID, "a real response", "non-NULL", rq_response_url(response) != NULL);
    ROWV(rq_response_retain, VALID, "a real response", "the same pointer", rq_response_retain(response) == response);
    rq_response_release(response);
    ROWV(rq_response_release, VALID, "a real response, retained once", "no crash, still readable in its callback",
         (rq_response_release(rq_response_retain(response)), rq_response_status(response) == 200));
    ROWV(rq_response_error_message, VALID, "a successful response", "\"\"",
         rq_response_error_message(response) != NULL && rq_response_error_message(response)[0] == '\0');
    ROWV(rq_response_outcome, VALID, "a real response", "RQ_OUTCOME_OK", rq_response_outcome(response) == RQ_OUTCOME_OK);
    ROWV(rq_response_status, VALID, "a real response", "200", rq_response_status(response) == 200);
    ROWV(rq_response_attempts, VALID, "a real response", "1", rq_response_attempts(response) == 1);
    ROWV(rq_response_http_version, VALID, "a real HTTP/1.1 response", "11", rq_response_http_version(response) == 11);
    {
        rq_response_summary sum;
        memset(&sum, 0x5a, sizeof sum);
        ROW(rq_response_get_summary, NULL, "out_summary NULL", RQ_ERR_NULL_ARGUMENT, rq_response_get_summary(response, NULL));
        sum.size = sizeof sum;
        ROW(rq_response_get_summary, NULL, "response NULL", RQ_ERR_NULL_ARGUMENT, rq_response_get_summary(NULL, &sum));
        sum.size = 0;
        ROW(rq_response_get_summary, INVALID, "size 0", RQ_ERR_INVALID_ARGUMENT, rq_response_get_summary(response, &sum));
        sum.size = sizeof(size_t);
        ROW(rq_response_get_summary, INVALID, "size too small for the first field", RQ_ERR_INVALID_ARGUMENT,
            rq_response_get_summary(response, &sum));
        sum.size = SIZE_MAX;
        ROWV(rq_response_get_summary, VALID, "size SIZE_MAX (not too small for the first field)", "RQ_OK, size set to sizeof",
             rq_response_get_summary(response, &sum) == RQ_OK && sum.size == sizeof sum);
        /* A caller built against a later header, with a larger struct. */
        unsigned char larger[sizeof(rq_response_summary) + 64];
        memset(larger, 0x77, sizeof larger);
        size_t larger_size = sizeof larger;
        memcpy(larger, &larger_size, sizeof larger_size);
        ROWV(rq_response_get_summary, VALID, "size sizeof + 64 (a later version's caller)", "RQ_OK, size set to sizeof, no write past it",
             rq_response_get_summary(response, (rq_response_summary *)(void *)larger) == RQ_OK &&
                 memcmp(larger, &(size_t){sizeof sum}, sizeof(size_t)) == 0 && larger[sizeof sum] == 0x77);
        /* A caller that knows only the fields up to status: the rest is not written. */
        memset(&sum, 0x77, sizeof sum);
        sum.size = offsetof(rq_response_summary, http_version);
        ROWV(rq_response_get_summary, VALID, "size up to status", "RQ_OK, outcome and status written, http_version not",
             rq_response_get_summary(response, &sum) == RQ_OK && sum.size == offsetof(rq_response_summary, http_version) &&
                 sum.outcome == RQ_OUTCOME_OK && sum.status == 200 && sum.http_version == 0x77777777);
        size_t body_size = 0;
        const uint8_t *body = rq_response_body(response, &body_size);
        sum.size = sizeof sum;
        ROWV(rq_response_get_summary, VALID, "a real 16-byte HTTP/1.1 response", "every field as its own function gives it",
             rq_response_get_summary(response, &sum) == RQ_OK && sum.size == sizeof sum && sum.outcome == RQ_OUTCOME_OK &&
                 sum.status == 200 && sum.http_version == 11 && sum.attempts == 1 && sum.body == body &&
                 sum.body_size == 16 && body_size == 16);
    }
    rq_metrics m;
    memset(&m, 0x5a, sizeof m);
    ROW(rq_response_metrics, NULL, "out_metrics NULL", RQ_ERR_NULL_ARGUMENT, rq_response_metrics(response, NULL));
    m.size = 0;
    ROW(rq_response_metrics, INVALID, "size 0", RQ_ERR_INVALID_ARGUMENT, rq_response_metrics(response, &m));
    m.size = sizeof(size_t);
    ROW(rq_response_metrics, INVALID, "size too small for the first field", RQ_ERR_INVALID_ARGUMENT, rq_response_metrics(response, &m));
    {
        /* A caller built against a later header, with a larger struct. */
        unsigned char larger[sizeof(rq_metrics) + 64];
        memset(larger, 0x77, sizeof larger);
        size_t larger_size = sizeof larger;
        memcpy(larger, &larger_size, sizeof larger_size);
        ROWV(rq_response_metrics, VALID, "size sizeof + 64 (a later version's caller)", "RQ_OK, size set to sizeof, no write past it",
             rq_response_metrics(response, (rq_metrics *)(void *)larger) == RQ_OK &&
                 memcmp(larger, &(size_t){sizeof m}, sizeof(size_t)) == 0 && larger[sizeof m] == 0x77);
    }
    m.size = SIZE_MAX;
    ROWV(rq_response_metrics, INVALID, "size SIZE_MAX (not too small for the first field)", "RQ_OK, size set to sizeof(rq_metrics)",
         rq_response_metrics(response, &m) == RQ_OK && m.size == sizeof m && m.attempts == 1);
    {
        /* A caller built against the header before http_version: everything up to it is written. */
        unsigned char before[sizeof(rq_metrics)];
        size_t before_size = offsetof(rq_metrics, http_version);
        rq_metrics got;
        memset(before, 0x77, sizeof before);
        memcpy(before, &before_size, sizeof before_size);
        ROWV(rq_response_metrics, VALID, "size up to header_bytes_down (the previous header's caller)",
             "RQ_OK, size unchanged, header_bytes_down written, http_version not",
             rq_response_metrics(response, (rq_metrics *)(void *)before) == RQ_OK &&
                 (memcpy(&got, before, sizeof got), got.size == before_size) && got.header_bytes_down > 0 &&
                 got.header_bytes_down < 10000 && before[before_size] == 0x77);
        m.size = sizeof m;
        ROWV(rq_response_metrics, VALID, "size sizeof(rq_metrics)", "RQ_OK, http_version 11",
             rq_response_metrics(response, &m) == RQ_OK && m.size == sizeof m && m.http_version == 11);
    }
    {
        /* A caller built against an older header: only the fields that fit are written. */
        unsigned char small[sizeof(size_t) + sizeof(double) + 8];
        memset(small, 0x77, sizeof small);
        size_t small_size = sizeof(size_t) + sizeof(double);
        memcpy(small, &small_size, sizeof small_size);
        ROWV(rq_response_metrics, VALID, "size of the first field only", "RQ_OK, nothing written past it",
             rq_response_metrics(response, (rq_metrics *)(void *)small) == RQ_OK &&
                 small[sizeof small - 1] == 0x77 && small[small_size] == 0x77);
    }

    {
        rq_response_summary sum;
        memset(&sum, 0x5a, sizeof sum);
        ROW(rq_response_retain_summary, NULL, "out_summary NULL", RQ_ERR_NULL_ARGUMENT, rq_response_retain_summary(response, NULL));
        sum.size = sizeof sum;
        ROW(rq_response_retain_summary, NULL, "response NULL", RQ_ERR_NULL_ARGUMENT, rq_response_retain_summary(NULL, &sum));
        sum.size = 0;
        ROW(rq_response_retain_summary, INVALID, "size 0 (nothing retained)", RQ_ERR_INVALID_ARGUMENT,
            rq_response_retain_summary(response, &sum));
        sum.size = sizeof sum;
        ROWV(rq_response_retain_summary, VALID, "a real response", "RQ_OK, status 200, 16 body bytes",
             rq_response_retain_summary(response, &sum) == RQ_OK && sum.status == 200 && sum.body_size == 16 &&
                 rel_is_pattern(sum.body, 16));
        const rq_response *retained[3] = {response, NULL, rq_response_retain(response)};
        ROWV(rq_response_release_many, NULL, "responses NULL, count 3", "no crash", (rq_response_release_many(NULL, 3), 1));
        ROWV(rq_response_release_many, VALID, "count 0", "no crash", (rq_response_release_many(retained, 0), 1));
        ROWV(rq_response_release_many, INVALID, "count SIZE_MAX (no array is that long)", "no crash, nothing released",
             (rq_response_release_many(retained, SIZE_MAX), rq_response_status(response) == 200));
        ROWV(rq_response_release_many, VALID, "two retained responses and a NULL", "no crash, still readable in its callback",
             (rq_response_release_many(retained, 3), rq_response_status(response) == 200));
    }

    /* Calls that would wait for this very callback. */
    if (c->dispatch == 1) {
        size_t ran = 9;
        ROW(rq_queue_dispatch, STATE, "from a callback of the same queue", RQ_ERR_WOULD_DEADLOCK, rq_queue_dispatch(c->queue, 0, &ran));
    } else if (c->dispatch == 2) {
        size_t ran = 9;
        int fd = -7;
        ROW(rq_queue_free, STATE, "from a callback of the same inline queue (on its engine thread)", RQ_ERR_WOULD_DEADLOCK,
            rq_queue_free(c->queue));
        ROWV(rq_queue_dispatch, STATE, "from a callback of the same inline queue", "RQ_ERR_WRONG_DELIVERY, out_ran untouched",
             rq_queue_dispatch(c->queue, 0, &ran) == RQ_ERR_WRONG_DELIVERY && ran == 9);
        ROWV(rq_queue_get_fd, STATE, "from a callback of the same inline queue", "RQ_ERR_WRONG_DELIVERY, out untouched",
             rq_queue_get_fd(c->queue, &fd) == RQ_ERR_WRONG_DELIVERY && fd == -7);
    } else {
        ROW(rq_queue_free, STATE, "from a callback of the same queue", RQ_ERR_WOULD_DEADLOCK, rq_queue_free(c->queue));
    }
    ROW(rq_queue_wait_idle, STATE, "from a callback of the same queue", RQ_ERR_WOULD_DEADLOCK, rq_queue_wait_idle(c->queue, 1));
    atomic_fetch_add(&c->done, 1);
}

/* A completion of a request whose queue is being freed: adding to that queue is refused. */
static void closed_rows(void *context, rq_request *request, const rq_response *response) {
    struct cb_context *c = context;
    (void)request;
    (void)response;
    rq_request *late = new_request();
    ROW(rq_add, STATE, "to a queue being freed (from a completion inside rq_queue_free)", RQ_ERR_QUEUE_CLOSED, rq_add(c->queue, late));
    CHECK_OK(rq_request_free(late));
    rq_request *unchanged = late;
    ROW(rq_add_url, STATE, "to a queue being freed (from a completion inside rq_queue_free)", RQ_ERR_QUEUE_CLOSED,
        rq_add_url(c->queue, "http://127.0.0.1:1/", NULL, NULL, NULL, &unchanged));
    ROW(rq_add_url_with_summary, STATE, "to a queue being freed (from a completion inside rq_queue_free)", RQ_ERR_QUEUE_CLOSED,
        rq_add_url_with_summary(c->queue, "http://127.0.0.1:1/", NULL, NULL, NULL, &unchanged));
    if (unchanged != late)
        FAIL("rq_add_url or rq_add_url_with_summary wrote its out-parameter on an error");
    atomic_fetch_add(&c->done, 1);
}

struct auth_context {
    rq_auth_challenge *first;
    rq_request *request_handle;
    int calls;
    int final_status;
    rq_outcome final_outcome;
};

static void auth_rows(void *context, rq_request *request, rq_auth_challenge *challenge, unsigned failures,
                      const rq_response *response) {
    struct auth_context *a = context;
    (void)response;
    a->calls++;
    if (failures == 0) {
        a->first = challenge;
        ROW(rq_auth_use_credential, NULL, "user NULL", RQ_ERR_NULL_ARGUMENT, rq_auth_use_credential(challenge, NULL, "p"));
        ROW(rq_auth_use_credential, NULL, "password NULL", RQ_ERR_NULL_ARGUMENT, rq_auth_use_credential(challenge, "u", NULL));
        ROW(rq_auth_use_credential, FOREIGN, "a request handle as the challenge", RQ_ERR_INVALID_HANDLE,
            rq_auth_use_credential((rq_auth_challenge *)(void *)request, "u", "p"));
        ROW(rq_auth_continue_without, FOREIGN, "a request handle as the challenge", RQ_ERR_INVALID_HANDLE,
            rq_auth_continue_without((rq_auth_challenge *)(void *)request));
        ROW(rq_auth_cancel, FOREIGN, "a request handle as the challenge", RQ_ERR_INVALID_HANDLE,
            rq_auth_cancel((rq_auth_challenge *)(void *)request));
        /* Still unanswered after the refusals: a wrong credential is accepted as an answer. */
        ROW(rq_auth_use_credential, INVALID, "user with CR LF and non-UTF-8 bytes (a wrong credential)", RQ_OK,
            rq_auth_use_credential(challenge, "u\r\nX-Injected: 1\xff", "p"));
        ROW(rq_auth_use_credential, FREED, "a challenge already answered", RQ_ERR_INVALID_HANDLE,
            rq_auth_use_credential(challenge, "u", "p"));
        ROW(rq_auth_continue_without, FREED, "a challenge already answered", RQ_ERR_INVALID_HANDLE,
            rq_auth_continue_without(challenge));
        ROW(rq_auth_cancel, FREED, "a challenge already answered", RQ_ERR_INVALID_HANDLE, rq_auth_cancel(challenge));
    } else {
        ROW(rq_auth_continue_without, VALID, "the second challenge (failure_count 1)", RQ_OK, rq_auth_continue_without(challenge));
    }
}

static void auth_done(void *context, rq_request *request, const rq_response *response) {
    struct auth_context *a = context;
    (void)request;
    a->final_status = rq_response_status(response);
    a->final_outcome = rq_response_outcome(response);
}

/* ---- the rows ------------------------------------------------------------------------------ */

static void rows_names_and_version(void) {
    ROWV(rq_version_number, VALID, "(no arguments)", "RQ_VERSION_NUMBER", rq_version_number() == RQ_VERSION_NUMBER);
    ROWV(rq_version_string, VALID, "(no arguments)", "RQ_VERSION_STRING",
         rq_version_string() != NULL && strcmp(rq_version_string(), RQ_VERSION_STRING) == 0);
    const int bad[] = {-1, 1000, INT_MIN, INT_MAX};
    const char *bad_names[] = {"-1", "1000", "INT_MIN", "INT_MAX"};
    for (int i = 0; i < 4; i++) {
        ROWV(rq_result_str, INVALID, bad_names[i], "\"unknown result code\"", strcmp(rq_result_str(bad[i]), "unknown result code") == 0);
        ROWV(rq_outcome_str, INVALID, bad_names[i], "\"unknown outcome\"", strcmp(rq_outcome_str(bad[i]), "unknown outcome") == 0);
    }
    ROWV(rq_result_str, INVALID, past_result_text, "\"unknown result code\"",
         strcmp(rq_result_str(last_result + 1), "unknown result code") == 0);
    ROWV(rq_outcome_str, INVALID, past_outcome_text, "\"unknown outcome\"",
         strcmp(rq_outcome_str(last_outcome + 1), "unknown outcome") == 0);
    for (int i = 0; i <= last_result; i++)
        ROWV(rq_result_str, VALID, "every code of the header", "a name of its own",
             strcmp(rq_result_str(i), "unknown result code") != 0 && (i == 0 || strcmp(rq_result_str(i), rq_result_str(i - 1)) != 0));
    for (int i = 0; i <= last_outcome; i++)
        ROWV(rq_outcome_str, VALID, "every outcome of the header", "a name of its own",
             strcmp(rq_outcome_str(i), "unknown outcome") != 0 && (i == 0 || strcmp(rq_outcome_str(i), rq_outcome_str(i - 1)) != 0));
}

static void rows_queues(void) {
    rq_queue *q, *dq, *iq, *freed, *sentinel = (rq_queue *)(uintptr_t)0x5a5a, *out = sentinel;
    rq_request *r = new_request();
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &dq));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_INLINE, &iq));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &freed));
    CHECK_OK(rq_queue_free(freed));
    rq_queue *as_queue = (rq_queue *)(void *)r; /* a request handle where a queue is expected */
    size_t n = 0;
    int flag = 0, fd = -7;
    rq_order order;
    rq_duplicates dup;
    rq_request **list = NULL;

    /* rq_queue_new */
    ROW(rq_queue_new, NULL, "out_queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_new(RQ_DELIVERY_THREADED, NULL));
    {
        rq_queue *made = NULL;
        ROWV(rq_queue_new, VALID, "delivery 2 (RQ_DELIVERY_INLINE)", "RQ_OK, a queue",
             rq_queue_new((rq_delivery)2, &made) == RQ_OK && made != NULL && rq_queue_free(made) == RQ_OK);
    }
    ROW(rq_queue_new, INVALID, "delivery 3", RQ_ERR_INVALID_ARGUMENT, rq_queue_new((rq_delivery)3, &out));
    ROW(rq_queue_new, INVALID, "delivery -1", RQ_ERR_INVALID_ARGUMENT, rq_queue_new((rq_delivery)-1, &out));
    ROW(rq_queue_new, INVALID, "delivery INT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_queue_new((rq_delivery)INT_MAX, &out));
    ROWV(rq_queue_new, INVALID, "delivery 7: out_queue written?", "RQ_ERR_INVALID_ARGUMENT, out_queue untouched",
         rq_queue_new((rq_delivery)7, &out) == RQ_ERR_INVALID_ARGUMENT && out == sentinel);

    /* rq_queue_free */
    ROW(rq_queue_free, NULL, "NULL (a no-op)", RQ_OK, rq_queue_free(NULL));
    ROW(rq_queue_free, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_free(freed));
    ROW(rq_queue_free, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_free(as_queue));
    for (int i = 0; i < N_FOREIGN; i++)
        ROW(rq_queue_free, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_queue_free(foreign(i)));
    ROW(rq_queue_free, STATE, "the default queue", RQ_ERR_INVALID_STATE, rq_queue_free(rq_queue_default()));

    /* rq_queue_default */
    ROWV(rq_queue_default, VALID, "(no arguments), twice", "the same non-NULL queue",
         rq_queue_default() != NULL && rq_queue_default() == rq_queue_default());

    /* settings */
    ROW(rq_queue_set_max_concurrent, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_max_concurrent(NULL, 1));
    ROW(rq_queue_set_max_concurrent, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_max_concurrent(freed, 1));
    ROW(rq_queue_set_max_concurrent, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_set_max_concurrent(as_queue, 1));
    ROW(rq_queue_set_max_concurrent, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_queue_set_max_concurrent(heap_block, 1));
    ROW(rq_queue_set_max_concurrent, VALID, "SIZE_MAX (any size is a limit)", RQ_OK, rq_queue_set_max_concurrent(q, SIZE_MAX));
    ROW(rq_queue_set_max_concurrent, VALID, "0 (unlimited)", RQ_OK, rq_queue_set_max_concurrent(q, 0));
    ROW(rq_queue_get_max_concurrent, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_concurrent(NULL, &n));
    ROW(rq_queue_get_max_concurrent, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_concurrent(q, NULL));
    ROW(rq_queue_get_max_concurrent, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_max_concurrent(freed, &n));
    ROW(rq_queue_get_max_concurrent, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE, rq_queue_get_max_concurrent(foreign(0), &n));

    ROW(rq_queue_set_order, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_order(NULL, RQ_ORDER_FIFO));
    ROW(rq_queue_set_order, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_order(freed, RQ_ORDER_FIFO));
    ROW(rq_queue_set_order, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_set_order(as_queue, RQ_ORDER_FIFO));
    ROW(rq_queue_set_order, INVALID, "order 2", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_order(q, (rq_order)2));
    ROW(rq_queue_set_order, INVALID, "order -1", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_order(q, (rq_order)-1));
    ROW(rq_queue_set_order, INVALID, "order INT_MIN", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_order(q, (rq_order)INT_MIN));
    ROW(rq_queue_get_order, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_order(NULL, &order));
    ROW(rq_queue_get_order, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_order(q, NULL));
    ROW(rq_queue_get_order, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_order(freed, &order));
    ROWV(rq_queue_get_order, VALID, "after the rejected orders", "RQ_OK, RQ_ORDER_FIFO (unchanged)",
         rq_queue_get_order(q, &order) == RQ_OK && order == RQ_ORDER_FIFO);

    ROW(rq_queue_set_duplicates, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_duplicates(NULL, RQ_DUPLICATES_ALLOW));
    ROW(rq_queue_set_duplicates, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_duplicates(freed, RQ_DUPLICATES_ALLOW));
    ROW(rq_queue_set_duplicates, FOREIGN, "0x10", RQ_ERR_INVALID_HANDLE, rq_queue_set_duplicates(foreign(1), RQ_DUPLICATES_ALLOW));
    ROW(rq_queue_set_duplicates, INVALID, past_duplicates_text, RQ_ERR_INVALID_ARGUMENT,
        rq_queue_set_duplicates(q, (rq_duplicates)(last_duplicates + 1)));
    ROW(rq_queue_set_duplicates, INVALID, "mode INT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_duplicates(q, (rq_duplicates)INT_MAX));
    ROW(rq_queue_set_duplicates, INVALID, "mode -1", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_duplicates(q, (rq_duplicates)-1));
    ROW(rq_queue_get_duplicates, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_duplicates(NULL, &dup));
    ROW(rq_queue_get_duplicates, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_duplicates(q, NULL));
    ROW(rq_queue_get_duplicates, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_duplicates(freed, &dup));
    ROWV(rq_queue_get_duplicates, VALID, "after the rejected modes", "RQ_OK, RQ_DUPLICATES_CANCEL_EARLIER (unchanged)",
         rq_queue_get_duplicates(q, &dup) == RQ_OK && dup == RQ_DUPLICATES_CANCEL_EARLIER);

    ROW(rq_queue_suspend, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_suspend(NULL));
    ROW(rq_queue_suspend, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_suspend(freed));
    ROW(rq_queue_suspend, FOREIGN, "UINTPTR_MAX", RQ_ERR_INVALID_HANDLE, rq_queue_suspend(foreign(3)));
    ROW(rq_queue_resume, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_resume(NULL));
    ROW(rq_queue_resume, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_resume(freed));
    ROW(rq_queue_resume, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_resume(as_queue));
    ROW(rq_queue_is_suspended, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_is_suspended(NULL, &flag));
    ROW(rq_queue_is_suspended, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_is_suspended(q, NULL));
    ROW(rq_queue_is_suspended, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_is_suspended(freed, &flag));
    ROW(rq_queue_count, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_count(NULL, &n));
    ROW(rq_queue_count, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_count(q, NULL));
    ROW(rq_queue_count, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_count(freed, &n));
    for (int i = 0; i < N_FOREIGN; i++)
        ROW(rq_queue_count, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_queue_count(foreign(i), &n));

    ROW(rq_queue_snapshot, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot(NULL, &list, &n));
    ROW(rq_queue_snapshot, NULL, "out_requests NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot(q, NULL, &n));
    ROW(rq_queue_snapshot, NULL, "out_count NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot(q, &list, NULL));
    ROW(rq_queue_snapshot, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_snapshot(freed, &list, &n));
    ROW(rq_queue_snapshot, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_snapshot(as_queue, &list, &n));
    rq_snapshot_free(NULL);
    ROWV(rq_snapshot_free, NULL, "NULL (a no-op)", "returns", (rq_snapshot_free(NULL), 1));
    ROW(rq_queue_snapshot, VALID, "an empty queue", RQ_OK, rq_queue_snapshot(q, &list, &n));
    ROWV(rq_snapshot_free, VALID, "the array of an empty queue", "returns", (rq_snapshot_free(list), 1));

    ROW(rq_queue_cancel_all, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cancel_all(NULL));
    ROW(rq_queue_cancel_all, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_cancel_all(freed));
    ROW(rq_queue_cancel_all, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_queue_cancel_all(heap_block));
    ROW(rq_queue_cancel_all, VALID, "an empty queue", RQ_OK, rq_queue_cancel_all(q));

    ROW(rq_queue_get_fd, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_fd(NULL, &fd));
    ROW(rq_queue_get_fd, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_fd(dq, NULL));
    ROW(rq_queue_get_fd, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_fd(freed, &fd));
    ROW(rq_queue_get_fd, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_get_fd(as_queue, &fd));
    ROWV(rq_queue_get_fd, STATE, "a threaded queue", "RQ_ERR_WRONG_DELIVERY, out untouched",
         rq_queue_get_fd(q, &fd) == RQ_ERR_WRONG_DELIVERY && fd == -7);
    ROWV(rq_queue_get_fd, STATE, "an inline queue", "RQ_ERR_WRONG_DELIVERY, out untouched",
         rq_queue_get_fd(iq, &fd) == RQ_ERR_WRONG_DELIVERY && fd == -7);

    ROW(rq_queue_dispatch, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_dispatch(NULL, 0, &n));
    ROW(rq_queue_dispatch, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_dispatch(freed, 0, &n));
    ROW(rq_queue_dispatch, FOREIGN, "0x10", RQ_ERR_INVALID_HANDLE, rq_queue_dispatch(foreign(1), 0, &n));
    ROW(rq_queue_dispatch, STATE, "a threaded queue", RQ_ERR_WRONG_DELIVERY, rq_queue_dispatch(q, 0, &n));
    ROW(rq_queue_dispatch, STATE, "an inline queue", RQ_ERR_WRONG_DELIVERY, rq_queue_dispatch(iq, 0, &n));
    ROW(rq_queue_dispatch, VALID, "out_ran NULL (allowed)", RQ_OK, rq_queue_dispatch(dq, 0, NULL));
    ROW(rq_queue_dispatch, VALID, "max_callbacks SIZE_MAX", RQ_OK, rq_queue_dispatch(dq, SIZE_MAX, &n));

    ROW(rq_queue_wait_idle, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_wait_idle(NULL, 0));
    ROW(rq_queue_wait_idle, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_wait_idle(freed, 0));
    ROW(rq_queue_wait_idle, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE, rq_queue_wait_idle(foreign(0), 0));
    ROW(rq_queue_wait_idle, INVALID, "timeout NaN", RQ_ERR_INVALID_ARGUMENT, rq_queue_wait_idle(q, NAN));
    ROW(rq_queue_wait_idle, VALID, "timeout -1 (no limit), idle queue", RQ_OK, rq_queue_wait_idle(q, -1));
    ROW(rq_queue_wait_idle, VALID, "timeout -INFINITY (no limit), idle queue", RQ_OK, rq_queue_wait_idle(q, -INFINITY));
    ROW(rq_queue_wait_idle, VALID, "timeout +INFINITY, idle queue", RQ_OK, rq_queue_wait_idle(q, INFINITY));
    ROW(rq_queue_wait_idle, VALID, "timeout DBL_MAX, idle queue", RQ_OK, rq_queue_wait_idle(q, DBL_MAX));

    /* A suspended queue with a waiting request is not idle. */
    rq_queue *sq;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &sq));
    CHECK_OK(rq_queue_suspend(sq));
    rq_request *waiting = new_request();
    CHECK_OK(rq_add(sq, waiting));
    ROW(rq_queue_wait_idle, STATE, "suspended queue with a waiting request, timeout 0", RQ_ERR_TIMED_OUT, rq_queue_wait_idle(sq, 0));
    ROW(rq_add, STATE, "a request already added", RQ_ERR_ALREADY_ADDED, rq_add(sq, waiting));
    ROW(rq_add, STATE, "a request already added, to another queue", RQ_ERR_ALREADY_ADDED, rq_add(q, waiting));
    ROW(rq_request_start, STATE, "a request already added", RQ_ERR_ALREADY_ADDED, rq_request_start(waiting));
    CHECK_OK(rq_queue_free(sq));
    ROW(rq_cancel, STATE, "a request completed (its queue was freed)", RQ_ERR_NOT_ACTIVE, rq_cancel(waiting));
    ROW(rq_add, STATE, "a completed request (single use)", RQ_ERR_ALREADY_ADDED, rq_add(q, waiting));
    CHECK_OK(rq_request_free(waiting));

    /* rq_add */
    rq_request *freed_request = new_request();
    CHECK_OK(rq_request_free(freed_request));
    ROW(rq_add, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_add(NULL, r));
    ROW(rq_add, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_add(q, NULL));
    ROW(rq_add, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_add(freed, r));
    ROW(rq_add, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_add(q, freed_request));
    ROW(rq_add, FOREIGN, "a request handle as the queue", RQ_ERR_INVALID_HANDLE, rq_add(as_queue, r));
    ROW(rq_add, FOREIGN, "a queue handle as the request", RQ_ERR_INVALID_HANDLE, rq_add(q, (rq_request *)(void *)q));
    for (int i = 0; i < N_FOREIGN; i++)
        ROW(rq_add, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_add(q, foreign(i)));

    /* rq_add_url */
    {
        rq_request *out = NULL;
        ROW(rq_add_url, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_add_url(NULL, "http://127.0.0.1:1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url, NULL, "url NULL", RQ_ERR_NULL_ARGUMENT, rq_add_url(q, NULL, NULL, NULL, NULL, &out));
        ROW(rq_add_url, NULL, "out_request NULL", RQ_ERR_NULL_ARGUMENT, rq_add_url(q, "http://127.0.0.1:1/", NULL, NULL, NULL, NULL));
        ROW(rq_add_url, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_add_url(freed, "http://127.0.0.1:1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url, FOREIGN, "a request handle as the queue", RQ_ERR_INVALID_HANDLE,
            rq_add_url(as_queue, "http://127.0.0.1:1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url, INVALID, "url \"not a url\"", RQ_ERR_INVALID_URL, rq_add_url(q, "not a url", NULL, NULL, NULL, &out));
        ROW(rq_add_url, INVALID, "url with a space", RQ_ERR_INVALID_URL, rq_add_url(q, "http://a b/", NULL, NULL, NULL, &out));
        ROW(rq_add_url, INVALID, "url ftp://", RQ_ERR_UNSUPPORTED_SCHEME, rq_add_url(q, "ftp://127.0.0.1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url, INVALID, "a 1 MiB url", RQ_ERR_INVALID_URL, rq_add_url(q, huge_string, NULL, NULL, NULL, &out));
        ROW(rq_add_url, INVALID, "a bad url to a freed queue (the url is checked first)", RQ_ERR_INVALID_URL,
            rq_add_url(freed, "not a url", NULL, NULL, NULL, &out));
        if (out != NULL)
            FAIL("rq_add_url wrote its out-parameter on an error");
        rq_queue *held;
        CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &held));
        CHECK_OK(rq_queue_suspend(held));
        ROWV(rq_add_url, VALID, "a suspended queue, no completion", "RQ_OK, a request waiting in it",
             rq_add_url(held, "http://127.0.0.1:1/", NULL, NULL, NULL, &out) == RQ_OK && out != NULL &&
                 rq_cancel(out) == RQ_OK);
        CHECK_OK(rq_request_free(out));
        CHECK_OK(rq_queue_free(held));
    }

    /* rq_add_url_with_summary: rq_add_url's checks, with its own name in the messages */
    {
        rq_request *out = NULL;
        ROW(rq_add_url_with_summary, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT,
            rq_add_url_with_summary(NULL, "http://127.0.0.1:1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, NULL, "url NULL", RQ_ERR_NULL_ARGUMENT, rq_add_url_with_summary(q, NULL, NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, NULL, "out_request NULL", RQ_ERR_NULL_ARGUMENT,
            rq_add_url_with_summary(q, "http://127.0.0.1:1/", NULL, NULL, NULL, NULL));
        ROW(rq_add_url_with_summary, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE,
            rq_add_url_with_summary(freed, "http://127.0.0.1:1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, FOREIGN, "a request handle as the queue", RQ_ERR_INVALID_HANDLE,
            rq_add_url_with_summary(as_queue, "http://127.0.0.1:1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, INVALID, "url \"not a url\"", RQ_ERR_INVALID_URL,
            rq_add_url_with_summary(q, "not a url", NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, INVALID, "url ftp://", RQ_ERR_UNSUPPORTED_SCHEME,
            rq_add_url_with_summary(q, "ftp://127.0.0.1/", NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, INVALID, "a 1 MiB url", RQ_ERR_INVALID_URL, rq_add_url_with_summary(q, huge_string, NULL, NULL, NULL, &out));
        ROW(rq_add_url_with_summary, INVALID, "a bad url to a freed queue (the url is checked first)", RQ_ERR_INVALID_URL,
            rq_add_url_with_summary(freed, "not a url", NULL, NULL, NULL, &out));
        if (out != NULL)
            FAIL("rq_add_url_with_summary wrote its out-parameter on an error");
        rq_queue *held;
        CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &held));
        CHECK_OK(rq_queue_suspend(held));
        ROWV(rq_add_url_with_summary, VALID, "a suspended queue, no completion", "RQ_OK, a request waiting in it",
             rq_add_url_with_summary(held, "http://127.0.0.1:1/", NULL, NULL, NULL, &out) == RQ_OK && out != NULL &&
                 rq_cancel(out) == RQ_OK);
        CHECK_OK(rq_request_free(out));
        CHECK_OK(rq_queue_free(held));
    }

    /* rq_request_free_many */
    {
        rq_request *none[2] = {NULL, NULL};
        rq_request *freed_one[1] = {freed_request};
        rq_request *live[3] = {new_request(), NULL, new_request()};
        ROW(rq_request_free_many, NULL, "requests NULL, count 1", RQ_ERR_NULL_ARGUMENT, rq_request_free_many(NULL, 1));
        ROW(rq_request_free_many, VALID, "requests NULL, count 0", RQ_OK, rq_request_free_many(NULL, 0));
        ROW(rq_request_free_many, VALID, "NULL entries only", RQ_OK, rq_request_free_many(none, 2));
        ROW(rq_request_free_many, INVALID, "count SIZE_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_free_many(none, SIZE_MAX));
        ROW(rq_request_free_many, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_free_many(freed_one, 1));
        for (int i = 0; i < N_FOREIGN; i++) {
            rq_request *one[1] = {foreign(i)};
            ROW(rq_request_free_many, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_request_free_many(one, 1));
        }
        ROWV(rq_request_free_many, VALID, "two requests and a NULL", "RQ_OK, both freed",
             rq_request_free_many(live, 3) == RQ_OK && rq_cancel(live[0]) == RQ_ERR_INVALID_HANDLE &&
                 rq_cancel(live[2]) == RQ_ERR_INVALID_HANDLE);
    }

    /* rq_cancel */
    ROW(rq_cancel, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_cancel(NULL));
    ROW(rq_cancel, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_cancel(freed_request));
    ROW(rq_cancel, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_cancel((rq_request *)(void *)q));
    ROW(rq_cancel, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_cancel(heap_block));
    ROW(rq_cancel, STATE, "a request never added", RQ_ERR_NOT_ACTIVE, rq_cancel(r));

    /* Freeing a queue whose requests' completions add to it: refused, RQ_ERR_QUEUE_CLOSED. */
    struct cb_context closing = {NULL, 0, 0};
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &closing.queue));
    CHECK_OK(rq_queue_suspend(closing.queue));
    rq_request *victim = new_request();
    CHECK_OK(rq_request_set_completion(victim, closed_rows, &closing, NULL));
    CHECK_OK(rq_add(closing.queue, victim));
    CHECK_OK(rq_request_free(victim));
    CHECK_OK(rq_queue_free(closing.queue));
    CHECK(atomic_load(&closing.done) == 1, "the completion inside rq_queue_free ran %d times", atomic_load(&closing.done));

    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_free(q));
    CHECK_OK(rq_queue_free(dq));
    CHECK_OK(rq_queue_free(iq));
}

static void rows_request_new(void) {
    rq_request *sentinel = (rq_request *)(uintptr_t)0x5a5a, *out = sentinel;
    ROW(rq_request_new, NULL, "url NULL", RQ_ERR_NULL_ARGUMENT, rq_request_new(NULL, &out));
    ROW(rq_request_new, NULL, "out_request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_new("http://127.0.0.1/", NULL));
    ROW(rq_request_new, INVALID, "\"\"", RQ_ERR_INVALID_URL, rq_request_new("", &out));
    ROW(rq_request_new, INVALID, "65537 bytes", RQ_ERR_INVALID_URL, rq_request_new(huge_url, &out));
    ROW(rq_request_new, INVALID, "1 MiB of 'a'", RQ_ERR_INVALID_URL, rq_request_new(huge_string, &out));
    ROW(rq_request_new, INVALID, "non-UTF-8 byte in the path", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1/\xff", &out));
    ROW(rq_request_new, INVALID, "non-UTF-8 byte in the host", RQ_ERR_INVALID_URL, rq_request_new("http://\xc3(.example/", &out));
    ROW(rq_request_new, INVALID, "UTF-8 (non-ASCII) host", RQ_ERR_INVALID_URL, rq_request_new("http://b\xc3\xbc" "cher.example/", &out));
    ROW(rq_request_new, INVALID, "CR LF in the path", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1/a\r\nX-Injected: 1", &out));
    ROW(rq_request_new, INVALID, "LF alone", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1/\n", &out));
    ROW(rq_request_new, INVALID, "a space", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1/a b", &out));
    ROW(rq_request_new, INVALID, "a tab", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1/a\tb", &out));
    ROW(rq_request_new, INVALID, "DEL (0x7f)", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1/\x7f", &out));
    ROW(rq_request_new, INVALID, "no scheme", RQ_ERR_INVALID_URL, rq_request_new("127.0.0.1/path", &out));
    ROW(rq_request_new, INVALID, "relative", RQ_ERR_INVALID_URL, rq_request_new("/path", &out));
    ROW(rq_request_new, INVALID, "no host", RQ_ERR_INVALID_URL, rq_request_new("http://", &out));
    ROW(rq_request_new, INVALID, "empty host with a port", RQ_ERR_INVALID_URL, rq_request_new("http://:80/", &out));
    ROW(rq_request_new, INVALID, "\"http:/x\" (one slash)", RQ_ERR_INVALID_URL, rq_request_new("http:/x", &out));
    ROW(rq_request_new, INVALID, "port 0", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1:0/", &out));
    ROW(rq_request_new, INVALID, "port 65536", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1:65536/", &out));
    ROW(rq_request_new, INVALID, "port 99999999999999999999", RQ_ERR_INVALID_URL,
        rq_request_new("http://127.0.0.1:99999999999999999999/", &out));
    ROW(rq_request_new, INVALID, "port -1", RQ_ERR_INVALID_URL, rq_request_new("http://127.0.0.1:-1/", &out));
    ROW(rq_request_new, INVALID, "unclosed IPv6 bracket", RQ_ERR_INVALID_URL, rq_request_new("http://[::1/", &out));
    ROW(rq_request_new, INVALID, "scheme ftp", RQ_ERR_UNSUPPORTED_SCHEME, rq_request_new("ftp://127.0.0.1/", &out));
    ROW(rq_request_new, INVALID, "scheme file", RQ_ERR_UNSUPPORTED_SCHEME, rq_request_new("file:///etc/passwd", &out));
    ROW(rq_request_new, INVALID, "scheme javascript", RQ_ERR_UNSUPPORTED_SCHEME, rq_request_new("javascript:alert(1)", &out));
    ROWV(rq_request_new, INVALID, "\"gopher://x/\": out_request written?", "RQ_ERR_UNSUPPORTED_SCHEME, out_request untouched",
         rq_request_new("gopher://x/", &out) == RQ_ERR_UNSUPPORTED_SCHEME && out == sentinel);
    ROW(rq_request_new, VALID, "exactly 65536 bytes", RQ_OK, rq_request_new(max_url, &out));
    CHECK_OK(rq_request_free(out));
}

static void rows_requests(void) {
    rq_request *r = new_request(), *freed = new_request(), *frozen = new_request();
    CHECK_OK(rq_request_free(freed));
    rq_queue *q, *sq;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &sq));
    CHECK_OK(rq_queue_suspend(sq));
    CHECK_OK(rq_add(sq, frozen)); /* waits in a suspended queue: frozen */
    rq_request *as_request = (rq_request *)(void *)q;
    char fill[16] = {0};
    rq_request_state state;
    void *context;

    /* rq_request_free */
    ROW(rq_request_free, NULL, "NULL (a no-op)", RQ_OK, rq_request_free(NULL));
    ROW(rq_request_free, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_free(freed));
    ROW(rq_request_free, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_free(as_request));
    for (int i = 0; i < N_FOREIGN; i++)
        ROW(rq_request_free, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_request_free(foreign(i)));

    /* rq_request_set_method */
    ROW(rq_request_set_method, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_method(NULL, "GET"));
    ROW(rq_request_set_method, NULL, "method NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_method(r, NULL));
    ROW(rq_request_set_method, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_method(freed, "GET"));
    ROW(rq_request_set_method, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_method(as_request, "GET"));
    ROW(rq_request_set_method, INVALID, "\"\"", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, ""));
    ROW(rq_request_set_method, INVALID, "65 bytes", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, huge_method));
    ROW(rq_request_set_method, INVALID, "1 MiB", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, huge_string));
    ROW(rq_request_set_method, INVALID, "\"GE T\" (space)", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "GE T"));
    ROW(rq_request_set_method, INVALID, "\"GET\\r\\n\" (CR LF)", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "GET\r\n"));
    ROW(rq_request_set_method, INVALID, "\"GET / HTTP/1.1\\r\\nX: y\" (request line injection)", RQ_ERR_INVALID_METHOD,
        rq_request_set_method(r, "GET / HTTP/1.1\r\nX: y"));
    ROW(rq_request_set_method, INVALID, "non-UTF-8 \"G\\xffT\"", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "G\xffT"));
    ROW(rq_request_set_method, INVALID, "UTF-8 \"G\\xc3\\x89T\"", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "G\xc3\x89T"));
    ROW(rq_request_set_method, INVALID, "\"G(ET\" (separator)", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "G(ET"));
    ROW(rq_request_set_method, INVALID, "\"GET:\"", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "GET:"));
    ROW(rq_request_set_method, INVALID, "a tab", RQ_ERR_INVALID_METHOD, rq_request_set_method(r, "G\tET"));
    ROW(rq_request_set_method, VALID, "64 bytes", RQ_OK, rq_request_set_method(r, max_method));
    ROW(rq_request_set_method, VALID, "every token character", RQ_OK, rq_request_set_method(r, "x!#$%&'*+-.^_`|~9"));
    ROW(rq_request_set_method, STATE, "a frozen (added) request", RQ_ERR_REQUEST_FROZEN, rq_request_set_method(frozen, "POST"));

    /* rq_request_set_header */
    ROW(rq_request_set_header, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_header(NULL, "A", "b"));
    ROW(rq_request_set_header, NULL, "name NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_header(r, NULL, "b"));
    ROW(rq_request_set_header, VALID, "value NULL (removes the header)", RQ_OK, rq_request_set_header(r, "X-Absent", NULL));
    ROW(rq_request_set_header, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_header(freed, "A", "b"));
    ROW(rq_request_set_header, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_request_set_header(heap_block, "A", "b"));
    ROW(rq_request_set_header, INVALID, "name \"\"", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "", "b"));
    ROW(rq_request_set_header, INVALID, "name with CR LF", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-A\r\nX-B", "b"));
    ROW(rq_request_set_header, INVALID, "name with a space", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X A", "b"));
    ROW(rq_request_set_header, INVALID, "name with a colon", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-A:", "b"));
    ROW(rq_request_set_header, INVALID, "non-UTF-8 name", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-\xff", "b"));
    ROW(rq_request_set_header, INVALID, "name of 257 bytes", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, huge_name, "b"));
    ROW(rq_request_set_header, INVALID, "name of 1 MiB", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, huge_string, "b"));
    ROW(rq_request_set_header, INVALID, "value with CR", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-A", "a\rb"));
    ROW(rq_request_set_header, INVALID, "value with LF", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-A", "a\nb"));
    ROW(rq_request_set_header, INVALID, "value with CR LF + injected header", RQ_ERR_INVALID_HEADER,
        rq_request_set_header(r, "X-A", "b\r\nX-Injected: 1"));
    ROW(rq_request_set_header, INVALID, "value of 65537 bytes", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-A", huge_value));
    ROW(rq_request_set_header, INVALID, "value of 1 MiB", RQ_ERR_INVALID_HEADER, rq_request_set_header(r, "X-A", huge_string));
    ROW(rq_request_set_header, VALID, "non-UTF-8 value (any byte but NUL, CR, LF)", RQ_OK,
        rq_request_set_header(r, "X-A", "\x01\x7f\x80\xff"));
    ROW(rq_request_set_header, VALID, "empty value", RQ_OK, rq_request_set_header(r, "X-Empty", ""));
    ROW(rq_request_set_header, VALID, "name of 256 bytes, value of 65536", RQ_OK, rq_request_set_header(r, max_name, max_value));
    {
        rq_request *many = new_request();
        for (int i = 0; i < 1000; i++) {
            char name[32];
            snprintf(name, sizeof name, "X-H%d", i);
            CHECK_OK(rq_request_set_header(many, name, "v"));
        }
        ROW(rq_request_set_header, INVALID, "a 1001st header", RQ_ERR_INVALID_HEADER, rq_request_set_header(many, "X-Too-Many", "v"));
        ROW(rq_request_set_header, VALID, "replacing one of 1000 headers", RQ_OK, rq_request_set_header(many, "x-h5", "w"));
        CHECK_OK(rq_request_free(many));
    }
    ROW(rq_request_set_header, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_header(frozen, "A", "b"));

    /* rq_request_set_body */
    ROW(rq_request_set_body, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_body(NULL, fill, 1));
    ROW(rq_request_set_body, NULL, "data NULL, size 5", RQ_ERR_NULL_ARGUMENT, rq_request_set_body(r, NULL, 5));
    ROW(rq_request_set_body, NULL, "data NULL, size SIZE_MAX", RQ_ERR_NULL_ARGUMENT, rq_request_set_body(r, NULL, SIZE_MAX));
    ROW(rq_request_set_body, VALID, "data NULL, size 0 (empty body)", RQ_OK, rq_request_set_body(r, NULL, 0));
    ROW(rq_request_set_body, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_body(freed, fill, 1));
    ROW(rq_request_set_body, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_body(as_request, fill, 1));
    ROW(rq_request_set_body, INVALID, "size SIZE_MAX", RQ_ERR_OUT_OF_MEMORY, rq_request_set_body(r, fill, SIZE_MAX));
    ROW(rq_request_set_body, INVALID, "size SIZE_MAX / 2 + 1", RQ_ERR_OUT_OF_MEMORY, rq_request_set_body(r, fill, SIZE_MAX / 2 + 1));
    ROW(rq_request_set_body, INVALID, "size 2^50 (more than any memory)", RQ_ERR_OUT_OF_MEMORY,
        rq_request_set_body(r, fill, (size_t)1 << 50));
    ROW(rq_request_set_body, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_body(frozen, fill, 1));

    /* rq_request_set_body_borrowed (r gets its empty copied body back after these rows) */
    ROW(rq_request_set_body_borrowed, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_body_borrowed(NULL, fill, 1));
    ROW(rq_request_set_body_borrowed, NULL, "data NULL, size 5", RQ_ERR_NULL_ARGUMENT, rq_request_set_body_borrowed(r, NULL, 5));
    ROW(rq_request_set_body_borrowed, NULL, "data NULL, size SIZE_MAX", RQ_ERR_NULL_ARGUMENT,
        rq_request_set_body_borrowed(r, NULL, SIZE_MAX));
    ROW(rq_request_set_body_borrowed, VALID, "data NULL, size 0 (empty body)", RQ_OK, rq_request_set_body_borrowed(r, NULL, 0));
    ROW(rq_request_set_body_borrowed, VALID, "a buffer of the caller's", RQ_OK, rq_request_set_body_borrowed(r, fill, sizeof fill));
    ROW(rq_request_set_body_borrowed, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_body_borrowed(freed, fill, 1));
    ROW(rq_request_set_body_borrowed, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE,
        rq_request_set_body_borrowed(as_request, fill, 1));
    ROW(rq_request_set_body_borrowed, INVALID, "size SIZE_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_set_body_borrowed(r, fill, SIZE_MAX));
    ROW(rq_request_set_body_borrowed, INVALID, "size SIZE_MAX / 2 + 1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_body_borrowed(r, fill, SIZE_MAX / 2 + 1));
    ROW(rq_request_set_body_borrowed, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_body_borrowed(frozen, fill, 1));
    CHECK_OK(rq_request_set_body(r, NULL, 0));

    /* times */
#define TIME_ROWS(fn)                                                                              \
    ROW(fn, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, fn(NULL, 1));                              \
    ROW(fn, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, fn(freed, 1));                        \
    ROW(fn, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE, fn(foreign(0), 1));                 \
    ROW(fn, INVALID, "-1", RQ_ERR_INVALID_ARGUMENT, fn(r, -1));                                    \
    ROW(fn, INVALID, "-1e-300", RQ_ERR_INVALID_ARGUMENT, fn(r, -1e-300));                          \
    ROW(fn, INVALID, "NaN", RQ_ERR_INVALID_ARGUMENT, fn(r, NAN));                                  \
    ROW(fn, INVALID, "+INFINITY", RQ_ERR_INVALID_ARGUMENT, fn(r, INFINITY));                       \
    ROW(fn, INVALID, "-INFINITY", RQ_ERR_INVALID_ARGUMENT, fn(r, -INFINITY));                      \
    ROW(fn, INVALID, "1e6 + 1", RQ_ERR_INVALID_ARGUMENT, fn(r, 1e6 + 1));                          \
    ROW(fn, INVALID, "DBL_MAX", RQ_ERR_INVALID_ARGUMENT, fn(r, DBL_MAX));                           \
    ROW(fn, VALID, "0", RQ_OK, fn(r, 0));                                                          \
    ROW(fn, VALID, "-0.0", RQ_OK, fn(r, -0.0));                                                    \
    ROW(fn, VALID, "1e6", RQ_OK, fn(r, 1e6));                                                      \
    ROW(fn, VALID, "DBL_MIN (tiny)", RQ_OK, fn(r, DBL_MIN));                                       \
    ROW(fn, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, fn(frozen, 1))
    TIME_ROWS(rq_request_set_timeout);
    TIME_ROWS(rq_request_set_connect_timeout);
    TIME_ROWS(rq_request_set_idle_timeout);
    TIME_ROWS(rq_request_set_retry_delay);
    TIME_ROWS(rq_request_set_header_timeout);
    /* rq_request_set_low_speed_limit: the window is a time as above; the rate is finite, >= 0,
     * at most 1e12. */
    ROW(rq_request_set_low_speed_limit, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT,
        rq_request_set_low_speed_limit(NULL, 1, 1));
    ROW(rq_request_set_low_speed_limit, FREED, "a freed request", RQ_ERR_INVALID_HANDLE,
        rq_request_set_low_speed_limit(freed, 1, 1));
    ROW(rq_request_set_low_speed_limit, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE,
        rq_request_set_low_speed_limit(foreign(0), 1, 1));
    ROW(rq_request_set_low_speed_limit, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN,
        rq_request_set_low_speed_limit(frozen, 1, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "window -1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, -1));
    ROW(rq_request_set_low_speed_limit, INVALID, "window -1e-300", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, -1e-300));
    ROW(rq_request_set_low_speed_limit, INVALID, "window NaN", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, NAN));
    ROW(rq_request_set_low_speed_limit, INVALID, "window +INFINITY", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, INFINITY));
    ROW(rq_request_set_low_speed_limit, INVALID, "window -INFINITY", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, -INFINITY));
    ROW(rq_request_set_low_speed_limit, INVALID, "window 1e6 + 1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, 1e6 + 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "window DBL_MAX", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1, DBL_MAX));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate -1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, -1, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate -1e-300", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, -1e-300, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate NaN", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, NAN, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate +INFINITY", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, INFINITY, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate -INFINITY", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, -INFINITY, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate 1e12 + 1e6", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, 1e12 + 1e6, 1));
    ROW(rq_request_set_low_speed_limit, INVALID, "rate DBL_MAX", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_low_speed_limit(r, DBL_MAX, 1));
    ROW(rq_request_set_low_speed_limit, VALID, "rate 1e12, window 1e6", RQ_OK,
        rq_request_set_low_speed_limit(r, 1e12, 1e6));
    ROW(rq_request_set_low_speed_limit, VALID, "rate 0 and window 0 (off)", RQ_OK,
        rq_request_set_low_speed_limit(r, 0, 0));
    ROW(rq_request_set_low_speed_limit, VALID, "-0.0 both", RQ_OK,
        rq_request_set_low_speed_limit(r, -0.0, -0.0));
    ROW(rq_request_set_low_speed_limit, VALID, "DBL_MIN both (tiny)", RQ_OK,
        rq_request_set_low_speed_limit(r, DBL_MIN, DBL_MIN));

    /* rq_request_set_credentials */
    ROW(rq_request_set_credentials, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_credentials(NULL, "u", "p"));
    ROW(rq_request_set_credentials, VALID, "user NULL (clears)", RQ_OK, rq_request_set_credentials(r, NULL, "p"));
    ROW(rq_request_set_credentials, VALID, "password NULL (empty password)", RQ_OK, rq_request_set_credentials(r, "u", NULL));
    ROW(rq_request_set_credentials, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_credentials(freed, "u", "p"));
    ROW(rq_request_set_credentials, FOREIGN, "0x10", RQ_ERR_INVALID_HANDLE, rq_request_set_credentials(foreign(1), "u", "p"));
    ROW(rq_request_set_credentials, INVALID, "CR LF in user and password (sent base64-encoded)", RQ_OK,
        rq_request_set_credentials(r, "u\r\nX: 1", "p\r\n"));
    ROW(rq_request_set_credentials, INVALID, "1 MiB user", RQ_OK, rq_request_set_credentials(r, huge_string, "p"));
    ROW(rq_request_set_credentials, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_credentials(frozen, "u", "p"));

    /* rq_request_set_max_redirects */
    ROW(rq_request_set_max_redirects, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_max_redirects(NULL, 1));
    ROW(rq_request_set_max_redirects, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_max_redirects(freed, 1));
    ROW(rq_request_set_max_redirects, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_max_redirects(as_request, 1));
    ROW(rq_request_set_max_redirects, INVALID, "1001", RQ_ERR_INVALID_ARGUMENT, rq_request_set_max_redirects(r, 1001));
    ROW(rq_request_set_max_redirects, INVALID, "UINT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_set_max_redirects(r, UINT_MAX));
    ROW(rq_request_set_max_redirects, INVALID, "(unsigned)-1 from a negative int", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_max_redirects(r, (unsigned)-1));
    ROW(rq_request_set_max_redirects, VALID, "0", RQ_OK, rq_request_set_max_redirects(r, 0));
    ROW(rq_request_set_max_redirects, VALID, "1000", RQ_OK, rq_request_set_max_redirects(r, 1000));
    ROW(rq_request_set_max_redirects, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_max_redirects(frozen, 1));

    /* rq_request_set_max_response_size */
    ROW(rq_request_set_max_response_size, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_max_response_size(NULL, 1));
    ROW(rq_request_set_max_response_size, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_max_response_size(freed, 1));
    ROW(rq_request_set_max_response_size, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE,
        rq_request_set_max_response_size(heap_block, 1));
    ROW(rq_request_set_max_response_size, VALID, "UINT64_MAX", RQ_OK, rq_request_set_max_response_size(r, UINT64_MAX));
    ROW(rq_request_set_max_response_size, VALID, "0 (no limit)", RQ_OK, rq_request_set_max_response_size(r, 0));
    ROW(rq_request_set_max_response_size, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN,
        rq_request_set_max_response_size(frozen, 1));

    /* rq_request_set_ca_file */
    ROW(rq_request_set_ca_file, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_ca_file(NULL, "/tmp/ca.pem"));
    ROW(rq_request_set_ca_file, VALID, "path NULL (system CAs)", RQ_OK, rq_request_set_ca_file(r, NULL));
    ROW(rq_request_set_ca_file, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_ca_file(freed, "/tmp/ca.pem"));
    ROW(rq_request_set_ca_file, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_ca_file(as_request, "/tmp/ca.pem"));
    ROW(rq_request_set_ca_file, INVALID, "\"\" (read when the request runs; fails closed, see test_security)", RQ_OK,
        rq_request_set_ca_file(r, ""));
    ROW(rq_request_set_ca_file, INVALID, "a path that does not exist (idem)", RQ_OK, rq_request_set_ca_file(r, "/nonexistent/ca.pem"));
    ROW(rq_request_set_ca_file, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_ca_file(frozen, "/tmp/ca.pem"));

    /* callbacks */
    ROW(rq_request_set_completion, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_completion(NULL, NULL, NULL, NULL));
    ROW(rq_request_set_completion, VALID, "fn, context and finalizer NULL", RQ_OK, rq_request_set_completion(r, NULL, NULL, NULL));
    ROW(rq_request_set_completion, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_completion(freed, NULL, NULL, NULL));
    ROW(rq_request_set_completion, FOREIGN, "UINTPTR_MAX", RQ_ERR_INVALID_HANDLE, rq_request_set_completion(foreign(3), NULL, NULL, NULL));
    ROW(rq_request_set_completion, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_completion(frozen, NULL, NULL, NULL));
    ROW(rq_request_set_summary_completion, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT,
        rq_request_set_summary_completion(NULL, NULL, NULL, NULL));
    ROW(rq_request_set_summary_completion, VALID, "fn, context and finalizer NULL", RQ_OK,
        rq_request_set_summary_completion(r, NULL, NULL, NULL));
    ROW(rq_request_set_summary_completion, FREED, "a freed request", RQ_ERR_INVALID_HANDLE,
        rq_request_set_summary_completion(freed, NULL, NULL, NULL));
    ROW(rq_request_set_summary_completion, FOREIGN, "UINTPTR_MAX", RQ_ERR_INVALID_HANDLE,
        rq_request_set_summary_completion(foreign(3), NULL, NULL, NULL));
    ROW(rq_request_set_summary_completion, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN,
        rq_request_set_summary_completion(frozen, NULL, NULL, NULL));
    ROW(rq_request_set_upload_progress, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_upload_progress(NULL, NULL));
    ROW(rq_request_set_upload_progress, VALID, "fn NULL (removes)", RQ_OK, rq_request_set_upload_progress(r, NULL));
    ROW(rq_request_set_upload_progress, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_upload_progress(freed, NULL));
    ROW(rq_request_set_upload_progress, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_upload_progress(as_request, NULL));
    ROW(rq_request_set_upload_progress, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_upload_progress(frozen, NULL));
    ROW(rq_request_set_download_progress, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_download_progress(NULL, NULL));
    ROW(rq_request_set_download_progress, VALID, "fn NULL (removes)", RQ_OK, rq_request_set_download_progress(r, NULL));
    ROW(rq_request_set_download_progress, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_download_progress(freed, NULL));
    ROW(rq_request_set_download_progress, FOREIGN, "0x5a5b", RQ_ERR_INVALID_HANDLE, rq_request_set_download_progress(foreign(4), NULL));
    ROW(rq_request_set_download_progress, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_download_progress(frozen, NULL));
    ROW(rq_request_set_auth_handler, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_auth_handler(NULL, NULL));
    ROW(rq_request_set_auth_handler, VALID, "fn NULL (removes)", RQ_OK, rq_request_set_auth_handler(r, NULL));
    ROW(rq_request_set_auth_handler, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_auth_handler(freed, NULL));
    ROW(rq_request_set_auth_handler, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_request_set_auth_handler(heap_block, NULL));
    ROW(rq_request_set_auth_handler, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_auth_handler(frozen, NULL));

    /* retry */
    ROW(rq_request_set_retry, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry(NULL, 1));
    ROW(rq_request_set_retry, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_retry(freed, 1));
    ROW(rq_request_set_retry, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_retry(as_request, 1));
    ROW(rq_request_set_retry, VALID, "INT_MIN (any non-zero is true)", RQ_OK, rq_request_set_retry(r, INT_MIN));
    ROW(rq_request_set_retry, VALID, "-1", RQ_OK, rq_request_set_retry(r, -1));
    ROW(rq_request_set_retry, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_retry(frozen, 1));
    {
        const rq_outcome fine[] = {RQ_OUTCOME_TIMEOUT, RQ_OUTCOME_HTTP_STATUS};
        const rq_outcome with_ok[] = {RQ_OUTCOME_TIMEOUT, RQ_OUTCOME_OK};
        const rq_outcome with_cancelled[] = {RQ_OUTCOME_CANCELLED};
        const rq_outcome past_last[] = {(rq_outcome)(last_outcome + 1)};
        const rq_outcome negative[] = {(rq_outcome)-1};
        const rq_outcome huge[] = {(rq_outcome)INT_MAX};
        ROW(rq_request_set_retry_outcomes, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry_outcomes(NULL, fine, 2));
        ROW(rq_request_set_retry_outcomes, NULL, "outcomes NULL, count 2", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry_outcomes(r, NULL, 2));
        ROW(rq_request_set_retry_outcomes, VALID, "outcomes NULL, count 0 (retry nothing)", RQ_OK, rq_request_set_retry_outcomes(r, NULL, 0));
        ROW(rq_request_set_retry_outcomes, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_outcomes(freed, fine, 2));
        ROW(rq_request_set_retry_outcomes, FOREIGN, "0x10", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_outcomes(foreign(1), fine, 2));
        ROW(rq_request_set_retry_outcomes, INVALID, "contains RQ_OUTCOME_OK", RQ_ERR_INVALID_ARGUMENT,
            rq_request_set_retry_outcomes(r, with_ok, 2));
        ROW(rq_request_set_retry_outcomes, INVALID, "contains RQ_OUTCOME_CANCELLED", RQ_ERR_INVALID_ARGUMENT,
            rq_request_set_retry_outcomes(r, with_cancelled, 1));
        ROW(rq_request_set_retry_outcomes, INVALID, past_outcome_text, RQ_ERR_INVALID_ARGUMENT,
            rq_request_set_retry_outcomes(r, past_last, 1));
        ROW(rq_request_set_retry_outcomes, INVALID, "contains -1", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_outcomes(r, negative, 1));
        ROW(rq_request_set_retry_outcomes, INVALID, "contains INT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_outcomes(r, huge, 1));
        ROW(rq_request_set_retry_outcomes, INVALID, "count SIZE_MAX (an array of 2)", RQ_ERR_INVALID_ARGUMENT,
            rq_request_set_retry_outcomes(r, fine, SIZE_MAX));
        ROW(rq_request_set_retry_outcomes, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN,
            rq_request_set_retry_outcomes(frozen, fine, 2));
    }
    ROW(rq_request_set_max_attempts, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_max_attempts(NULL, 1));
    ROW(rq_request_set_max_attempts, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_max_attempts(freed, 1));
    ROW(rq_request_set_max_attempts, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_max_attempts(as_request, 1));
    ROW(rq_request_set_max_attempts, INVALID, "1000001", RQ_ERR_INVALID_ARGUMENT, rq_request_set_max_attempts(r, 1000001));
    ROW(rq_request_set_max_attempts, INVALID, "UINT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_set_max_attempts(r, UINT_MAX));
    ROW(rq_request_set_max_attempts, VALID, "0 (unlimited)", RQ_OK, rq_request_set_max_attempts(r, 0));
    ROW(rq_request_set_max_attempts, VALID, "1000000", RQ_OK, rq_request_set_max_attempts(r, 1000000));
    ROW(rq_request_set_max_attempts, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_max_attempts(frozen, 1));

    /* rq_request_start */
    ROW(rq_request_start, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_start(NULL));
    ROW(rq_request_start, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_start(freed));
    ROW(rq_request_start, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_start(as_request));
    for (int i = 0; i < N_FOREIGN; i++)
        ROW(rq_request_start, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_request_start(foreign(i)));

    /* state and context */
    ROW(rq_request_get_state, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_get_state(NULL, &state));
    ROW(rq_request_get_state, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_request_get_state(r, NULL));
    ROW(rq_request_get_state, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_get_state(freed, &state));
    ROW(rq_request_get_state, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_get_state(as_request, &state));
    ROWV(rq_request_get_state, VALID, "a request waiting in a suspended queue", "RQ_OK, RQ_STATE_WAITING",
         rq_request_get_state(frozen, &state) == RQ_OK && state == RQ_STATE_WAITING);
    ROW(rq_request_get_context, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_get_context(NULL, &context));
    ROW(rq_request_get_context, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_request_get_context(r, NULL));
    ROW(rq_request_get_context, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_get_context(freed, &context));
    ROW(rq_request_get_context, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE, rq_request_get_context(foreign(0), &context));

    /* Snapshot handles become invalid once the request completed and every owner freed it. */
    rq_request **list;
    size_t n;
    CHECK_OK(rq_queue_snapshot(sq, &list, &n));
    CHECK(n == 1 && list[0] == frozen, "snapshot of the suspended queue: %zu entries", n);
    rq_request *borrowed = list[0];
    rq_snapshot_free(list);
    CHECK_OK(rq_request_free(frozen));
    CHECK_OK(rq_queue_free(sq)); /* completes it */
    ROW(rq_request_get_state, FREED, "a snapshot's handle after completion and free", RQ_ERR_INVALID_HANDLE,
        rq_request_get_state(borrowed, &state));
    ROW(rq_cancel, FREED, "a snapshot's handle after completion and free", RQ_ERR_INVALID_HANDLE, rq_cancel(borrowed));

    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_free(q));
}

static void rows_scheduler(void) {
    rq_queue *q, *freed;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &freed));
    CHECK_OK(rq_queue_free(freed));
    rq_request *r = new_request();
    rq_queue *as_queue = (rq_queue *)(void *)r;
    size_t n = 0;
    rq_request **list = NULL;

    ROW(rq_queue_set_max_per_host, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_max_per_host(NULL, 1));
    ROW(rq_queue_set_max_per_host, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_max_per_host(freed, 1));
    ROW(rq_queue_set_max_per_host, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_set_max_per_host(as_queue, 1));
    ROW(rq_queue_set_max_per_host, VALID, "SIZE_MAX", RQ_OK, rq_queue_set_max_per_host(q, SIZE_MAX));
    ROW(rq_queue_set_max_per_host, VALID, "0 (no per-host limit)", RQ_OK, rq_queue_set_max_per_host(q, 0));
    ROW(rq_queue_get_max_per_host, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_per_host(NULL, &n));
    ROW(rq_queue_get_max_per_host, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_per_host(q, NULL));
    ROW(rq_queue_get_max_per_host, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_max_per_host(freed, &n));
    ROW(rq_queue_get_max_per_host, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_queue_get_max_per_host(heap_block, &n));

    ROW(rq_queue_set_rate_limit, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_rate_limit(NULL, 1, 1, 0));
    ROW(rq_queue_set_rate_limit, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_rate_limit(freed, 1, 1, 0));
    ROW(rq_queue_set_rate_limit, FOREIGN, "0x10", RQ_ERR_INVALID_HANDLE, rq_queue_set_rate_limit(foreign(1), 1, 1, 0));
    ROW(rq_queue_set_rate_limit, INVALID, "interval 0", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_rate_limit(q, 1, 0, 0));
    ROW(rq_queue_set_rate_limit, INVALID, "interval -1", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_rate_limit(q, 1, -1, 0));
    ROW(rq_queue_set_rate_limit, INVALID, "interval NaN", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_rate_limit(q, 1, NAN, 0));
    ROW(rq_queue_set_rate_limit, INVALID, "interval +INFINITY", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_rate_limit(q, 1, INFINITY, 0));
    ROW(rq_queue_set_rate_limit, INVALID, "interval 1e6 + 1", RQ_ERR_INVALID_ARGUMENT, rq_queue_set_rate_limit(q, 1, 1e6 + 1, 0));
    ROW(rq_queue_set_rate_limit, VALID, "UINT_MAX starts per 1e6 s, per_host INT_MIN", RQ_OK,
        rq_queue_set_rate_limit(q, UINT_MAX, 1e6, INT_MIN));
    ROW(rq_queue_set_rate_limit, VALID, "interval DBL_MIN (tiny)", RQ_OK, rq_queue_set_rate_limit(q, 1, DBL_MIN, 0));
    ROW(rq_queue_set_rate_limit, VALID, "starts 0 (removes the limit)", RQ_OK, rq_queue_set_rate_limit(q, 0, 1, 0));

    int mine;
    void *context = &mine;
    ROW(rq_queue_set_context, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_context(NULL, &mine));
    ROW(rq_queue_set_context, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_context(freed, &mine));
    ROW(rq_queue_set_context, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_set_context(as_queue, &mine));
    ROW(rq_queue_set_context, VALID, "context NULL (removes it)", RQ_OK, rq_queue_set_context(q, NULL));
    ROW(rq_queue_get_context, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_context(NULL, &context));
    ROW(rq_queue_get_context, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_context(q, NULL));
    ROW(rq_queue_get_context, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_context(freed, &context));
    ROW(rq_queue_get_context, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_get_context(as_queue, &context));
    ROWV(rq_queue_get_context, VALID, "after set (&mine, then NULL)", "the pointer set",
         rq_queue_set_context(q, &mine) == RQ_OK && rq_queue_get_context(q, &context) == RQ_OK && context == &mine &&
             rq_queue_set_context(q, NULL) == RQ_OK && rq_queue_get_context(q, &context) == RQ_OK && context == NULL);
    ROWV(rq_last_error_message, VALID, "after rq_queue_get_context(q, NULL)", "\"rq_queue_get_context: out_context is NULL\"",
         rq_queue_get_context(q, NULL) == RQ_ERR_NULL_ARGUMENT &&
             strcmp(rq_last_error_message(), "rq_queue_get_context: out_context is NULL") == 0);
    ROWV(rq_last_error_message, VALID, "after a call that succeeds", "unchanged",
         rq_queue_get_context(q, NULL) == RQ_ERR_NULL_ARGUMENT && rq_queue_get_context(q, &context) == RQ_OK &&
             strcmp(rq_last_error_message(), "rq_queue_get_context: out_context is NULL") == 0);

    rq_queue_stats st;
    ROW(rq_queue_get_stats, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_stats(NULL, &st));
    ROW(rq_queue_get_stats, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_stats(q, NULL));
    st.size = sizeof st;
    ROW(rq_queue_get_stats, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_stats(freed, &st));
    ROW(rq_queue_get_stats, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_get_stats(as_queue, &st));
    st.size = 0;
    ROW(rq_queue_get_stats, INVALID, "size 0", RQ_ERR_INVALID_ARGUMENT, rq_queue_get_stats(q, &st));
    st.size = sizeof(size_t);
    ROW(rq_queue_get_stats, INVALID, "size too small for the first field", RQ_ERR_INVALID_ARGUMENT, rq_queue_get_stats(q, &st));
    {
        /* A caller built against a later header, with a larger struct. */
        unsigned char larger[sizeof(rq_queue_stats) + 64];
        memset(larger, 0x77, sizeof larger);
        size_t larger_size = sizeof larger;
        memcpy(larger, &larger_size, sizeof larger_size);
        ROWV(rq_queue_get_stats, VALID, "size sizeof + 64 (a later version's caller)", "RQ_OK, size set to sizeof, no write past it",
             rq_queue_get_stats(q, (rq_queue_stats *)(void *)larger) == RQ_OK && memcmp(larger, &(size_t){sizeof st}, sizeof(size_t)) == 0 &&
                 larger[sizeof st] == 0x77);
    }
    st.size = SIZE_MAX;
    ROWV(rq_queue_get_stats, INVALID, "size SIZE_MAX (not too small for the first field)", "RQ_OK, size set to sizeof(rq_queue_stats)",
         rq_queue_get_stats(q, &st) == RQ_OK && st.size == sizeof st && st.added == 0);
    memset(&st, 0x77, sizeof st);
    st.size = sizeof(size_t) + sizeof(uint64_t);
    ROWV(rq_queue_get_stats, VALID, "size of the first field only", "RQ_OK, nothing written past it",
         rq_queue_get_stats(q, &st) == RQ_OK && st.added == 0 && st.started == 0x7777777777777777ull);

    ROW(rq_queue_snapshot_tag, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot_tag(NULL, "t", &list, &n));
    ROW(rq_queue_snapshot_tag, NULL, "tag NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot_tag(q, NULL, &list, &n));
    ROW(rq_queue_snapshot_tag, NULL, "out_requests NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot_tag(q, "t", NULL, &n));
    ROW(rq_queue_snapshot_tag, NULL, "out_count NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_snapshot_tag(q, "t", &list, NULL));
    ROW(rq_queue_snapshot_tag, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_snapshot_tag(freed, "t", &list, &n));
    ROW(rq_queue_snapshot_tag, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_snapshot_tag(as_queue, "t", &list, &n));
    ROWV(rq_queue_snapshot_tag, INVALID, "tag of 1 MiB", "RQ_OK, 0 requests",
         rq_queue_snapshot_tag(q, huge_string, &list, &n) == RQ_OK && n == 0 && (rq_snapshot_free(list), 1));
    ROWV(rq_queue_snapshot_tag, INVALID, "non-UTF-8 tag", "RQ_OK, 0 requests",
         rq_queue_snapshot_tag(q, "\xff\xfe", &list, &n) == RQ_OK && n == 0 && (rq_snapshot_free(list), 1));
    ROW(rq_queue_count_tag, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_count_tag(NULL, "t", &n));
    ROW(rq_queue_count_tag, NULL, "tag NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_count_tag(q, NULL, &n));
    ROW(rq_queue_count_tag, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_count_tag(q, "t", NULL));
    ROW(rq_queue_count_tag, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_count_tag(freed, "t", &n));
    ROW(rq_queue_count_tag, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE, rq_queue_count_tag(foreign(0), "t", &n));
    ROWV(rq_queue_count_tag, INVALID, "tag \"\" on an empty queue", "RQ_OK, 0", rq_queue_count_tag(q, "", &n) == RQ_OK && n == 0);
    ROW(rq_queue_cancel_tag, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cancel_tag(NULL, "t", &n));
    ROW(rq_queue_cancel_tag, NULL, "tag NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cancel_tag(q, NULL, &n));
    ROW(rq_queue_cancel_tag, VALID, "out_cancelled NULL (allowed)", RQ_OK, rq_queue_cancel_tag(q, "t", NULL));
    ROW(rq_queue_cancel_tag, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_cancel_tag(freed, "t", &n));
    ROW(rq_queue_cancel_tag, FOREIGN, "UINTPTR_MAX", RQ_ERR_INVALID_HANDLE, rq_queue_cancel_tag(foreign(3), "t", &n));
    ROWV(rq_queue_cancel_tag, INVALID, "tag of 1 MiB", "RQ_OK, 0 cancelled", rq_queue_cancel_tag(q, huge_string, &n) == RQ_OK && n == 0);

    /* Tags are compared byte for byte: two non-UTF-8 tags that differ are different tags. */
    rq_queue *sq;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &sq));
    CHECK_OK(rq_queue_suspend(sq));
    rq_request *t1 = new_request(), *t2 = new_request();
    int rc1 = rq_request_set_tag(t1, "t\xff"), rc2 = rq_request_set_tag(t2, "t\xfe");
    CHECK_OK(rq_request_set_method(t2, "HEAD")); /* not equal to t1: no duplicate cancel */
    CHECK_OK(rq_add(sq, t1));
    CHECK_OK(rq_add(sq, t2));
    n = 99;
    int counted = rq_queue_count_tag(sq, "t\xff", &n);
    add_row("rq_request_set_tag", "rq_request_set_tag", K_INVALID, "non-UTF-8 tags \"t\\xff\" and \"t\\xfe\" on two requests",
            "refused, or RQ_OK and kept apart (count_tag(\"t\\xff\") == 1)",
            rc1 != RQ_OK || rc2 != RQ_OK ? result_name(rc1 != RQ_OK ? rc1 : rc2)
            : counted == RQ_OK && n == 1 ? "RQ_OK, kept apart" : "RQ_OK, but they count as one tag",
            rc1 != RQ_OK || rc2 != RQ_OK || (counted == RQ_OK && n == 1), __LINE__);
    CHECK_OK(rq_queue_free(sq));

    /* rq_request_set_priority on a waiting and on a completed request. */
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &sq));
    CHECK_OK(rq_queue_suspend(sq));
    rq_request_state state;
    CHECK_OK(rq_request_get_state(t1, &state)); /* its queue was freed above */
    CHECK(state == RQ_STATE_COMPLETED, "state %d after its queue was freed", (int)state);
    ROW(rq_request_set_priority, STATE, "a completed request", RQ_ERR_NOT_ACTIVE, rq_request_set_priority(t1, RQ_PRIORITY_HIGH));
    rq_request *w = new_request();
    CHECK_OK(rq_add(sq, w));
    ROW(rq_request_set_priority, VALID, "a request waiting in a suspended queue", RQ_OK, rq_request_set_priority(w, RQ_PRIORITY_VERY_HIGH));
    ROW(rq_request_set_priority, INVALID, "a waiting request, priority 100", RQ_ERR_INVALID_ARGUMENT, rq_request_set_priority(w, (rq_priority)100));
    CHECK_OK(rq_queue_free(sq));
    CHECK_OK(rq_request_free(w));
    CHECK_OK(rq_request_free(t1));
    CHECK_OK(rq_request_free(t2));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_free(q));
}

static int data_sink(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    (void)context, (void)request, (void)data, (void)size, (void)offset;
    return 0;
}

static void head_sink(void *context, rq_request *request, const rq_response *head) {
    (void)context, (void)request, (void)head;
}

static void rows_request_extras(void) {
    rq_request *r = new_request(), *freed = new_request(), *frozen = new_request();
    CHECK_OK(rq_request_free(freed));
    rq_queue *sq;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &sq));
    CHECK_OK(rq_queue_suspend(sq));
    CHECK_OK(rq_add(sq, frozen));
    rq_request *as_request = (rq_request *)(void *)sq;
    rq_priority priority;

    ROW(rq_request_set_retry_backoff, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry_backoff(NULL, 2, 10, 0.5));
    ROW(rq_request_set_retry_backoff, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_backoff(freed, 2, 10, 0.5));
    ROW(rq_request_set_retry_backoff, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_backoff(as_request, 2, 10, 0.5));
    ROW(rq_request_set_retry_backoff, INVALID, "multiplier 0.5", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 0.5, 10, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "multiplier 0", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 0, 10, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "multiplier -2", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, -2, 10, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "multiplier 100.5", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 100.5, 10, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "multiplier NaN", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, NAN, 10, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "multiplier +INFINITY", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, INFINITY, 10, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "max_delay -1", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, -1, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "max_delay NaN", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, NAN, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "max_delay +INFINITY", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, INFINITY, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "max_delay 1e6 + 1", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, 1e6 + 1, 0));
    ROW(rq_request_set_retry_backoff, INVALID, "jitter -0.1", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, 10, -0.1));
    ROW(rq_request_set_retry_backoff, INVALID, "jitter 1.1", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, 10, 1.1));
    ROW(rq_request_set_retry_backoff, INVALID, "jitter NaN", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_backoff(r, 2, 10, NAN));
    ROW(rq_request_set_retry_backoff, VALID, "1, 0, 0 (the defaults)", RQ_OK, rq_request_set_retry_backoff(r, 1, 0, 0));
    ROW(rq_request_set_retry_backoff, VALID, "100, 1e6, 1 (the largest)", RQ_OK, rq_request_set_retry_backoff(r, 100, 1e6, 1));
    ROW(rq_request_set_retry_backoff, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_retry_backoff(frozen, 2, 10, 0));

    {
        const int fine[] = {400, 429, 599};
        const int low[] = {399}, high[] = {600}, negative[] = {-1}, huge[] = {INT_MAX}, zero[] = {0};
        ROW(rq_request_set_retry_statuses, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry_statuses(NULL, fine, 3));
        ROW(rq_request_set_retry_statuses, NULL, "statuses NULL, count 2", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry_statuses(r, NULL, 2));
        ROW(rq_request_set_retry_statuses, VALID, "statuses NULL, count 0 (none)", RQ_OK, rq_request_set_retry_statuses(r, NULL, 0));
        ROW(rq_request_set_retry_statuses, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_statuses(freed, fine, 3));
        ROW(rq_request_set_retry_statuses, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_statuses(heap_block, fine, 3));
        ROW(rq_request_set_retry_statuses, INVALID, "399", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_statuses(r, low, 1));
        ROW(rq_request_set_retry_statuses, INVALID, "600", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_statuses(r, high, 1));
        ROW(rq_request_set_retry_statuses, INVALID, "-1", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_statuses(r, negative, 1));
        ROW(rq_request_set_retry_statuses, INVALID, "0", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_statuses(r, zero, 1));
        ROW(rq_request_set_retry_statuses, INVALID, "INT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_set_retry_statuses(r, huge, 1));
        ROW(rq_request_set_retry_statuses, INVALID, "count SIZE_MAX (an array of 3)", RQ_ERR_INVALID_ARGUMENT,
            rq_request_set_retry_statuses(r, fine, SIZE_MAX));
        ROW(rq_request_set_retry_statuses, VALID, "400, 429, 599", RQ_OK, rq_request_set_retry_statuses(r, fine, 3));
        ROW(rq_request_set_retry_statuses, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_retry_statuses(frozen, fine, 3));
    }

    ROW(rq_request_set_retry_non_idempotent, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_retry_non_idempotent(NULL, 1));
    ROW(rq_request_set_retry_non_idempotent, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_non_idempotent(freed, 1));
    ROW(rq_request_set_retry_non_idempotent, FOREIGN, "0x10", RQ_ERR_INVALID_HANDLE, rq_request_set_retry_non_idempotent(foreign(1), 1));
    ROW(rq_request_set_retry_non_idempotent, VALID, "INT_MIN (true)", RQ_OK, rq_request_set_retry_non_idempotent(r, INT_MIN));
    ROW(rq_request_set_retry_non_idempotent, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_retry_non_idempotent(frozen, 1));

    ROW(rq_request_set_priority, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_priority(NULL, RQ_PRIORITY_HIGH));
    ROW(rq_request_set_priority, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_priority(freed, RQ_PRIORITY_HIGH));
    ROW(rq_request_set_priority, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_priority(as_request, RQ_PRIORITY_HIGH));
    ROW(rq_request_set_priority, INVALID, past_priority_text, RQ_ERR_INVALID_ARGUMENT, rq_request_set_priority(r, (rq_priority)(max_priority + 1)));
    ROW(rq_request_set_priority, INVALID, below_priority_text, RQ_ERR_INVALID_ARGUMENT, rq_request_set_priority(r, (rq_priority)(min_priority - 1)));
    ROW(rq_request_set_priority, INVALID, "INT_MAX", RQ_ERR_INVALID_ARGUMENT, rq_request_set_priority(r, (rq_priority)INT_MAX));
    ROW(rq_request_set_priority, INVALID, "INT_MIN", RQ_ERR_INVALID_ARGUMENT, rq_request_set_priority(r, (rq_priority)INT_MIN));
    ROW(rq_request_set_priority, VALID, "the lowest", RQ_OK, rq_request_set_priority(r, (rq_priority)min_priority));
    ROW(rq_request_set_priority, VALID, "the highest", RQ_OK, rq_request_set_priority(r, (rq_priority)max_priority));
    ROW(rq_request_get_priority, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_get_priority(NULL, &priority));
    ROW(rq_request_get_priority, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_request_get_priority(r, NULL));
    ROW(rq_request_get_priority, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_get_priority(freed, &priority));
    ROW(rq_request_get_priority, FOREIGN, "a stack address", RQ_ERR_INVALID_HANDLE, rq_request_get_priority(foreign(0), &priority));
    ROWV(rq_request_get_priority, VALID, "after the rejected values", "RQ_OK, the highest",
         rq_request_get_priority(r, &priority) == RQ_OK && (int)priority == max_priority);

    ROW(rq_request_set_tag, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_tag(NULL, "t"));
    ROW(rq_request_set_tag, VALID, "tag NULL (removes)", RQ_OK, rq_request_set_tag(r, NULL));
    ROW(rq_request_set_tag, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_tag(freed, "t"));
    ROW(rq_request_set_tag, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE, rq_request_set_tag(as_request, "t"));
    ROW(rq_request_set_tag, INVALID, "\"\"", RQ_OK, rq_request_set_tag(r, ""));
    ROW(rq_request_set_tag, INVALID, "1 MiB", RQ_OK, rq_request_set_tag(r, huge_string));
    ROW(rq_request_set_tag, INVALID, "CR LF", RQ_OK, rq_request_set_tag(r, "a\r\nb"));
    ROW(rq_request_set_tag, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_tag(frozen, "t"));

    ROW(rq_request_set_body_callback, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_body_callback(NULL, data_sink));
    ROW(rq_request_set_body_callback, VALID, "fn NULL (removes)", RQ_OK, rq_request_set_body_callback(r, NULL));
    ROW(rq_request_set_body_callback, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_body_callback(freed, data_sink));
    ROW(rq_request_set_body_callback, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_request_set_body_callback(heap_block, data_sink));
    ROW(rq_request_set_body_callback, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_body_callback(frozen, data_sink));

    ROW(rq_request_set_head_callback, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_head_callback(NULL, head_sink));
    ROW(rq_request_set_head_callback, VALID, "fn set", RQ_OK, rq_request_set_head_callback(r, head_sink));
    ROW(rq_request_set_head_callback, VALID, "fn NULL (removes)", RQ_OK, rq_request_set_head_callback(r, NULL));
    ROW(rq_request_set_head_callback, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_head_callback(freed, head_sink));
    ROW(rq_request_set_head_callback, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE, rq_request_set_head_callback(heap_block, head_sink));
    ROW(rq_request_set_head_callback, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_head_callback(frozen, head_sink));

    char path[512];
    snprintf(path, sizeof path, "%s/never-written.bin", tmpdir);
    ROW(rq_request_set_output_file, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT, rq_request_set_output_file(NULL, path, 0));
    ROW(rq_request_set_output_file, VALID, "path NULL (removes)", RQ_OK, rq_request_set_output_file(r, NULL, 0));
    ROW(rq_request_set_output_file, INVALID, "path \"\"", RQ_ERR_INVALID_ARGUMENT, rq_request_set_output_file(r, "", 0));
    ROW(rq_request_set_output_file, FREED, "a freed request", RQ_ERR_INVALID_HANDLE, rq_request_set_output_file(freed, path, 0));
    ROW(rq_request_set_output_file, FOREIGN, "UINTPTR_MAX", RQ_ERR_INVALID_HANDLE, rq_request_set_output_file(foreign(3), path, 0));
    ROW(rq_request_set_output_file, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN, rq_request_set_output_file(frozen, path, 0));
    ROW(rq_request_set_body_callback, VALID, "fn set (no output file yet)", RQ_OK, rq_request_set_body_callback(r, data_sink));
    ROW(rq_request_set_output_file, STATE, "a body callback is set", RQ_ERR_INVALID_STATE, rq_request_set_output_file(r, path, 0));
    ROW(rq_request_set_body_callback, VALID, "fn NULL again", RQ_OK, rq_request_set_body_callback(r, NULL));
    ROW(rq_request_set_output_file, VALID, "resume INT_MIN (true)", RQ_OK, rq_request_set_output_file(r, path, INT_MIN));
    ROW(rq_request_set_body_callback, STATE, "an output file is set", RQ_ERR_INVALID_STATE, rq_request_set_body_callback(r, data_sink));

    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_request_free(frozen));
    CHECK_OK(rq_queue_free(sq));
}

/* Transport settings, queue defaults, connection limits and cookies (issue 17). */
static void rows_transport(void) {
    rq_request *r = new_request(), *freed = new_request(), *frozen = new_request(), *defaults = NULL;
    rq_queue *q, *fq, *sq;
    char *text = NULL, path[512];
    size_t total = 0, per_host = 0;
    CHECK_OK(rq_request_free(freed));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &fq));
    CHECK_OK(rq_queue_free(fq));
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &sq));
    CHECK_OK(rq_queue_suspend(sq));
    CHECK_OK(rq_add(sq, frozen));
    rq_request *as_request = (rq_request *)(void *)sq;
    rq_queue *as_queue = (rq_queue *)(void *)r;
    snprintf(path, sizeof path, "%s/cookies-matrix.txt", tmpdir);

    /* rq_request_set_option_string */
    ROW(rq_request_set_option_string, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT,
        rq_request_set_option_string(NULL, RQ_OPTION_USER_AGENT, "a"));
    ROW(rq_request_set_option_string, FREED, "a freed request", RQ_ERR_INVALID_HANDLE,
        rq_request_set_option_string(freed, RQ_OPTION_USER_AGENT, "a"));
    ROW(rq_request_set_option_string, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE,
        rq_request_set_option_string(as_request, RQ_OPTION_USER_AGENT, "a"));
    ROW(rq_request_set_option_string, FOREIGN, "a heap block", RQ_ERR_INVALID_HANDLE,
        rq_request_set_option_string(heap_block, RQ_OPTION_USER_AGENT, "a"));
    ROW(rq_request_set_option_string, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN,
        rq_request_set_option_string(frozen, RQ_OPTION_PROXY, ""));
    ROW(rq_request_set_option_string, INVALID, "option 0", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, (rq_option)0, "a"));
    ROW(rq_request_set_option_string, INVALID, "option 999", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, (rq_option)999, "a"));
    ROW(rq_request_set_option_string, INVALID, "an integer option (DECODE_CONTENT)", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_DECODE_CONTENT, "1"));
    ROW(rq_request_set_option_string, INVALID, "User-Agent with CR LF", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_USER_AGENT, "a\r\nX-Injected: 1"));
    ROW(rq_request_set_option_string, INVALID, "User-Agent of 1 MiB", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_USER_AGENT, huge_string));
    ROW(rq_request_set_option_string, VALID, "User-Agent \"\" (none sent)", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_USER_AGENT, ""));
    ROW(rq_request_set_option_string, VALID, "User-Agent NULL (unset)", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_USER_AGENT, NULL));
    ROW(rq_request_set_option_string, INVALID, "proxy ftp://h", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "ftp://h:21"));
    ROW(rq_request_set_option_string, INVALID, "proxy without scheme", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "127.0.0.1:3128"));
    ROW(rq_request_set_option_string, INVALID, "proxy with a space", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "http://a b:1"));
    ROW(rq_request_set_option_string, INVALID, "proxy port 70000", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "http://h:70000"));
    ROW(rq_request_set_option_string, INVALID, "proxy with a path", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "http://h:1/x"));
    ROW(rq_request_set_option_string, INVALID, "proxy with no host", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "socks5://user:pw@:1080"));
    ROW(rq_request_set_option_string, VALID, "proxy socks5h://u:p@[::1]:1080", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, "socks5h://u:p@[::1]:1080"));
    ROW(rq_request_set_option_string, VALID, "proxy \"\" (none, not even the environment's)", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_PROXY, ""));
    ROW(rq_request_set_option_string, INVALID, "proxy CA file \"\"", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PROXY_CA_FILE, ""));
    ROW(rq_request_set_option_string, VALID, "proxy CA file /tmp/ca.pem (read when the request runs)", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_PROXY_CA_FILE, "/tmp/ca.pem"));
    ROW(rq_request_set_option_string, INVALID, "no-proxy with a tab", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_NO_PROXY, "a\tb"));
    ROW(rq_request_set_option_string, VALID, "no-proxy \"a, b\"", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_NO_PROXY, "a, b"));
    ROW(rq_request_set_option_string, INVALID, "client certificate path \"\"", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_CLIENT_CERT, ""));
    ROW(rq_request_set_option_string, INVALID, "client key path of 1 MiB", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_CLIENT_KEY, huge_string));
    ROW(rq_request_set_option_string, VALID, "key password \"\"", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_KEY_PASSWORD, ""));
    ROW(rq_request_set_option_string, INVALID, "pinned key \"\"", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_PINNED_PUBLIC_KEY, ""));
    ROW(rq_request_set_option_string, INVALID, "CA directory \"\"", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_CA_DIRECTORY, ""));
    ROW(rq_request_set_option_string, INVALID, "Unix socket path of 108 bytes", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_UNIX_SOCKET, huge_string + (1 << 20) - 108));
    ROW(rq_request_set_option_string, VALID, "Unix socket path of 107 bytes", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_UNIX_SOCKET, huge_string + (1 << 20) - 107));
    ROW(rq_request_set_option_string, INVALID, "resolve \"host:80\" (no address)", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_RESOLVE, "host:80"));
    ROW(rq_request_set_option_string, INVALID, "resolve port 0", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_RESOLVE, "host:0:127.0.0.1"));
    ROW(rq_request_set_option_string, INVALID, "resolve \"-host:80\" (curl's removal form)", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_RESOLVE, "-host:80:127.0.0.1"));
    ROW(rq_request_set_option_string, INVALID, "resolve address \"localhost\"", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_RESOLVE, "host:80:localhost"));
    ROW(rq_request_set_option_string, VALID, "resolve host:443:127.0.0.1,[::1]", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_RESOLVE, "host:443:127.0.0.1,[::1]"));
    ROW(rq_request_set_option_string, VALID, "resolve NULL (removes all)", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_RESOLVE, NULL));
    ROW(rq_request_set_option_string, INVALID, "interface with a space", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_string(r, RQ_OPTION_INTERFACE, "eth 0"));
    ROW(rq_request_set_option_string, VALID, "interface if!lo", RQ_OK,
        rq_request_set_option_string(r, RQ_OPTION_INTERFACE, "if!lo"));

    /* rq_request_set_option_int */
    ROW(rq_request_set_option_int, NULL, "request NULL", RQ_ERR_NULL_ARGUMENT,
        rq_request_set_option_int(NULL, RQ_OPTION_DECODE_CONTENT, 0));
    ROW(rq_request_set_option_int, FREED, "a freed request", RQ_ERR_INVALID_HANDLE,
        rq_request_set_option_int(freed, RQ_OPTION_DECODE_CONTENT, 0));
    ROW(rq_request_set_option_int, FOREIGN, "a queue handle", RQ_ERR_INVALID_HANDLE,
        rq_request_set_option_int(as_request, RQ_OPTION_DECODE_CONTENT, 0));
    ROW(rq_request_set_option_int, STATE, "a frozen request", RQ_ERR_REQUEST_FROZEN,
        rq_request_set_option_int(frozen, RQ_OPTION_DECODE_CONTENT, 0));
    ROW(rq_request_set_option_int, INVALID, "option -1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, (rq_option)-1, 0));
    ROW(rq_request_set_option_int, INVALID, "a string option (PROXY)", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_PROXY, 0));
    ROW(rq_request_set_option_int, VALID, "DECODE_CONTENT INT64_MIN (true)", RQ_OK,
        rq_request_set_option_int(r, RQ_OPTION_DECODE_CONTENT, INT64_MIN));
    ROW(rq_request_set_option_int, INVALID, "TLS minimum 14", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_TLS_MIN_VERSION, 14));
    ROW(rq_request_set_option_int, INVALID, "TLS minimum 9", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_TLS_MIN_VERSION, 9));
    ROW(rq_request_set_option_int, VALID, "TLS minimum RQ_TLS_1_3", RQ_OK,
        rq_request_set_option_int(r, RQ_OPTION_TLS_MIN_VERSION, RQ_TLS_1_3));
    ROW(rq_request_set_option_int, INVALID, "IP version 5", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_IP_VERSION, 5));
    ROW(rq_request_set_option_int, INVALID, "IP version INT64_MAX", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_IP_VERSION, INT64_MAX));
    ROW(rq_request_set_option_int, INVALID, "HTTP version 2 (not 20)", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_HTTP_VERSION, 2));
    ROW(rq_request_set_option_int, VALID, "HTTP version RQ_HTTP_VERSION_2_PRIOR_KNOWLEDGE", RQ_OK,
        rq_request_set_option_int(r, RQ_OPTION_HTTP_VERSION, RQ_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
    ROW(rq_request_set_option_int, INVALID, "keep-alive -1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_TCP_KEEPALIVE, -1));
    ROW(rq_request_set_option_int, INVALID, "keep-alive 86401", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_TCP_KEEPALIVE, 86401));
    ROW(rq_request_set_option_int, INVALID, "receive speed -1", RQ_ERR_INVALID_ARGUMENT,
        rq_request_set_option_int(r, RQ_OPTION_MAX_RECV_SPEED, -1));
    ROW(rq_request_set_option_int, VALID, "send speed INT64_MAX", RQ_OK,
        rq_request_set_option_int(r, RQ_OPTION_MAX_SEND_SPEED, INT64_MAX));
    ROW(rq_request_set_option_int, VALID, "UNSAFE_NO_TLS_VERIFY 0", RQ_OK,
        rq_request_set_option_int(r, RQ_OPTION_UNSAFE_NO_TLS_VERIFY, 0));

    /* rq_queue_get_defaults */
    ROW(rq_queue_get_defaults, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_defaults(NULL, &defaults));
    ROW(rq_queue_get_defaults, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_defaults(q, NULL));
    ROW(rq_queue_get_defaults, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_defaults(fq, &defaults));
    ROW(rq_queue_get_defaults, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_get_defaults(as_queue, &defaults));
    ROW(rq_queue_get_defaults, VALID, "a queue", RQ_OK, rq_queue_get_defaults(q, &defaults));
    ROW(rq_add, STATE, "a queue's defaults request", RQ_ERR_INVALID_STATE, rq_add(q, defaults));
    ROW(rq_request_free, STATE, "a queue's defaults request", RQ_ERR_INVALID_STATE, rq_request_free(defaults));
    ROW(rq_request_start, STATE, "a queue's defaults request", RQ_ERR_INVALID_STATE, rq_request_start(defaults));
    ROW(rq_request_set_option_int, VALID, "a queue's defaults request", RQ_OK,
        rq_request_set_option_int(defaults, RQ_OPTION_COOKIES, 1));

    /* rq_queue_set_max_connections / rq_queue_get_max_connections */
    ROW(rq_queue_set_max_connections, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_set_max_connections(NULL, 1, 1));
    ROW(rq_queue_set_max_connections, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_set_max_connections(fq, 1, 1));
    ROW(rq_queue_set_max_connections, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE,
        rq_queue_set_max_connections(as_queue, 1, 1));
    ROW(rq_queue_set_max_connections, INVALID, "total SIZE_MAX", RQ_ERR_INVALID_ARGUMENT,
        rq_queue_set_max_connections(q, SIZE_MAX, 0));
    ROW(rq_queue_set_max_connections, INVALID, "per host 100001", RQ_ERR_INVALID_ARGUMENT,
        rq_queue_set_max_connections(q, 0, 100001));
    ROW(rq_queue_set_max_connections, VALID, "100000, 100000", RQ_OK, rq_queue_set_max_connections(q, 100000, 100000));
    ROW(rq_queue_get_max_connections, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_connections(NULL, &total, &per_host));
    ROW(rq_queue_get_max_connections, NULL, "out_total NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_connections(q, NULL, &per_host));
    ROW(rq_queue_get_max_connections, NULL, "out_per_host NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_get_max_connections(q, &total, NULL));
    ROW(rq_queue_get_max_connections, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_get_max_connections(fq, &total, &per_host));
    ROWV(rq_queue_get_max_connections, VALID, "after 100000, 100000", "RQ_OK, 100000, 100000",
         rq_queue_get_max_connections(q, &total, &per_host) == RQ_OK && total == 100000 && per_host == 100000);

    /* rq_response_http_version (a live response: see response_rows) */
    ROWV(rq_response_http_version, NULL, "response NULL", "0", rq_response_http_version(NULL) == 0);

    /* Cookies */
    ROW(rq_queue_cookies_list, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_list(NULL, &text));
    ROW(rq_queue_cookies_list, NULL, "out NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_list(q, NULL));
    ROW(rq_queue_cookies_list, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_cookies_list(fq, &text));
    ROW(rq_queue_cookies_list, FOREIGN, "UINTPTR_MAX", RQ_ERR_INVALID_HANDLE, rq_queue_cookies_list(foreign(3), &text));
    ROWV(rq_queue_cookies_list, VALID, "an empty jar", "RQ_OK, \"\"",
         rq_queue_cookies_list(q, &text) == RQ_OK && text != NULL && text[0] == '\0');
    ROWV(rq_string_free, NULL, "NULL", "returns", (rq_string_free(NULL), 1));
    ROWV(rq_string_free, VALID, "a cookie list", "returns", (rq_string_free(text), 1));
    ROW(rq_queue_cookies_clear, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_clear(NULL));
    ROW(rq_queue_cookies_clear, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_cookies_clear(fq));
    ROW(rq_queue_cookies_clear, FOREIGN, "a request handle", RQ_ERR_INVALID_HANDLE, rq_queue_cookies_clear(as_queue));
    ROW(rq_queue_cookies_clear, VALID, "an empty jar", RQ_OK, rq_queue_cookies_clear(q));
    ROW(rq_queue_cookies_save, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_save(NULL, path));
    ROW(rq_queue_cookies_save, NULL, "path NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_save(q, NULL));
    ROW(rq_queue_cookies_save, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_cookies_save(fq, path));
    ROW(rq_queue_cookies_save, INVALID, "path \"\"", RQ_ERR_SYSTEM, rq_queue_cookies_save(q, ""));
    ROW(rq_queue_cookies_save, INVALID, "a folder that does not exist", RQ_ERR_SYSTEM,
        rq_queue_cookies_save(q, "/nonexistent/dir/cookies.txt"));
    ROW(rq_queue_cookies_save, VALID, "a file in the temporary folder", RQ_OK, rq_queue_cookies_save(q, path));
    ROW(rq_queue_cookies_load, NULL, "queue NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_load(NULL, path));
    ROW(rq_queue_cookies_load, NULL, "path NULL", RQ_ERR_NULL_ARGUMENT, rq_queue_cookies_load(q, NULL));
    ROW(rq_queue_cookies_load, FREED, "a freed queue", RQ_ERR_INVALID_HANDLE, rq_queue_cookies_load(fq, path));
    ROW(rq_queue_cookies_load, INVALID, "a file that does not exist", RQ_ERR_SYSTEM,
        rq_queue_cookies_load(q, "/nonexistent/cookies.txt"));
    ROW(rq_queue_cookies_load, VALID, "the file just saved", RQ_OK, rq_queue_cookies_load(q, path));

    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_request_free(frozen));
    CHECK_OK(rq_queue_free(sq));
    CHECK_OK(rq_queue_free(q));
}

/* An output file's path is used as given: a non-UTF-8 file name gets that very name (or is
 * refused), never another one. */
static void rows_output_file_bytes(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/out-\xe4\xff.bin", tmpdir);
    unlink(path);
    struct rel_result res;
    rq_queue *q;
    rq_request *r;
    char *url = rqt_url(base, "/bytes?n=100");
    memset(&res, 0, sizeof res);
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_completion(r, rel_result_done, &res, NULL));
    int rc = rq_request_set_output_file(r, path, 0);
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
    int written = access(path, F_OK) == 0;
    add_row("rq_request_set_output_file", "rq_request_set_output_file", K_INVALID, "a non-UTF-8 file name \"out-\\xe4\\xff.bin\"",
            "refused, or RQ_OK and that very file written",
            rc != RQ_OK ? result_name(rc) : written ? "RQ_OK, that file written" : "RQ_OK, but that file was not written",
            rc != RQ_OK || (written && res.outcome == RQ_OUTCOME_OK), __LINE__);
    if (rc == RQ_OK && !written)
        fprintf(stderr, "bad_input_matrix: output file: outcome %s, \"%s\"\n", rq_outcome_str((int)res.outcome), res.message);
    unlink(path);
    free(res.body);
    free(url);
}

static void rows_responses_and_challenges(void) {
    /* NULL responses: neutral values. */
    size_t size = 77;
    const char *name = "x", *value = "x";
    ROWV(rq_response_outcome, NULL, "response NULL", "RQ_OUTCOME_TRANSPORT", rq_response_outcome(NULL) == RQ_OUTCOME_TRANSPORT);
    ROWV(rq_response_status, NULL, "response NULL", "0", rq_response_status(NULL) == 0);
    ROWV(rq_response_body, NULL, "response NULL", "NULL, size 0", rq_response_body(NULL, &size) == NULL && size == 0);
    ROWV(rq_response_body, NULL, "response NULL, out_size NULL", "NULL", rq_response_body(NULL, NULL) == NULL);
    ROWV(rq_response_header_count, NULL, "response NULL", "0", rq_response_header_count(NULL) == 0);
    ROW(rq_response_header_at, NULL, "response NULL", RQ_ERR_NULL_ARGUMENT, rq_response_header_at(NULL, 0, &name, &value));
    ROWV(rq_response_header, NULL, "response NULL", "NULL", rq_response_header(NULL, "Content-Type") == NULL);
    ROWV(rq_response_header, NULL, "response and name NULL", "NULL", rq_response_header(NULL, NULL) == NULL);
    ROWV(rq_response_url, NULL, "response NULL", "NULL", rq_response_url(NULL) == NULL);
    ROWV(rq_response_retain, NULL, "response NULL", "NULL", rq_response_retain(NULL) == NULL);
    ROWV(rq_response_release, NULL, "response NULL", "no-op", (rq_response_release(NULL), 1));
    ROWV(rq_response_error_message, NULL, "response NULL", "NULL", rq_response_error_message(NULL) == NULL);
    ROWV(rq_response_attempts, NULL, "response NULL", "0", rq_response_attempts(NULL) == 0);
    rq_metrics metrics;
    metrics.size = sizeof metrics;
    ROW(rq_response_metrics, NULL, "response NULL", RQ_ERR_NULL_ARGUMENT, rq_response_metrics(NULL, &metrics));

    /* A real response, in each delivery mode (rows recorded inside the completion). */
    for (int mode = 0; mode < 3; mode++) {
        struct cb_context c = {NULL, mode, 0};
        rq_request *r;
        char *url = rqt_url(base, "/bytes?n=16");
        CHECK_OK(rq_queue_new((rq_delivery)mode, &c.queue));
        CHECK_OK(rq_request_new(url, &r));
        CHECK_OK(rq_request_set_completion(r, response_rows, &c, NULL));
        CHECK_OK(rq_add(c.queue, r));
        CHECK_OK(rq_request_free(r));
        CHECK_OK(rq_queue_wait_idle(c.queue, WATCHDOG_SECONDS));
        CHECK(atomic_load(&c.done) == 1, "the response rows ran %d times", atomic_load(&c.done));
        CHECK_OK(rq_queue_free(c.queue));
        free(url);
    }

    /* The header count of a failed request's response (no response received). */
    /* Challenges: NULL, foreign and answered ones. */
    ROW(rq_auth_use_credential, NULL, "challenge NULL", RQ_ERR_NULL_ARGUMENT, rq_auth_use_credential(NULL, "u", "p"));
    ROW(rq_auth_continue_without, NULL, "challenge NULL", RQ_ERR_NULL_ARGUMENT, rq_auth_continue_without(NULL));
    ROW(rq_auth_cancel, NULL, "challenge NULL", RQ_ERR_NULL_ARGUMENT, rq_auth_cancel(NULL));
    for (int i = 0; i < N_FOREIGN; i++) {
        ROW(rq_auth_use_credential, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_auth_use_credential(foreign(i), "u", "p"));
        ROW(rq_auth_continue_without, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_auth_continue_without(foreign(i)));
        ROW(rq_auth_cancel, FOREIGN, foreign_names[i], RQ_ERR_INVALID_HANDLE, rq_auth_cancel(foreign(i)));
    }
    struct auth_context a;
    memset(&a, 0, sizeof a);
    rq_queue *q;
    rq_request *r;
    char *url = rqt_url(base, "/basic-auth/user/secret");
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_completion(r, auth_done, &a, NULL));
    CHECK_OK(rq_request_set_auth_handler(r, auth_rows));
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
    CHECK(a.calls == 2, "the auth handler ran %d times, expected 2", a.calls);
    CHECK(a.final_status == 401 && a.final_outcome == RQ_OUTCOME_HTTP_STATUS, "after continue_without: %d %s",
          a.final_status, rq_outcome_str((int)a.final_outcome));
    ROW(rq_auth_cancel, FREED, "a challenge of a request that completed", RQ_ERR_INVALID_HANDLE, rq_auth_cancel(a.first));
    free(url);
}

/* Credentials are copied and sent as given: non-UTF-8 bytes must be sent byte for byte, or the call
 * must refuse them; never silently changed. */
static void rows_credential_bytes(void) {
    struct rel_result res;
    rq_queue *q;
    rq_request *r;
    char *url = rqt_url(base, "/headers");
    memset(&res, 0, sizeof res);
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_completion(r, rel_result_done, &res, NULL));
    int rc = rq_request_set_credentials(r, "us\xe4r", "p\xe4ss");
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
    /* base64("us\xe4r:p\xe4ss") */
    int sent_exactly = res.body && strstr(res.body, "\"Basic dXPkcjpw5HNz\"") != NULL;
    add_row("rq_request_set_credentials", "rq_request_set_credentials", K_INVALID,
            "non-UTF-8 (Latin-1) user and password \"us\\xe4r\" / \"p\\xe4ss\"",
            "refused, or RQ_OK and sent byte for byte",
            rc != RQ_OK ? result_name(rc) : sent_exactly ? "RQ_OK, sent byte for byte" : "RQ_OK, but the bytes sent differ",
            rc != RQ_OK || sent_exactly, __LINE__);
    if (rc == RQ_OK && !sent_exactly)
        fprintf(stderr, "bad_input_matrix: the server received %s\n", res.body ? res.body : "(nothing)");
    free(res.body);
    free(url);
}

/* ---- the header's functions ------------------------------------------------------------------ */

struct decl {
    char name[64];
    int takes_pointer;
    int takes_arguments;
};

static char header_text[1 << 20];

/* Reads the header, comments and preprocessor lines blanked out. */
static void load_header(const char *path) {
    char *text = header_text;
    FILE *f = fopen(path, "r");
    if (!f)
        FAIL("cannot open the header %s: %s", path, strerror(errno));
    size_t len = fread(text, 1, sizeof header_text - 1, f);
    fclose(f);
    text[len] = '\0';
    /* Blank out comments and preprocessor lines. */
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '/' && text[i + 1] == '*') {
            char *end = strstr(text + i + 2, "*/");
            size_t stop = end ? (size_t)(end - text) + 2 : len;
            for (; i < stop; i++)
                if (text[i] != '\n')
                    text[i] = ' ';
            i--;
        } else if (text[i] == '/' && text[i + 1] == '/') {
            for (; i < len && text[i] != '\n'; i++)
                text[i] = ' ';
        } else if (text[i] == '#' && (i == 0 || text[i - 1] == '\n')) {
            for (; i < len && text[i] != '\n'; i++) {
                if (text[i] == '\\' && text[i + 1] == '\n')
                    text[i + 1] = ' ';
                text[i] = ' ';
            }
        }
    }
}

/* The largest (or smallest) value given to an enumerator named PREFIX... in the header. */
static int header_enum(const char *prefix, int want_max) {
    int found = 0, best = 0;
    size_t k = strlen(prefix);
    for (const char *p = strstr(header_text, prefix); p; p = strstr(p + 1, prefix)) {
        const char *q = p + k;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        while (*q == ' ')
            q++;
        if (*q != '=')
            continue;
        int v = (int)strtol(q + 1, NULL, 10);
        if (!found || (want_max ? v > best : v < best))
            best = v;
        found = 1;
    }
    if (!found)
        FAIL("no enumerator %s... in the header", prefix);
    return best;
}

/* Every `RQ_API ... rq_name(params);` of the header. */
static int read_decls(struct decl *decls, int max) {
    char *text = header_text;
    int n = 0;
    for (char *p = strstr(text, "RQ_API"); p; p = strstr(p + 6, "RQ_API")) {
        char *open = strchr(p, '('), *semi = strchr(p, ';');
        if (!open || !semi || open > semi)
            FAIL("cannot read the declaration at \"%.60s\"", p);
        char *end = open;
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        char *start = end;
        while (start > p && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
            start--;
        if (n == max)
            FAIL("too many declarations");
        snprintf(decls[n].name, sizeof decls[n].name, "%.*s", (int)(end - start), start);
        char *close = strchr(open, ')');
        char params[512];
        snprintf(params, sizeof params, "%.*s", (int)(close - open - 1), open + 1);
        char trimmed[512];
        size_t k = 0;
        for (char *c = params; *c; c++)
            if (!isspace((unsigned char)*c))
                trimmed[k++] = *c;
        trimmed[k] = '\0';
        decls[n].takes_arguments = strcmp(trimmed, "void") != 0 && trimmed[0] != '\0';
        decls[n].takes_pointer = strchr(params, '*') != NULL;
        n++;
    }
    return n;
}

/* Functions whose only argument is a pointer the library cannot check, so that NULL is the only
 * invalid input with a defined result: responses are borrowed and unchecked (the header says so),
 * and rq_snapshot_free frees what rq_queue_snapshot allocated, rq_string_free what
 * rq_queue_cookies_list did (any other pointer is undefined, as for free()). */
static int only_null_defined(const char *name) {
    static const char *const names[] = {"rq_snapshot_free", "rq_response_outcome", "rq_response_status",
                                        "rq_response_body", "rq_response_header_count", "rq_response_url",
                                        "rq_response_error_message", "rq_response_attempts",
                                        "rq_response_retain", "rq_response_release", "rq_response_http_version",
                                        "rq_string_free"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

static void write_markdown(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        FAIL("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "| # | function | kind | input | expected | got |\n|---:|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        fprintf(f, "| %d | `%s` | %s | ", i + 1, rows[i].function, kind_names[rows[i].kind]);
        for (const char *c = rows[i].input; *c; c++) /* keep the table's cells intact */
            fputs(*c == '|' ? "\\|" : (char[]){*c, 0}, f);
        fprintf(f, " | %s | %s%s |\n", rows[i].expected, rows[i].got, rows[i].pass ? "" : " **FAIL**");
    }
    fclose(f);
}

int main(int argc, char **argv) {
    const char *header = NULL;
    const char *markdown = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--header") == 0 && i + 1 < argc)
            header = argv[++i];
        else if (strcmp(argv[i], "--tmp") == 0 && i + 1 < argc)
            tmpdir = argv[++i];
        else if (strcmp(argv[i], "--markdown") == 0 && i + 1 < argc)
            markdown = argv[++i];
        else
            base = argv[i];
    }
    if (!header || !base || !tmpdir) {
        fprintf(stderr, "usage: %s --header include/requestqueue.h --tmp DIR [--markdown FILE] BASE_URL\n", argv[0]);
        return 2;
    }
    huge_url = rqt_repeat('a', 65537 - strlen("http://127.0.0.1/"), "http://127.0.0.1/");
    max_url = rqt_repeat('a', 65536 - strlen("http://127.0.0.1/"), "http://127.0.0.1/");
    huge_method = rqt_repeat('M', 65, "");
    max_method = rqt_repeat('M', 64, "");
    huge_name = rqt_repeat('n', 257, "");
    max_name = rqt_repeat('n', 256, "");
    huge_value = rqt_repeat('v', 65537, "");
    max_value = rqt_repeat('v', 65536, "");
    huge_string = rqt_repeat('a', 1 << 20, "");
    heap_block = calloc(1, 256);
    CHECK(heap_block != NULL, "out of memory");
    load_header(header);
    last_result = header_enum("RQ_ERR_", 1);
    last_outcome = header_enum("RQ_OUTCOME_", 1);
    last_duplicates = header_enum("RQ_DUPLICATES_", 1);
    min_priority = header_enum("RQ_PRIORITY_", 0);
    max_priority = header_enum("RQ_PRIORITY_", 1);
    snprintf(past_result_text, sizeof past_result_text, "%d (one past the last)", last_result + 1);
    snprintf(past_outcome_text, sizeof past_outcome_text, "%d (one past the last)", last_outcome + 1);
    snprintf(past_duplicates_text, sizeof past_duplicates_text, "%d (one past the last)", last_duplicates + 1);
    snprintf(past_priority_text, sizeof past_priority_text, "%d (one above the highest)", max_priority + 1);
    snprintf(below_priority_text, sizeof below_priority_text, "%d (one below the lowest)", min_priority - 1);

    rows_names_and_version();
    rows_queues();
    rows_request_new();
    rows_requests();
    rows_scheduler();
    rows_request_extras();
    rows_responses_and_challenges();
    rows_credential_bytes();
    rows_output_file_bytes();
    rows_transport();

    /* Every function of the header has its rows. */
    static struct decl decls[256];
    int ndecls = read_decls(decls, 256), missing = 0;
    for (int d = 0; d < ndecls; d++) {
        int any = 0, null_rows = 0, bad_rows = 0;
        for (int i = 0; i < nrows; i++) {
            if (strcmp(rows[i].function, decls[d].name) != 0)
                continue;
            any++;
            null_rows += rows[i].kind == K_NULL;
            bad_rows += rows[i].kind == K_INVALID || rows[i].kind == K_FREED || rows[i].kind == K_FOREIGN || rows[i].kind == K_STATE;
        }
        const char *why = !any                                 ? "no row at all"
                          : decls[d].takes_pointer && !null_rows ? "takes a pointer but has no NULL row"
                          : decls[d].takes_arguments && !bad_rows && !only_null_defined(decls[d].name)
                              ? "takes arguments but has no INVALID/FREED/FOREIGN/STATE row"
                              : NULL;
        if (why) {
            fprintf(stderr, "bad_input_matrix: %s: %s\n", decls[d].name, why);
            missing++;
        }
    }
    /* ... and every row is about a function of the header. */
    for (int i = 0; i < nrows; i++) {
        int known = 0;
        for (int d = 0; d < ndecls && !known; d++)
            known = strcmp(rows[i].function, decls[d].name) == 0;
        if (!known) {
            fprintf(stderr, "bad_input_matrix: row at line %d is about %s, which the header does not declare\n",
                    rows[i].line, rows[i].function);
            missing++;
        }
    }

    if (markdown)
        write_markdown(markdown);
    int failed = 0, per_kind[K_KINDS] = {0};
    for (int i = 0; i < nrows; i++) {
        per_kind[rows[i].kind]++;
        if (!rows[i].pass) {
            failed++;
            fprintf(stderr, "bad_input_matrix: FAIL line %d: %s with %s (%s): expected %s, got %s\n", rows[i].line,
                    rows[i].function, rows[i].input, kind_names[rows[i].kind], rows[i].expected, rows[i].got);
        }
    }
    printf("bad_input_matrix: rows=%d functions=%d (of %d in the header) NULL=%d INVALID=%d FREED=%d FOREIGN=%d STATE=%d "
           "VALID=%d failed=%d uncovered=%d\n",
           nrows, ndecls - missing, ndecls, per_kind[K_NULL], per_kind[K_INVALID], per_kind[K_FREED],
           per_kind[K_FOREIGN], per_kind[K_STATE], per_kind[K_VALID], failed, missing);
    free(huge_url);
    free(max_url);
    free(huge_method);
    free(max_method);
    free(huge_name);
    free(max_name);
    free(huge_value);
    free(max_value);
    free(huge_string);
    free(heap_block);
    return failed || missing ? 1 : 0;
}
