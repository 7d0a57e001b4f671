/*
 * chaos.c: many requests against a misbehaving server while other threads disturb the queues.
 *
 * Producers add requests to several queues (threaded and inline ones, and one in dispatch mode). The requests
 * aim at the fixture server's normal endpoints and at its faults: TCP resets, stalls, 5xx
 * statuses, truncated bodies, a refused port, flaky endpoints that fail then succeed (with retry),
 * bodies over the request's size limit, total timeouts; some bodies go to a body callback, after
 * a head callback, and some completions are summary completions. At the same time other threads cancel
 * random requests (by handle and from queue snapshots), cancel whole queues, suspend and resume
 * them, change their limits, order and duplicate policy, and free queues mid-flight to replace
 * them with new ones; completion callbacks add follow-up requests of their own.
 *
 * Checked for every request:
 *   - exactly one completion for each request whose rq_add returned RQ_OK (lost = 0,
 *     doubled = 0) and none for the others; the context finalizer exactly once, after the
 *     completion; the request's state COMPLETED and its context intact inside the completion;
 *   - the outcome is one its endpoint can give (or CANCELLED), with the right status and body
 *     (an OK /bytes body is the fixture's pattern, of the right size; a streamed one came in
 *     order, after exactly one head, and no piece or head came after the completion); a request whose rq_cancel
 *     returned RQ_OK completed as CANCELLED;
 *   - API calls on queues being freed or already freed return the documented codes.
 * After every queue has been freed: the open file descriptors are exactly those before the first
 * queue was created, and the threads come back to their number from before (thread-pool workers
 * of libdispatch retire on their own, so this one is waited for, under the watchdog).
 *
 *   chaos [--requests N | --full] [--seed S] [--queues Q] [--producers P] BASE_URL
 *
 * --full runs 100,000 requests; the default is 20,000. Prints one "chaos:" summary line.
 */
#include "rel.h"

#include <inttypes.h>
#include <limits.h>
#include <poll.h>

/* ---- request kinds ------------------------------------------------------------------------- */

enum kind {
    K_BYTES,        /* /bytes?n=R                       OK, pattern body of R bytes */
    K_CHUNKED,      /* /bytes?n=R&chunked=1             OK, pattern body */
    K_HEAD,         /* HEAD /bytes?n=R                  OK, empty body */
    K_UPLOAD,       /* POST /upload with a body         OK, {"received": R} */
    K_DELAY,        /* /delay?s=0.02                    OK, "ok" */
    K_REDIRECT,     /* /redirect/2                      OK, "redirected" */
    K_DUPLICATE,    /* two equal /bytes requests        OK (or the earlier CANCELLED) */
    K_STREAMED,     /* /bytes?n=R to a body callback,   OK, R pattern bytes in order, after one head */
    K_STATUS_5XX,   /* /status/50x                      HTTP_STATUS with that status */
    K_RESET,        /* /reset                           CONNECTION_LOST */
    K_TRUNCATED,    /* /truncated?n=R                   CONNECTION_LOST */
    K_STALL,        /* /stall?s=3, idle limit 0.2 s     TIMEOUT */
    K_STALL_BODY,   /* /stall-body, idle limit 0.2 s    TIMEOUT */
    K_REFUSED,      /* a port that refuses connections  CANNOT_CONNECT */
    K_TIMEOUT,      /* /delay?s=2, time limit 0.1 s     TIMEOUT */
    K_TOO_LARGE,    /* /bytes?n=100000, limit 1000      RESPONSE_TOO_LARGE */
    K_FLAKY,        /* /flaky fail=F, retry on          OK after at most F+3 attempts */
    K_RETRY_EXHAUST,/* /status/503, retry 3 attempts    HTTP_STATUS after exactly 3 attempts */
    K_COUNT
};

static const char *const kind_names[K_COUNT] = {
    "bytes", "chunked", "head", "upload", "delay", "redirect", "duplicate", "streamed", "5xx", "reset",
    "truncated", "stall", "stall-body", "refused", "timeout", "too-large", "flaky", "retry-exhaust"};

/* Relative weights of the kinds in the mix. */
static const unsigned kind_weights[K_COUNT] = {28, 5, 3, 5, 5, 4, 3, 6, 8, 6, 6, 3, 2, 5, 2, 2, 10, 3};

/* 1 for the kinds aimed at an injected fault. */
static int is_fault_kind(enum kind k) { return k >= K_STATUS_5XX; }

/* ---- per-request records ------------------------------------------------------------------- */

struct rec {
    atomic_int completions;
    atomic_int finalized;
    atomic_int add_result;  /* -1 until rq_add returned */
    atomic_int cancel_ok;   /* rq_cancel returned RQ_OK for it */
    atomic_int outcome;
    atomic_int status;
    atomic_int attempts;
    atomic_int freed_queue; /* completed with "the queue was freed" */
    /* K_STREAMED: bytes streamed (in order, from offset 0) and heads seen. */
    atomic_uint streamed;
    atomic_int heads;
    uint8_t kind;
    uint8_t flaky_fail;
    uint8_t flaky_stall;
    uint16_t size;          /* the R of the kinds above */
};

static struct rec *recs;
static unsigned total;              /* ids 0..total-1 */
static atomic_uint next_id;         /* the next id to use */
static atomic_uint completed_count; /* completions delivered */
static atomic_int problems;         /* contract violations found inside callbacks */
static atomic_int stop_followups;
static atomic_int followups_in_flight; /* completions that may be adding a follow-up right now */

static char base[256];
static int refused_port;

#define MAX_PROBLEM_LINES 20
static void problem(const char *fmt, ...) RQT_PRINTF(1, 2);
static void problem(const char *fmt, ...) {
    int n = atomic_fetch_add(&problems, 1);
    if (n < MAX_PROBLEM_LINES) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "chaos: PROBLEM: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

/* ---- queues -------------------------------------------------------------------------------- */

#define MAX_SLOTS 16
struct slot {
    _Atomic(rq_queue *) queue;
    int dispatch;
};
static struct slot slots[MAX_SLOTS];
static int nslots;
static int stats_checked;        /* threaded or inline slots 0..nslots-2, the dispatch slot nslots-1 */
static atomic_int running = 1;

static atomic_long n_cancel_tag, n_priority_changes, n_cancel_ok, n_cancel_not_active, n_snapshot_cancels, n_cancel_all,
    n_suspends, n_limit_changes, n_queues_freed, n_followups, n_add_rejected_closed,
    n_add_rejected_invalid, n_dispatch_runs;

static rq_queue *new_queue(rq_delivery delivery, rel_rng *rng) {
    rq_queue *q;
    static const size_t limits[] = {1, 2, 3, 4, 6, 8, 16, 0};
    CHECK_OK(rq_queue_new(delivery, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, limits[rel_below(rng, 8)]));
    CHECK_OK(rq_queue_set_order(q, rel_below(rng, 2) ? RQ_ORDER_LIFO : RQ_ORDER_FIFO));
    CHECK_OK(rq_queue_set_duplicates(q, rel_below(rng, 4) ? RQ_DUPLICATES_CANCEL_EARLIER : RQ_DUPLICATES_ALLOW));
    return q;
}

/* ---- callbacks ----------------------------------------------------------------------------- */

static void add_request(unsigned id, rel_rng *rng, int from_callback);

static void check_body(unsigned id, struct rec *r, const rq_response *response) {
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    int status = rq_response_status(response);
    char expect[64];
    switch ((enum kind)r->kind) {
    case K_BYTES:
    case K_CHUNKED:
    case K_DUPLICATE:
        if (status != 200 || size != r->size || !rel_is_pattern(body, size))
            problem("id %u (%s): status %d, %zu bytes (pattern %d), expected 200 and %u pattern bytes",
                    id, kind_names[r->kind], status, size, rel_is_pattern(body, size), r->size);
        break;
    case K_STREAMED:
        if (status != 200 || size != 0 || atomic_load(&r->streamed) != r->size || atomic_load(&r->heads) != 1)
            problem("id %u (streamed): status %d, %zu bytes collected, %u streamed, %d heads, expected 200, 0, %u, 1",
                    id, status, size, atomic_load(&r->streamed), atomic_load(&r->heads), r->size);
        break;
    case K_HEAD:
        if (status != 200 || size != 0)
            problem("id %u (head): status %d, %zu bytes", id, status, size);
        break;
    case K_UPLOAD:
        snprintf(expect, sizeof expect, "{\"received\": %u}", r->size);
        if (status != 200 || size != strlen(expect) || memcmp(body, expect, size) != 0)
            problem("id %u (upload): status %d, body \"%.*s\", expected %s", id, status, (int)size,
                    (const char *)body, expect);
        break;
    case K_DELAY:
        if (status != 200 || size != 2 || memcmp(body, "ok", 2) != 0)
            problem("id %u (delay): status %d, %zu bytes", id, status, size);
        break;
    case K_REDIRECT:
        if (status != 200 || size != 10 || memcmp(body, "redirected", 10) != 0)
            problem("id %u (redirect): status %d, %zu bytes", id, status, size);
        break;
    case K_FLAKY:
        if (status != 200 || size != 16 || !rel_is_pattern(body, size) ||
            rq_response_attempts(response) > (unsigned)r->flaky_fail + 3)
            problem("id %u (flaky fail=%u): status %d, %zu bytes, %u attempts", id, r->flaky_fail, status,
                    size, rq_response_attempts(response));
        break;
    default:
        problem("id %u (%s): completed OK", id, kind_names[r->kind]);
    }
}

/* K_STREAMED: the body's pieces, checked as they come (in order, the fixture's pattern, before the
 * completion). A piece at offset 0 starts the body over (an attempt sent again). */
static int on_piece(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    struct rec *r = context;
    unsigned id = (unsigned)(r - recs);
    (void)request;
    if (atomic_load(&r->completions) || atomic_load(&r->finalized))
        problem("id %u (streamed): a piece after the completion", id);
    if (offset == 0)
        atomic_store(&r->streamed, 0);
    if (offset != atomic_load(&r->streamed))
        problem("id %u (streamed): a piece at offset %llu after %u bytes", id, (unsigned long long)offset,
                atomic_load(&r->streamed));
    for (size_t i = 0; i < size; i++)
        if (data[i] != (uint8_t)REL_PATTERN[(offset + i) % (sizeof REL_PATTERN - 1)]) {
            problem("id %u (streamed): byte %llu is not the pattern", id, (unsigned long long)(offset + i));
            break;
        }
    atomic_fetch_add(&r->streamed, (unsigned)size);
    if (atomic_load(&r->heads) == 0)
        problem("id %u (streamed): a piece before the head", id);
    return 0;
}

static void on_head(void *context, rq_request *request, const rq_response *head) {
    struct rec *r = context;
    (void)request;
    if (atomic_load(&r->completions) || atomic_load(&r->finalized))
        problem("id %u (streamed): a head after the completion", (unsigned)(r - recs));
    if (rq_response_status(head) != 200)
        problem("id %u (streamed): a head of status %d", (unsigned)(r - recs), rq_response_status(head));
    atomic_fetch_add(&r->heads, 1);
}

/* The outcome a kind must end with when it is not cancelled. */
static rq_outcome expected_outcome(enum kind k) {
    switch (k) {
    case K_STATUS_5XX:
    case K_RETRY_EXHAUST: return RQ_OUTCOME_HTTP_STATUS;
    case K_RESET:
    case K_TRUNCATED: return RQ_OUTCOME_CONNECTION_LOST;
    case K_STALL:
    case K_STALL_BODY:
    case K_TIMEOUT: return RQ_OUTCOME_TIMEOUT;
    case K_REFUSED: return RQ_OUTCOME_CANNOT_CONNECT;
    case K_TOO_LARGE: return RQ_OUTCOME_RESPONSE_TOO_LARGE;
    default: return RQ_OUTCOME_OK;
    }
}

static void on_complete(void *context, rq_request *request, const rq_response *response) {
    struct rec *r = context;
    unsigned id = (unsigned)(r - recs);
    int n = atomic_fetch_add(&r->completions, 1) + 1;
    if (n > 1)
        problem("id %u: completion number %d", id, n);
    if (atomic_load(&r->finalized))
        problem("id %u: completion after its finalizer", id);

    void *ctx = NULL;
    rq_request_state state = RQ_STATE_NEW;
    if (rq_request_get_context(request, &ctx) != RQ_OK || ctx != context)
        problem("id %u: rq_request_get_context in the completion gives %p, expected %p", id, ctx, context);
    if (rq_request_get_state(request, &state) != RQ_OK || state != RQ_STATE_COMPLETED)
        problem("id %u: state %d in its completion", id, (int)state);

    rq_outcome outcome = rq_response_outcome(response);
    const char *message = rq_response_error_message(response);
    atomic_store(&r->outcome, (int)outcome);
    atomic_store(&r->status, rq_response_status(response));
    atomic_store(&r->attempts, (int)rq_response_attempts(response));
    if (message == NULL || rq_response_url(response) == NULL)
        problem("id %u: NULL message or URL", id);

    enum kind k = (enum kind)r->kind;
    if (outcome == RQ_OUTCOME_CANCELLED) {
        if (message && strstr(message, "queue was freed"))
            atomic_store(&r->freed_queue, 1);
    } else if (outcome != expected_outcome(k)) {
        problem("id %u (%s): outcome %s (\"%s\", status %d, %u attempts), expected %s", id, kind_names[k],
                rq_outcome_str((int)outcome), message ? message : "(null)", rq_response_status(response),
                rq_response_attempts(response), rq_outcome_str((int)expected_outcome(k)));
    } else if (outcome == RQ_OUTCOME_OK) {
        check_body(id, r, response);
    } else if (k == K_STATUS_5XX || k == K_RETRY_EXHAUST) {
        int status = rq_response_status(response);
        if (status < 500 || status > 504)
            problem("id %u (%s): status %d", id, kind_names[k], status);
        if (k == K_RETRY_EXHAUST && rq_response_attempts(response) != 3)
            problem("id %u (retry-exhaust): %u attempts, expected 3", id, rq_response_attempts(response));
    }

    /* Now and then, a follow-up request added from inside the callback. */
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)id * 7919u + 17u);
    atomic_fetch_add(&followups_in_flight, 1);
    if (!atomic_load(&stop_followups) && rel_below(&rng, 50) == 0) {
        unsigned next = atomic_fetch_add(&next_id, 1);
        if (next < total) {
            atomic_fetch_add(&n_followups, 1);
            add_request(next, &rng, 1);
        }
    }
    atomic_fetch_sub(&followups_in_flight, 1);
    atomic_fetch_add(&completed_count, 1);
}

/* A summary completion (a quarter of the K_BYTES requests): its arguments are the response's, it
 * holds the response retained, and the rest is on_complete's. */
static void on_summary(void *context, rq_request *request, rq_response *response, rq_outcome outcome, int status,
                       int http_version, const uint8_t *body, size_t body_size) {
    struct rec *r = context;
    size_t size = 0;
    const uint8_t *own = rq_response_body(response, &size);
    if (outcome != rq_response_outcome(response) || status != rq_response_status(response) ||
        http_version != rq_response_http_version(response) || body != own || body_size != size)
        problem("id %u (summary): arguments %d/%d/%d/%zu, the response's %d/%d/%d/%zu", (unsigned)(r - recs),
                (int)outcome, status, http_version, body_size, (int)rq_response_outcome(response),
                rq_response_status(response), rq_response_http_version(response), size);
    on_complete(context, request, response);
    rq_response_release(response);
}

static void on_finalize(void *context) {
    struct rec *r = context;
    unsigned id = (unsigned)(r - recs);
    if (atomic_fetch_add(&r->finalized, 1) != 0)
        problem("id %u: finalizer called twice", id);
    if (atomic_load(&r->completions) == 0) {
        int added = atomic_load(&r->add_result);
        if (added == -1 || added == RQ_OK)
            problem("id %u: finalizer before the completion of an accepted request", id);
    }
}

/* ---- handles kept for cancellation ----------------------------------------------------------- */

#define RING 512
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static rq_request *ring[RING];
static unsigned ring_ids[RING];
static unsigned ring_next;

/* Keeps the caller's handle for the cancellers; frees the one it replaces. */
static void ring_put(rq_request *request, unsigned id) {
    pthread_mutex_lock(&ring_lock);
    rq_request *old = ring[ring_next];
    ring[ring_next] = request;
    ring_ids[ring_next] = id;
    ring_next = (ring_next + 1) % RING;
    pthread_mutex_unlock(&ring_lock);
    if (old)
        CHECK_OK(rq_request_free(old));
}

/* ---- building and adding requests ------------------------------------------------------------ */

static unsigned weight_sum; /* set by main before any thread starts */

static enum kind pick_kind(rel_rng *rng) {
    unsigned x = rel_below(rng, weight_sum);
    for (int k = 0; k < K_COUNT; k++) {
        if (x < kind_weights[k])
            return (enum kind)k;
        x -= kind_weights[k];
    }
    return K_BYTES;
}

static rq_request *build(unsigned id, enum kind k, rel_rng *rng) {
    struct rec *r = &recs[id];
    char url[512];
    r->kind = (uint8_t)k;
    r->size = (uint16_t)rel_below(rng, 8193);
    const char *method = NULL;
    switch (k) {
    case K_BYTES: snprintf(url, sizeof url, "%s/bytes?n=%u&id=%u", base, r->size, id); break;
    case K_CHUNKED:
        snprintf(url, sizeof url, "%s/bytes?n=%u&chunked=1&chunk=%u&id=%u", base, r->size, 1 + rel_below(rng, 3000), id);
        break;
    case K_HEAD: snprintf(url, sizeof url, "%s/bytes?n=%u&id=%u", base, r->size, id); method = "HEAD"; break;
    case K_UPLOAD: snprintf(url, sizeof url, "%s/upload?id=%u", base, id); method = "POST"; break;
    case K_DELAY: snprintf(url, sizeof url, "%s/delay?s=0.02&id=%u", base, id); break;
    case K_REDIRECT: snprintf(url, sizeof url, "%s/redirect/2?id=%u", base, id); break;
    case K_DUPLICATE: snprintf(url, sizeof url, "%s/bytes?n=%u&id=dup%u", base, r->size, id & ~1u); break;
    case K_STREAMED: snprintf(url, sizeof url, "%s/bytes?n=%u&id=%u", base, r->size, id); break;
    case K_STATUS_5XX: snprintf(url, sizeof url, "%s/status/%u?id=%u", base, 500 + rel_below(rng, 5), id); break;
    case K_RESET: snprintf(url, sizeof url, "%s/reset?id=%u", base, id); break;
    case K_TRUNCATED: snprintf(url, sizeof url, "%s/truncated?n=%u&id=%u", base, 2 + r->size, id); break;
    case K_STALL: snprintf(url, sizeof url, "%s/stall?s=3&id=%u", base, id); break;
    case K_STALL_BODY: snprintf(url, sizeof url, "%s/stall-body?n=2000&s=3&id=%u", base, id); break;
    case K_REFUSED: snprintf(url, sizeof url, "http://127.0.0.1:%d/refused?id=%u", refused_port, id); break;
    case K_TIMEOUT: snprintf(url, sizeof url, "%s/delay?s=2&id=%u", base, id); break;
    case K_TOO_LARGE: snprintf(url, sizeof url, "%s/bytes?n=100000&id=%u", base, id); break;
    case K_FLAKY: {
        static const char *const modes[] = {"reset", "status", "truncated", "stall"};
        r->flaky_fail = (uint8_t)(1 + rel_below(rng, 2));
        r->flaky_stall = (uint8_t)(rel_below(rng, 4) == 3);
        snprintf(url, sizeof url, "%s/flaky?key=k%u&fail=%u&mode=%s&s=3&id=%u", base, id, r->flaky_fail,
                 modes[r->flaky_stall ? 3 : rel_below(rng, 3)], id);
        break;
    }
    case K_RETRY_EXHAUST: snprintf(url, sizeof url, "%s/status/503?id=%u", base, id); break;
    default: FAIL("kind %d", (int)k);
    }
    rq_request *request;
    char tag[8];
    CHECK_OK(rq_request_new(url, &request));
    if (k == K_BYTES && rel_below(rng, 4) == 0)
        CHECK_OK(rq_request_set_summary_completion(request, on_summary, r, on_finalize));
    else
        CHECK_OK(rq_request_set_completion(request, on_complete, r, on_finalize));
    snprintf(tag, sizeof tag, "t%u", id % 64);
    CHECK_OK(rq_request_set_tag(request, tag));
    CHECK_OK(rq_request_set_priority(request, (rq_priority)((int)rel_below(rng, 5) - 2)));
    if (method)
        CHECK_OK(rq_request_set_method(request, method));
    if (k == K_UPLOAD) {
        static const char fill[8192] = {0};
        CHECK_OK(rq_request_set_body(request, fill, r->size));
    }
    if (k == K_STREAMED) {
        CHECK_OK(rq_request_set_body_callback(request, on_piece));
        CHECK_OK(rq_request_set_head_callback(request, on_head));
    }
    if (k == K_STALL || k == K_STALL_BODY)
        CHECK_OK(rq_request_set_idle_timeout(request, 0.2));
    if (k == K_TIMEOUT)
        CHECK_OK(rq_request_set_timeout(request, 0.1));
    if (k == K_TOO_LARGE)
        CHECK_OK(rq_request_set_max_response_size(request, 1000));
    if (k == K_FLAKY || k == K_RETRY_EXHAUST) {
        static const rq_outcome retried[] = {RQ_OUTCOME_TIMEOUT, RQ_OUTCOME_CANNOT_CONNECT,
                                             RQ_OUTCOME_CONNECTION_LOST, RQ_OUTCOME_HTTP_STATUS};
        CHECK_OK(rq_request_set_retry(request, 1));
        CHECK_OK(rq_request_set_retry_delay(request, 0.01 * rel_below(rng, 4)));
        CHECK_OK(rq_request_set_retry_outcomes(request, retried, 4));
        /* Two attempts to spare for a flaky request: an attempt that the client gave up on (idle
         * limit) may reach the server after the next one, and count as its failure. */
        CHECK_OK(rq_request_set_max_attempts(request, k == K_FLAKY ? (unsigned)r->flaky_fail + 3 : 3));
        if (k == K_FLAKY && r->flaky_stall)
            CHECK_OK(rq_request_set_idle_timeout(request, 0.3));
    }
    return request;
}

/* Adds request `id` to a random queue. From a callback the handle is freed at once; otherwise it
 * goes to the ring for the cancellers. */
static _Thread_local rq_queue *stale_queue; /* a queue handle seen a while ago, maybe freed since */

static void add_one(unsigned id, rq_request *request, rel_rng *rng, int from_callback) {
    struct slot *s = &slots[rel_below(rng, (unsigned)nslots)];
    rq_queue *q = atomic_load(&s->queue);
    /* Now and then, on purpose, a handle loaded long ago (the queue may have been freed since). */
    if (!from_callback) {
        if (stale_queue && rel_below(rng, 100) == 0)
            q = stale_queue;
        else if (rel_below(rng, 200) == 0)
            stale_queue = q;
    }
    int rc = rq_add(q, request);
    atomic_store(&recs[id].add_result, rc);
    if (rc == RQ_ERR_QUEUE_CLOSED)
        atomic_fetch_add(&n_add_rejected_closed, 1);
    else if (rc == RQ_ERR_INVALID_HANDLE)
        atomic_fetch_add(&n_add_rejected_invalid, 1);
    else if (rc != RQ_OK)
        FAIL("rq_add returned %d (%s)", rc, rq_result_str(rc));
    if (from_callback || rc != RQ_OK)
        CHECK_OK(rq_request_free(request));
    else
        ring_put(request, id);
}

static void add_request(unsigned id, rel_rng *rng, int from_callback) {
    enum kind k = pick_kind(rng);
    if (k == K_DUPLICATE) {
        /* Two equal requests: ids id and id+1 when both are free, else a plain one. */
        if ((id & 1u) == 0 && !from_callback) {
            unsigned expected = id + 1;
            if (expected < total && atomic_compare_exchange_strong(&next_id, &expected, id + 2)) {
                rq_request *a = build(id, K_DUPLICATE, rng);
                recs[id + 1].size = recs[id].size;
                recs[id + 1].kind = K_DUPLICATE;
                char url[512];
                snprintf(url, sizeof url, "%s/bytes?n=%u&id=dup%u", base, recs[id].size, id);
                rq_request *b;
                CHECK_OK(rq_request_new(url, &b));
                CHECK_OK(rq_request_set_completion(b, on_complete, &recs[id + 1], on_finalize));
                /* Both into the same queue, one after the other. */
                struct slot *s = &slots[rel_below(rng, (unsigned)nslots)];
                rq_queue *q = atomic_load(&s->queue);
                rq_request *pair[2] = {a, b};
                for (int i = 0; i < 2; i++) {
                    int rc = rq_add(q, pair[i]);
                    atomic_store(&recs[id + (unsigned)i].add_result, rc);
                    if (rc == RQ_ERR_QUEUE_CLOSED)
                        atomic_fetch_add(&n_add_rejected_closed, 1);
                    else if (rc == RQ_ERR_INVALID_HANDLE)
                        atomic_fetch_add(&n_add_rejected_invalid, 1);
                    else if (rc != RQ_OK)
                        FAIL("rq_add returned %d (%s)", rc, rq_result_str(rc));
                    if (rc != RQ_OK)
                        CHECK_OK(rq_request_free(pair[i]));
                    else
                        ring_put(pair[i], id + (unsigned)i);
                }
                return;
            }
        }
        k = K_BYTES;
    }
    add_one(id, build(id, k, rng), rng, from_callback);
}

/* ---- threads ------------------------------------------------------------------------------- */

static void *producer(void *arg) {
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)(uintptr_t)arg);
    for (;;) {
        unsigned id = atomic_fetch_add(&next_id, 1);
        if (id >= total)
            break;
        add_request(id, &rng, 0);
        /* Now and then a short pause, so that queues drain and fill again. */
        if (rel_below(&rng, 64) == 0)
            rqt_sleep(0.001 * rel_below(&rng, 5));
        /* Keep the backlog bounded: wait while far ahead of the completions and refusals. */
        while (id > atomic_load(&completed_count) + (unsigned)atomic_load(&n_add_rejected_closed) +
                        (unsigned)atomic_load(&n_add_rejected_invalid) + 500)
            rqt_sleep(0.001);
    }
    return NULL;
}

/* Cancels random requests by handle, and now and then one found in a queue snapshot. */
static void *canceller(void *arg) {
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)(uintptr_t)arg);
    while (atomic_load(&running)) {
        pthread_mutex_lock(&ring_lock);
        unsigned i = rel_below(&rng, RING);
        if (ring[i]) {
            int rc = rq_cancel(ring[i]);
            if (rc == RQ_OK) {
                atomic_fetch_add(&recs[ring_ids[i]].cancel_ok, 1);
                atomic_fetch_add(&n_cancel_ok, 1);
            } else if (rc == RQ_ERR_NOT_ACTIVE) {
                atomic_fetch_add(&n_cancel_not_active, 1);
            } else {
                pthread_mutex_unlock(&ring_lock);
                FAIL("rq_cancel of a held handle returned %d (%s)", rc, rq_result_str(rc));
            }
        }
        pthread_mutex_unlock(&ring_lock);

        if (rel_below(&rng, 8) == 0) {
            rq_queue *q = atomic_load(&slots[rel_below(&rng, (unsigned)nslots)].queue);
            rq_request **list = NULL;
            size_t count = 0;
            int rc = rq_queue_snapshot(q, &list, &count);
            if (rc == RQ_OK) {
                if (count > 0) {
                    rq_request *victim = list[rel_below(&rng, (unsigned)count)];
                    void *context = NULL;
                    /* Borrowed handles: valid, or RQ_ERR_INVALID_HANDLE once completed and freed. */
                    int got = rq_request_get_context(victim, &context);
                    int rc2 = rq_cancel(victim);
                    if (rc2 == RQ_OK) {
                        atomic_fetch_add(&n_cancel_ok, 1);
                        atomic_fetch_add(&n_snapshot_cancels, 1);
                        if (got == RQ_OK)
                            atomic_fetch_add(&((struct rec *)context)->cancel_ok, 1);
                    } else if (rc2 != RQ_ERR_NOT_ACTIVE && rc2 != RQ_ERR_INVALID_HANDLE) {
                        FAIL("rq_cancel of a snapshot handle returned %d (%s)", rc2, rq_result_str(rc2));
                    }
                    if (got != RQ_OK && got != RQ_ERR_INVALID_HANDLE)
                        FAIL("rq_request_get_context of a snapshot handle returned %d", got);
                }
                rq_snapshot_free(list);
            } else if (rc != RQ_ERR_INVALID_HANDLE) {
                FAIL("rq_queue_snapshot returned %d (%s)", rc, rq_result_str(rc));
            }
        }
        rqt_sleep(0.001 * (2 + rel_below(&rng, 10)));
    }
    return NULL;
}

/* A queue call on a slot's queue, which another thread may be freeing: OK or INVALID_HANDLE. */
#define SLOT_CALL(expr)                                                                            \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != RQ_OK && rc_ != RQ_ERR_INVALID_HANDLE)                                          \
            FAIL("%s returned %d (%s)", #expr, rc_, rq_result_str(rc_));                           \
    } while (0)

/* cancel_all, suspend/resume, limits, order and duplicates on random queues. */
static void *disturber(void *arg) {
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)(uintptr_t)arg);
    static const size_t limits[] = {0, 1, 2, 3, 4, 6, 8, 16};
    while (atomic_load(&running)) {
        rq_queue *q = atomic_load(&slots[rel_below(&rng, (unsigned)nslots)].queue);
        unsigned what = rel_below(&rng, 100);
        if (what < 1) {
            SLOT_CALL(rq_queue_cancel_all(q));
            atomic_fetch_add(&n_cancel_all, 1);
        } else if (what < 15) {
            SLOT_CALL(rq_queue_suspend(q));
            atomic_fetch_add(&n_suspends, 1);
            rqt_sleep(0.001 * rel_below(&rng, 15));
            SLOT_CALL(rq_queue_resume(q));
        } else if (what < 45) {
            SLOT_CALL(rq_queue_set_max_concurrent(q, limits[rel_below(&rng, 8)]));
            atomic_fetch_add(&n_limit_changes, 1);
        } else if (what < 52) {
            SLOT_CALL(rq_queue_set_max_per_host(q, rel_below(&rng, 3) == 0 ? 0 : 1 + rel_below(&rng, 8)));
            atomic_fetch_add(&n_limit_changes, 1);
        } else if (what < 55) {
            /* A start-rate limit (rates well above the throughput, or one that slows down for a moment). */
            static const unsigned starts[] = {0, 0, 2000, 500, 50};
            unsigned k = rel_below(&rng, 5);
            SLOT_CALL(rq_queue_set_rate_limit(q, starts[k], k == 4 ? 0.1 : 1.0, (int)rel_below(&rng, 2)));
            atomic_fetch_add(&n_limit_changes, 1);
        } else if (what < 60) {
            SLOT_CALL(rq_queue_set_order(q, rel_below(&rng, 2) ? RQ_ORDER_LIFO : RQ_ORDER_FIFO));
        } else if (what < 65) {
            static const rq_duplicates modes[] = {RQ_DUPLICATES_ALLOW, RQ_DUPLICATES_CANCEL_EARLIER, RQ_DUPLICATES_COALESCE};
            SLOT_CALL(rq_queue_set_duplicates(q, modes[rel_below(&rng, 3)]));
        } else if (what < 67) {
            char tag[8];
            size_t cancelled = 0;
            snprintf(tag, sizeof tag, "t%u", rel_below(&rng, 64));
            SLOT_CALL(rq_queue_cancel_tag(q, tag, &cancelled));
            atomic_fetch_add(&n_cancel_tag, (long)cancelled);
        } else if (what < 80) {
            /* A new priority for a request that may be waiting, running or completed. */
            pthread_mutex_lock(&ring_lock);
            rq_request *r = ring[rel_below(&rng, RING)];
            int rc = r ? rq_request_set_priority(r, (rq_priority)((int)rel_below(&rng, 5) - 2)) : RQ_OK;
            pthread_mutex_unlock(&ring_lock);
            if (rc != RQ_OK && rc != RQ_ERR_NOT_ACTIVE)
                FAIL("rq_request_set_priority returned %d (%s)", rc, rq_result_str(rc));
            atomic_fetch_add(&n_priority_changes, rc == RQ_OK);
        } else {
            size_t count;
            int suspended;
            SLOT_CALL(rq_queue_count(q, &count));
            SLOT_CALL(rq_queue_is_suspended(q, &suspended));
        }
        rqt_sleep(0.001 * (2 + rel_below(&rng, 10)));
    }
    return NULL;
}

/* Frees a random threaded or inline queue mid-flight and puts a new one (either mode) in its place. */
static void *recycler(void *arg) {
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)(uintptr_t)arg);
    while (atomic_load(&running)) {
        rqt_sleep(0.2 + 0.001 * rel_below(&rng, 400));
        if (!atomic_load(&running))
            break;
        struct slot *s = &slots[rel_below(&rng, (unsigned)nslots - 1)];
        rq_queue *fresh = new_queue(rel_below(&rng, 2) ? RQ_DELIVERY_INLINE : RQ_DELIVERY_THREADED, &rng);
        rq_queue *old = atomic_exchange(&s->queue, fresh);
        CHECK_OK(rq_queue_free(old));
        atomic_fetch_add(&n_queues_freed, 1);
        /* The freed handle stays invalid. */
        size_t count;
        CHECK_RC(rq_queue_count(old, &count), RQ_ERR_INVALID_HANDLE);
    }
    return NULL;
}

/* Runs the dispatch-mode queue's callbacks; now and then frees it mid-flight (its remaining
 * callbacks then run here, inside rq_queue_free) and makes a new one. */
static void *dispatcher(void *arg) {
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)(uintptr_t)arg);
    struct slot *s = &slots[nslots - 1];
    unsigned rounds = 0;
    for (;;) {
        rq_queue *q = atomic_load(&s->queue);
        int fd;
        CHECK_OK(rq_queue_get_fd(q, &fd));
        if (!atomic_load(&running)) {
            CHECK_OK(rq_queue_resume(q));
            CHECK_OK(rq_queue_wait_idle(q, 120)); /* runs the callbacks here */
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 20);
        size_t ran = 0;
        CHECK_OK(rq_queue_dispatch(q, rel_below(&rng, 4) == 0 ? 1 + rel_below(&rng, 5) : 0, &ran));
        atomic_fetch_add(&n_dispatch_runs, (long)ran);
        if (++rounds % 400 == 0) {
            rq_queue *fresh = new_queue(RQ_DELIVERY_DISPATCH, &rng);
            atomic_store(&s->queue, fresh);
            CHECK_OK(rq_queue_free(q));
            atomic_fetch_add(&n_queues_freed, 1);
        }
    }
    return NULL;
}

/* An idle queue's counters add up: every accepted request completed once, by outcome. */
static void check_stats(rq_queue *q) {
    rq_queue_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_OK(rq_queue_get_stats(q, &st));
    if (st.added != st.succeeded + st.cancelled + st.failed)
        problem("queue stats of an idle queue: added %llu != succeeded %llu + cancelled %llu + failed %llu",
                (unsigned long long)st.added, (unsigned long long)st.succeeded, (unsigned long long)st.cancelled,
                (unsigned long long)st.failed);
    stats_checked++;
}

/* ---- setup --------------------------------------------------------------------------------- */

static int fetch_refused_port(void) {
    char *json = rqt_get(base, "/_/refuse-then-accept?after=3600");
    const char *p = strstr(json, "\"port\": ");
    CHECK(p != NULL, "no port in %s", json);
    int port = atoi(p + 8);
    free(json);
    return port;
}

/* One of each delivery mode, used and freed, so that one-time allocations (libcurl, TLS, the
 * Swift runtime, libdispatch's pool) happen before the baseline is taken. */
static void warm_up(void) {
    for (int mode = 0; mode < 3; mode++) {
        rq_queue *q;
        CHECK_OK(rq_queue_new((rq_delivery)mode, &q));
        for (int i = 0; i < 4; i++) {
            char url[300];
            rq_request *r;
            snprintf(url, sizeof url, "%s/bytes?n=100&id=warm-%d-%d", base, mode, i);
            CHECK_OK(rq_request_new(url, &r));
            CHECK_OK(rq_add(q, r));
            CHECK_OK(rq_request_free(r));
        }
        CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
        CHECK_OK(rq_queue_free(q));
    }
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--requests N | --full] [--seed S] [--queues Q] [--producers P] BASE_URL\n", argv0);
    exit(2);
}

int main(int argc, char **argv) {
    unsigned requests = 20000, nqueues = 4, nproducers = 3;
    uint64_t seed = (uint64_t)time(NULL);
    const char *url = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0)
            requests = 100000;
        else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
            requests = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--queues") == 0 && i + 1 < argc)
            nqueues = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--producers") == 0 && i + 1 < argc)
            nproducers = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (argv[i][0] == '-')
            usage(argv[0]);
        else
            url = argv[i];
    }
    if (!url)
        url = rqt_base_url(1, argv);
    if (requests < 10 || nqueues < 1 || nqueues > MAX_SLOTS - 1 || nproducers < 1 || nproducers > 32)
        usage(argv[0]);
    snprintf(base, sizeof base, "%s", url);
    total = requests;
    recs = calloc(total, sizeof *recs);
    CHECK(recs != NULL, "out of memory");
    for (unsigned i = 0; i < total; i++)
        atomic_store(&recs[i].add_result, -1);

    refused_port = fetch_refused_port();
    warm_up();
    rqt_sleep(0.5); /* let the warm-up's pool threads settle before counting */
    const int fds_before = rel_open_fds();
    const int threads_before = rel_threads();
    const long rss_before = rel_rss_kib();
    printf("chaos: %u requests, %u threaded/inline queues + 1 dispatch queue, %u producers, seed %" PRIu64
           ", refused port %d; before: %d fds, %d threads, %ld KiB\n",
           total, nqueues, nproducers, seed, refused_port, fds_before, threads_before, rss_before);
    fflush(stdout);

    for (int k = 0; k < K_COUNT; k++)
        weight_sum += kind_weights[k];
    rel_rng rng;
    rel_rng_seed(&rng, seed);
    nslots = (int)nqueues + 1;
    for (int i = 0; i < nslots; i++) {
        slots[i].dispatch = i == nslots - 1;
        rq_delivery mode = slots[i].dispatch ? RQ_DELIVERY_DISPATCH : i % 2 ? RQ_DELIVERY_INLINE : RQ_DELIVERY_THREADED;
        atomic_store(&slots[i].queue, new_queue(mode, &rng));
    }

    double start = rqt_now();
    pthread_t producers[32], helpers[5];
    for (unsigned i = 0; i < nproducers; i++)
        CHECK(pthread_create(&producers[i], NULL, producer, (void *)(uintptr_t)(seed + 100 + i)) == 0, "pthread_create");
    void *(*helper_fns[5])(void *) = {canceller, canceller, disturber, recycler, dispatcher};
    for (int i = 0; i < 5; i++)
        CHECK(pthread_create(&helpers[i], NULL, helper_fns[i], (void *)(uintptr_t)(seed + 200 + (unsigned)i)) == 0,
              "pthread_create");

    /* Progress, and a watchdog against hangs: completions must keep coming. */
    unsigned last = 0, step = total / 10;
    double last_change = rqt_now();
    int peak_threads = 0, peak_fds = 0;
    for (;;) {
        unsigned done = atomic_load(&completed_count);
        unsigned issued = atomic_load(&next_id);
        int t = rel_threads(), f = rel_open_fds();
        peak_threads = t > peak_threads ? t : peak_threads;
        peak_fds = f > peak_fds ? f : peak_fds;
        if (done / step != last / step) {
            printf("chaos: %u/%u completed after %.1f s (%d threads, %d fds)\n", done, total, rqt_now() - start, t, f);
            fflush(stdout);
        }
        if (done != last) {
            last = done;
            last_change = rqt_now();
        }
        if (issued >= total) {
            unsigned accepted = 0;
            for (unsigned i = 0; i < total; i++)
                accepted += atomic_load(&recs[i].add_result) == RQ_OK;
            if (done >= accepted)
                break;
        }
        if (rqt_now() - last_change > 120)
            FAIL("no completion for 120 s: %u of %u issued, %u completed", issued, total, done);
        rqt_sleep(0.05);
    }
    for (unsigned i = 0; i < nproducers; i++)
        pthread_join(producers[i], NULL);
    atomic_store(&stop_followups, 1);
    atomic_store(&running, 0);
    for (int i = 0; i < 5; i++)
        pthread_join(helpers[i], NULL);
    WAIT_FOR(atomic_load(&followups_in_flight) == 0, "a completion callback never returned");

    /* Drain and free what is left. */
    for (int i = 0; i < nslots - 1; i++) {
        rq_queue *q = atomic_load(&slots[i].queue);
        CHECK_OK(rq_queue_resume(q));
        CHECK_OK(rq_queue_wait_idle(q, 120));
        check_stats(q);
        CHECK_OK(rq_queue_free(q));
    }
    for (unsigned i = 0; i < RING; i++)
        if (ring[i]) {
            CHECK_OK(rq_request_free(ring[i]));
            CHECK_RC(rq_request_free(ring[i]), RQ_ERR_INVALID_HANDLE);
            ring[i] = NULL;
        }
    /* The dispatch queue, which its thread left idle (its callbacks run here now). */
    rq_queue *dq = atomic_load(&slots[nslots - 1].queue);
    CHECK_OK(rq_queue_wait_idle(dq, 120));
    check_stats(dq);
    CHECK_OK(rq_queue_free(dq));
    double elapsed = rqt_now() - start;

    /* ---- the count ---- */
    unsigned accepted = 0, rejected = 0, lost = 0, doubled = 0, ghost = 0, fin_bad = 0, cancel_mismatch = 0;
    unsigned long completions = 0, faults_sent = 0, failed_attempts = 0, freed_cancels = 0;
    unsigned per_kind[K_COUNT] = {0}, outcomes[16] = {0};
    for (unsigned i = 0; i < total; i++) {
        struct rec *r = &recs[i];
        int c = atomic_load(&r->completions);
        int added = atomic_load(&r->add_result);
        completions += (unsigned)c;
        if (atomic_load(&r->finalized) != 1) {
            fin_bad++;
            if (fin_bad <= 5)
                fprintf(stderr, "chaos: id %u: finalizer called %d times\n", i, atomic_load(&r->finalized));
        }
        if (added == RQ_OK) {
            accepted++;
            per_kind[r->kind]++;
            if (c == 0) {
                lost++;
                if (lost <= 5)
                    fprintf(stderr, "chaos: LOST id %u (%s)\n", i, kind_names[r->kind]);
            }
            if (c > 1)
                doubled++;
            int o = atomic_load(&r->outcome);
            if (c >= 1 && o >= 0 && o < 16)
                outcomes[o]++;
            if (atomic_load(&r->cancel_ok) && o != RQ_OUTCOME_CANCELLED) {
                cancel_mismatch++;
                if (cancel_mismatch <= 5)
                    fprintf(stderr, "chaos: id %u: rq_cancel returned RQ_OK but it completed with %s\n", i,
                            rq_outcome_str(o));
            }
            if (atomic_load(&r->cancel_ok) > 1)
                problem("id %u: %d cancels returned RQ_OK", i, atomic_load(&r->cancel_ok));
            freed_cancels += (unsigned)atomic_load(&r->freed_queue);
            if (is_fault_kind((enum kind)r->kind)) {
                faults_sent++;
                int attempts = atomic_load(&r->attempts);
                if (o == RQ_OUTCOME_OK)
                    failed_attempts += attempts > 1 ? (unsigned)attempts - 1 : 0;
                else if (o != RQ_OUTCOME_CANCELLED)
                    failed_attempts += attempts > 0 ? (unsigned)attempts : 1;
            }
        } else {
            rejected++;
            if (c != 0) {
                ghost++;
                fprintf(stderr, "chaos: id %u: rq_add returned %d but it completed %d times\n", i, added, c);
            }
        }
    }

    /* ---- what the process holds now ---- */
    const int fds_after = rel_open_fds();
    double t0 = rqt_now();
    WAIT_FOR(rel_threads() <= threads_before, "threads: %d now, %d before the queues", rel_threads(), threads_before);
    const double threads_wait = rqt_now() - t0;
    const int threads_after = rel_threads();
    const long rss_after = rel_rss_kib();

    printf("chaos: outcomes:");
    for (int o = 0; o < 16; o++)
        if (outcomes[o])
            printf(" %s=%u", rq_outcome_str(o), outcomes[o]);
    printf("\nchaos: kinds:");
    for (int k = 0; k < K_COUNT; k++)
        printf(" %s=%u", kind_names[k], per_kind[k]);
    printf("\nchaos: disturbances: cancel_ok=%ld (from snapshots %ld) cancel_not_active=%ld cancel_all=%ld "
           "cancelled_by_tag=%ld priority_changes=%ld suspend_resume=%ld limit_changes=%ld queues_freed_mid_flight=%ld cancelled_by_free=%lu followups=%ld "
           "add_refused(closed=%ld invalid_handle=%ld) dispatched=%ld\n",
           atomic_load(&n_cancel_ok), atomic_load(&n_snapshot_cancels), atomic_load(&n_cancel_not_active),
           atomic_load(&n_cancel_all), atomic_load(&n_cancel_tag), atomic_load(&n_priority_changes), atomic_load(&n_suspends), atomic_load(&n_limit_changes),
           atomic_load(&n_queues_freed), freed_cancels, atomic_load(&n_followups), atomic_load(&n_add_rejected_closed),
           atomic_load(&n_add_rejected_invalid), atomic_load(&n_dispatch_runs));
    printf("chaos: resources: fds %d before, %d peak, %d after; threads %d before, %d peak, %d after (%.1f s for "
           "pool threads to retire); RSS %ld KiB before, %ld KiB after\n",
           fds_before, peak_fds, fds_after, threads_before, peak_threads, threads_after, threads_wait, rss_before,
           rss_after);
    printf("chaos: requests=%u accepted=%u rejected=%u completions=%lu lost=%u doubled=%u unexpected=%u "
           "finalizer_errors=%u cancel_mismatch=%u faults_injected=%lu failed_attempts=%lu problems=%d "
           "fd_leak=%d thread_leak=%d stats_checked=%d seconds=%.1f\n",
           total, accepted, rejected, completions, lost, doubled, ghost, fin_bad, cancel_mismatch, faults_sent,
           failed_attempts, atomic_load(&problems), fds_after - fds_before, threads_after - threads_before, stats_checked, elapsed);
    fflush(stdout);

    int ok = lost == 0 && doubled == 0 && ghost == 0 && fin_bad == 0 && cancel_mismatch == 0 &&
             atomic_load(&problems) == 0 && fds_after == fds_before && threads_after <= threads_before &&
             completions == accepted;
    if (!ok) {
        fprintf(stderr, "chaos: FAILED (see the counts above)\n");
        return 1;
    }
    printf("chaos: PASS\n");
    free(recs);
    return 0;
}
