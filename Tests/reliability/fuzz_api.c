/*
 * fuzz_api.c: a libFuzzer target over everything of the C API that parses caller input.
 *
 * The input is split at NUL bytes into strings (a C caller cannot pass a NUL inside a string):
 *   [0] URL                   rq_request_new
 *   [1] method                rq_request_set_method
 *   [2] header name           rq_request_set_header (also as a value, and removed again)
 *   [3] header value
 *   [4] body (its bytes)      rq_request_set_body
 *   [5] user  [6] password    rq_request_set_credentials
 *   [7] tag                   rq_request_set_tag, rq_queue_count_tag, rq_queue_snapshot_tag
 *   [8] numbers               8 bytes at a time, as doubles (timeouts, delays, backoff) and as
 *                             integers (redirects, attempts, priority, retry outcomes and statuses,
 *                             duplicates mode), then the header timeout and low-speed limit
 * A valid request is added to a suspended queue (duplicates mode from the input, so that equality
 * and coalescing compare the fuzzed headers and bodies), counted and listed by tag, then cancelled;
 * every completion is delivered before the input ends.
 *
 * Oracles besides the sanitizers: every call returns a code of the header, never writes its
 * out-parameter on failure, and accepts only what the header allows (an accepted URL is http(s),
 * printable ASCII, at most 65536 bytes; an accepted method is a token of 1 to 64 bytes; an
 * accepted header has a token name of at most 256 bytes and a value without CR/LF of at most
 * 65536 bytes; a rejected time is negative, NaN, infinite or above 1e6). Exactly one completion
 * per added request.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined against a library built with
 * --sanitize=address (and, in scripts/test-reliability, -sanitize-coverage=edge,trace-cmp so that
 * the Swift validation code is covered too). Seed corpus: Tests/reliability/corpus/.
 */
#include <requestqueue.h>

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_FIELDS 9

static rq_queue *queue;
static atomic_int completions;

static void die(const char *what, int line) {
    fprintf(stderr, "fuzz_api.c:%d: oracle failed: %s\n", line, what);
    abort();
}
#define ORACLE(cond) ((cond) ? (void)0 : die(#cond, __LINE__))

static int is_result(int rc) { return rc >= RQ_OK && rc <= RQ_ERR_SYSTEM; }

static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int is_token(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return 0;
    return 1;
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    (void)context, (void)request;
    ORACLE(rq_response_outcome(response) == RQ_OUTCOME_CANCELLED);
    atomic_fetch_add(&completions, 1);
}

/* The queue is freed at exit, before LeakSanitizer's own exit check: a live queue holds a Swift
 * weak-reference side table that LeakSanitizer cannot see a pointer to (the runtime keeps it
 * encoded in the object's reference count), and would report as leaked. */
static void free_queue(void) {
    if (rq_queue_free(queue) != RQ_OK)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    rq_request *r;
    if (rq_queue_new(RQ_DELIVERY_THREADED, &queue) != RQ_OK || rq_queue_suspend(queue) != RQ_OK)
        abort();
    atexit(free_queue);
    /* One request through the queue first, so that the one-time allocations (that side table among
     * them) are not counted against the first input that reaches rq_add. */
    if (rq_request_new("http://127.0.0.1/", &r) != RQ_OK || rq_add(queue, r) != RQ_OK || rq_queue_cancel_all(queue) != RQ_OK ||
        rq_queue_wait_idle(queue, -1) != RQ_OK || rq_request_free(r) != RQ_OK)
        abort();
    return 0;
}

/* The next 8 bytes of the numbers field (zeros past its end). */
static uint64_t next_u64(const uint8_t *numbers, size_t size, size_t *at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++, (*at)++)
        v |= (uint64_t)(*at < size ? numbers[*at] : 0) << (8 * i);
    return v;
}

static double next_double(const uint8_t *numbers, size_t size, size_t *at) {
    uint64_t bits = next_u64(numbers, size, at);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static int valid_seconds(double s) { return isfinite(s) && s >= 0 && s <= 1e6; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Split at NUL bytes into at most MAX_FIELDS strings (the last one keeps the rest). */
    char *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    const char *field[MAX_FIELDS];
    size_t length[MAX_FIELDS];
    size_t n = 0, start = 0;
    for (size_t i = 0; i <= size && n < MAX_FIELDS; i++) {
        if (i == size || (copy[i] == '\0' && n < MAX_FIELDS - 1)) {
            field[n] = copy + start;
            length[n] = i - start;
            n++;
            start = i + 1;
        }
    }
    for (; n < MAX_FIELDS; n++) {
        field[n] = "";
        length[n] = 0;
    }
    const uint8_t *numbers = (const uint8_t *)field[8];
    size_t numbers_size = length[8], at = 0;

    rq_request *sentinel = (rq_request *)(uintptr_t)0x5a5a, *r = sentinel;
    int rc = rq_request_new(field[0], &r);
    ORACLE(is_result(rc));
    if (rc != RQ_OK) {
        ORACLE(r == sentinel);
        free(copy);
        return 0;
    }
    /* An accepted URL is what the header allows. */
    size_t url_length = strlen(field[0]);
    ORACLE(url_length <= 65536);
    for (size_t i = 0; i < url_length; i++)
        ORACLE((unsigned char)field[0][i] > 0x20 && (unsigned char)field[0][i] < 0x7f);
    ORACLE(strncasecmp(field[0], "http://", 7) == 0 || strncasecmp(field[0], "https://", 8) == 0);

    rc = rq_request_set_method(r, field[1]);
    ORACLE(rc == RQ_OK || rc == RQ_ERR_INVALID_METHOD);
    ORACLE((rc == RQ_OK) == is_token(field[1], 64));

    rc = rq_request_set_header(r, field[2], field[3]);
    ORACLE(rc == RQ_OK || rc == RQ_ERR_INVALID_HEADER);
    int value_ok = strlen(field[3]) <= 65536 && !strchr(field[3], '\r') && !strchr(field[3], '\n');
    ORACLE((rc == RQ_OK) == (is_token(field[2], 256) && value_ok));
    rc = rq_request_set_header(r, field[3], field[2]); /* the other way round */
    ORACLE(rc == RQ_OK || rc == RQ_ERR_INVALID_HEADER);
    if (numbers_size > 0 && numbers[0] & 1) {
        rc = rq_request_set_header(r, field[2], NULL);
        ORACLE(rc == RQ_OK || rc == RQ_ERR_INVALID_HEADER);
    }
    ORACLE(rq_request_set_body(r, field[4], length[4]) == RQ_OK);
    ORACLE(rq_request_set_credentials(r, field[5], field[6]) == RQ_OK);
    ORACLE(rq_request_set_tag(r, field[7]) == RQ_OK);

    /* Numbers. */
    double t = next_double(numbers, numbers_size, &at);
    rc = rq_request_set_timeout(r, t);
    ORACLE((rc == RQ_OK) == valid_seconds(t) && (rc == RQ_OK || rc == RQ_ERR_INVALID_ARGUMENT));
    t = next_double(numbers, numbers_size, &at);
    rc = rq_request_set_idle_timeout(r, t);
    ORACLE((rc == RQ_OK) == valid_seconds(t));
    t = next_double(numbers, numbers_size, &at);
    rc = rq_request_set_retry_delay(r, t);
    ORACLE((rc == RQ_OK) == valid_seconds(t));
    double m = next_double(numbers, numbers_size, &at), cap = next_double(numbers, numbers_size, &at),
           jitter = next_double(numbers, numbers_size, &at);
    rc = rq_request_set_retry_backoff(r, m, cap, jitter);
    ORACLE((rc == RQ_OK) == (isfinite(m) && m >= 1 && m <= 100 && valid_seconds(cap) && jitter >= 0 && jitter <= 1));
    uint64_t word = next_u64(numbers, numbers_size, &at);
    rc = rq_request_set_max_redirects(r, (unsigned)word);
    ORACLE((rc == RQ_OK) == ((unsigned)word <= 1000));
    rc = rq_request_set_max_attempts(r, (unsigned)(word >> 32));
    ORACLE((rc == RQ_OK) == ((unsigned)(word >> 32) <= 1000000));
    word = next_u64(numbers, numbers_size, &at);
    int priority = (int)(int32_t)(uint32_t)word;
    rc = rq_request_set_priority(r, (rq_priority)priority);
    ORACLE((rc == RQ_OK) == (priority >= RQ_PRIORITY_VERY_LOW && priority <= RQ_PRIORITY_VERY_HIGH));
    ORACLE(rq_request_set_max_response_size(r, next_u64(numbers, numbers_size, &at)) == RQ_OK);
    {
        rq_outcome outcomes[4];
        int statuses[4], outcomes_ok = 1, statuses_ok = 1;
        size_t count = numbers_size > 1 ? numbers[1] % 5 : 0;
        for (size_t i = 0; i < 4; i++) {
            word = next_u64(numbers, numbers_size, &at);
            outcomes[i] = (rq_outcome)(int)(int8_t)(uint8_t)word;
            statuses[i] = (int)(int16_t)(uint16_t)(word >> 8);
            if (i < count) {
                /* Any outcome but OK and CANCELLED; any status from 400 to 599. */
                outcomes_ok &= (int)outcomes[i] > RQ_OUTCOME_CANCELLED && (int)outcomes[i] <= RQ_OUTCOME_FILE_ERROR;
                statuses_ok &= statuses[i] >= 400 && statuses[i] <= 599;
            }
        }
        rc = rq_request_set_retry_outcomes(r, outcomes, count);
        ORACLE((rc == RQ_OK) == outcomes_ok && (rc == RQ_OK || rc == RQ_ERR_INVALID_ARGUMENT));
        rc = rq_request_set_retry_statuses(r, statuses, count);
        ORACLE((rc == RQ_OK) == statuses_ok && (rc == RQ_OK || rc == RQ_ERR_INVALID_ARGUMENT));
    }
    ORACLE(rq_request_set_retry(r, numbers_size > 2 ? numbers[2] : 0) == RQ_OK);
    /* Slow-server limits (read after the numbers above, so that older seeds keep their meaning). */
    t = next_double(numbers, numbers_size, &at);
    rc = rq_request_set_header_timeout(r, t);
    ORACLE((rc == RQ_OK) == valid_seconds(t) && (rc == RQ_OK || rc == RQ_ERR_INVALID_ARGUMENT));
    double rate = next_double(numbers, numbers_size, &at);
    t = next_double(numbers, numbers_size, &at);
    rc = rq_request_set_low_speed_limit(r, rate, t);
    ORACLE((rc == RQ_OK) == (isfinite(rate) && rate >= 0 && rate <= 1e12 && valid_seconds(t)));

    /* Into the suspended queue (for half of the inputs, as it is the slow part): equality and
     * coalescing compare what was fuzzed. */
    if (numbers_size > 5 && (numbers[5] & 1)) {
        ORACLE(rq_request_free(r) == RQ_OK);
        free(copy);
        return 0;
    }
    rq_duplicates mode = (rq_duplicates)(numbers_size > 3 ? numbers[3] % 3 : 0);
    ORACLE(rq_queue_set_duplicates(queue, mode) == RQ_OK);
    ORACLE(rq_request_set_completion(r, on_done, NULL, NULL) == RQ_OK);
    int before = atomic_load(&completions);
    ORACLE(rq_add(queue, r) == RQ_OK);
    /* An equal twin: cancels, joins or sits beside the first, depending on the mode. */
    rq_request *twin = NULL;
    if (numbers_size > 4 && numbers[4] & 1) {
        ORACLE(rq_request_new(field[0], &twin) == RQ_OK);
        (void)rq_request_set_method(twin, field[1]);
        (void)rq_request_set_header(twin, field[2], field[3]);
        (void)rq_request_set_header(twin, field[3], field[2]);
        if (numbers_size > 0 && numbers[0] & 1)
            (void)rq_request_set_header(twin, field[2], NULL);
        ORACLE(rq_request_set_body(twin, field[4], length[4]) == RQ_OK);
        ORACLE(rq_request_set_completion(twin, on_done, NULL, NULL) == RQ_OK);
        ORACLE(rq_add(queue, twin) == RQ_OK);
    }
    size_t counted = 0;
    ORACLE(rq_queue_count_tag(queue, field[7], &counted) == RQ_OK);
    ORACLE(counted <= 2);
    rq_request **list = NULL;
    ORACLE(rq_queue_snapshot_tag(queue, field[7], &list, &counted) == RQ_OK);
    rq_snapshot_free(list);
    ORACLE(rq_queue_cancel_all(queue) == RQ_OK);
    ORACLE(rq_queue_wait_idle(queue, -1) == RQ_OK);
    ORACLE(atomic_load(&completions) == before + 1 + (twin != NULL));
    ORACLE(rq_request_free(r) == RQ_OK);
    ORACLE(rq_request_free(twin) == RQ_OK);
    free(copy);
    return 0;
}
