/*
 * races.c: every pair of state-changing calls on shared handles, from several threads at once.
 *
 * For each pair of operations (A, B) among those below, and for each state the shared request
 * can be in when they start (new, waiting in a suspended queue, running, waiting at an
 * authentication challenge, completed with its response retained, sharing the running transfer of
 * an equal request in a coalescing queue, waiting for its retry after a lost connection, retrying
 * without end every millisecond against a server that resets every connection), the harness makes a fresh queue (threaded, dispatch or
 * inline mode, in turn) and request, then lets two worker threads loose at once from a
 * spinning start line, one running A and the other B (both the same call for a pair of a call
 * with itself), on the same queue, request, challenge and response. Afterwards it frees what the
 * calls left and checks:
 *
 *   - every call returned one of the codes documented for it;
 *   - the request was accepted (rq_add or rq_request_start returned RQ_OK) at most once, and got
 *     exactly as many completions as acceptances;
 *   - the context finalizer ran exactly once, after the completion when there was one, and no
 *     callback (progress, challenge, completion) ran after it;
 *   - exactly one rq_request_free and one rq_queue_free returned RQ_OK (the harness's own, made
 *     after the workers, included), and at most one answer to the challenge was accepted;
 *   - nothing arrives later: at the end, after every queue is gone, every record is re-checked.
 *
 * Operations after OP_CORE in the table (duplicates mode, the queue's defaults, the cookie jar, a
 * setter of the request's configuration) and the "retrying" and "churning" states run in rounds 1, 5, 9, ... only,
 * so that the default run (4 rounds) meets each of them once and the single round under TSan
 * keeps its length.
 *
 * A watchdog turns a hang into a failure that names the pair and the state.
 *
 *   races [--rounds N] [--only OP] [--skip OP] BASE_URL
 *
 * --only runs the pairs that include OP, --skip those that do not (to look at one class at a time).
 *
 * Prints one "races:" summary line (pairs, states, iterations, calls, failures).
 */
#include "rel.h"

#include <pthread.h>

/* ---- the shared handles of one iteration --------------------------------------------------- */

enum state { S_NEW, S_WAITING, S_RUNNING, S_CHALLENGED, S_COMPLETED, S_COALESCED, S_RETRYING, S_CHURNING, S_COUNT };
static const char *const state_names[S_COUNT] = {"new", "waiting", "running", "challenged", "completed",
                                                 "coalesced", "retrying", "churning"};

/* The request whose transfer the shared one joins in the "coalesced" state (its handle freed at
 * once by the harness: only its accounting is checked). */
struct leader {
    atomic_int completions;
    atomic_int finalized;
};

struct shared {
    rq_queue *queue;
    rq_request *request;
    int dispatch;
    _Atomic(rq_auth_challenge *) challenge;
    _Atomic(const rq_response *) retained;
    atomic_int accepted;        /* rq_add / rq_request_start returned RQ_OK */
    atomic_int completions;
    atomic_int finalized;
    atomic_int completions_at_finalize;
    atomic_int late_callbacks;  /* callbacks after the finalizer */
    atomic_int request_freed;   /* rq_request_free returned RQ_OK */
    atomic_int queue_freed;     /* rq_queue_free returned RQ_OK */
    atomic_int answers;         /* answers to the challenge returned RQ_OK */
    atomic_int challenges;
    struct leader *leader;      /* "coalesced" state only */
};

static void on_leader_done(void *context, rq_request *request, const rq_response *response) {
    struct leader *l = context;
    (void)request, (void)response;
    atomic_fetch_add(&l->completions, 1);
}

static void on_leader_finalize(void *context) {
    struct leader *l = context;
    atomic_fetch_add(&l->finalized, 1);
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct shared *s = context;
    (void)request;
    if (atomic_load(&s->finalized))
        atomic_fetch_add(&s->late_callbacks, 1);
    /* Kept for the read and retain/release operations of the "completed" state. */
    if (atomic_load(&s->completions) == 0)
        atomic_store(&s->retained, rq_response_retain(response));
    atomic_fetch_add(&s->completions, 1);
}

static void on_finalize(void *context) {
    struct shared *s = context;
    atomic_store(&s->completions_at_finalize, atomic_load(&s->completions));
    atomic_fetch_add(&s->finalized, 1);
}

static void on_progress(void *context, rq_request *request, double progress, int64_t done, int64_t total) {
    struct shared *s = context;
    (void)request, (void)progress, (void)done, (void)total;
    if (atomic_load(&s->finalized))
        atomic_fetch_add(&s->late_callbacks, 1);
}

static void on_challenge(void *context, rq_request *request, rq_auth_challenge *challenge, unsigned failures,
                         const rq_response *response) {
    struct shared *s = context;
    (void)request, (void)response;
    if (atomic_load(&s->finalized))
        atomic_fetch_add(&s->late_callbacks, 1);
    atomic_fetch_add(&s->challenges, 1);
    if (failures == 0)
        atomic_store(&s->challenge, challenge);
    else
        rq_auth_cancel(challenge);   /* a rejected credential: never loop */
}

/* ---- operations ---------------------------------------------------------------------------- */

#define RC(code) (1u << (code))

struct op {
    const char *name;
    int (*run)(struct shared *s, int worker);
    unsigned allowed;   /* bit set of the rq_result codes it may return */
};

static int op_add(struct shared *s, int w) {
    (void)w;
    int rc = rq_add(s->queue, s->request);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->accepted, 1);
    return rc;
}
static int op_start(struct shared *s, int w) {
    (void)w;
    int rc = rq_request_start(s->request);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->accepted, 1);
    return rc;
}
static int op_cancel(struct shared *s, int w) { (void)w; return rq_cancel(s->request); }
static int op_request_free(struct shared *s, int w) {
    (void)w;
    int rc = rq_request_free(s->request);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->request_freed, 1);
    return rc;
}
static int op_queue_free(struct shared *s, int w) {
    (void)w;
    int rc = rq_queue_free(s->queue);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->queue_freed, 1);
    return rc;
}
static int op_cancel_all(struct shared *s, int w) { (void)w; return rq_queue_cancel_all(s->queue); }
static int op_cancel_tag(struct shared *s, int w) {
    size_t n;
    (void)w;
    return rq_queue_cancel_tag(s->queue, "race", &n);
}
static int op_suspend(struct shared *s, int w) { (void)w; return rq_queue_suspend(s->queue); }
static int op_resume(struct shared *s, int w) { (void)w; return rq_queue_resume(s->queue); }
static int op_max_concurrent(struct shared *s, int w) { return rq_queue_set_max_concurrent(s->queue, (size_t)(w & 1)); }
static int op_max_per_host(struct shared *s, int w) { return rq_queue_set_max_per_host(s->queue, (size_t)(w & 1)); }
static int op_rate_limit(struct shared *s, int w) { return rq_queue_set_rate_limit(s->queue, (unsigned)(w & 1), 0.05, 0); }
static int op_priority(struct shared *s, int w) {
    return rq_request_set_priority(s->request, (w & 1) ? RQ_PRIORITY_HIGH : RQ_PRIORITY_LOW);
}
static int op_duplicates(struct shared *s, int w) {
    return rq_queue_set_duplicates(s->queue, (w & 1) ? RQ_DUPLICATES_ALLOW : RQ_DUPLICATES_COALESCE);
}
/* The queue's defaults changed while requests are added and run (the handle is the queue's). */
static int op_defaults(struct shared *s, int w) {
    rq_request *defaults;
    int rc = rq_queue_get_defaults(s->queue, &defaults);
    if (rc != RQ_OK)
        return rc;
    /* (A queue freed by the other thread takes its defaults handle with it: then a freed handle.) */
    rc = rq_request_set_idle_timeout(defaults, (w & 1) ? 30 : 60);
    if (rc == RQ_OK)
        rc = rq_request_set_header(defaults, "X-Race", (w & 1) ? "1" : "2");
    return rc;
}
static int op_cookies(struct shared *s, int w) {
    char *text;
    if (w & 1)
        return rq_queue_cookies_clear(s->queue);
    int rc = rq_queue_cookies_list(s->queue, &text);
    if (rc == RQ_OK)
        rq_string_free(text);
    return rc;
}
/* A setter of the request's configuration: taken while it is new, refused once it was added. */
static int op_set_header(struct shared *s, int w) { return rq_request_set_header(s->request, "X-Race", (w & 1) ? "a" : "b"); }
static int op_wait_idle(struct shared *s, int w) { (void)w; return rq_queue_wait_idle(s->queue, 0.01); }
static int op_dispatch(struct shared *s, int w) { (void)w; return rq_queue_dispatch(s->queue, 0, NULL); }
static int op_auth_credential(struct shared *s, int w) {
    (void)w;
    rq_auth_challenge *c = atomic_load(&s->challenge);
    if (!c)
        return RQ_ERR_INVALID_HANDLE;
    int rc = rq_auth_use_credential(c, "u", "p");
    if (rc == RQ_OK)
        atomic_fetch_add(&s->answers, 1);
    return rc;
}
static int op_auth_cancel(struct shared *s, int w) {
    (void)w;
    rq_auth_challenge *c = atomic_load(&s->challenge);
    if (!c)
        return RQ_ERR_INVALID_HANDLE;
    int rc = rq_auth_cancel(c);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->answers, 1);
    return rc;
}
static int op_auth_continue(struct shared *s, int w) {
    (void)w;
    rq_auth_challenge *c = atomic_load(&s->challenge);
    if (!c)
        return RQ_ERR_INVALID_HANDLE;
    int rc = rq_auth_continue_without(c);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->answers, 1);
    return rc;
}
static int op_snapshot(struct shared *s, int w) {
    rq_request **list;
    size_t count;
    (void)w;
    int rc = rq_queue_snapshot(s->queue, &list, &count);
    if (rc != RQ_OK)
        return rc;
    for (size_t i = 0; i < count; i++) {
        rq_request_state state;
        void *context;
        int r1 = rq_request_get_state(list[i], &state);
        int r2 = rq_request_get_context(list[i], &context);
        CHECK((r1 == RQ_OK || r1 == RQ_ERR_INVALID_HANDLE) && (r2 == RQ_OK || r2 == RQ_ERR_INVALID_HANDLE),
              "snapshot entry: %s, %s", rq_result_str(r1), rq_result_str(r2));
    }
    rq_snapshot_free(list);
    return RQ_OK;
}
/* Reads every field of the response retained by the completion (the lazily made ones too). */
static int op_read_response(struct shared *s, int w) {
    const rq_response *r = atomic_load(&s->retained);
    (void)w;
    if (!r)
        return RQ_OK;
    size_t size, n = rq_response_header_count(r);
    const uint8_t *body = rq_response_body(r, &size);
    CHECK(body != NULL && rq_response_url(r) != NULL && rq_response_error_message(r) != NULL, "response fields");
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        CHECK_OK(rq_response_header_at(r, i, &name, &value));
    }
    (void)rq_response_header(r, "content-length");
    return RQ_OK;
}
static int op_retain_release(struct shared *s, int w) {
    const rq_response *r = atomic_load(&s->retained);
    (void)w;
    if (r) {
        CHECK(rq_response_retain(r) == r, "rq_response_retain");
        (void)rq_response_status(r);
        rq_response_release(r);
    }
    return RQ_OK;
}

#define Q_GONE (RC(RQ_ERR_INVALID_HANDLE))
static const struct op ops[] = {
    {"add", op_add, RC(RQ_OK) | RC(RQ_ERR_ALREADY_ADDED) | RC(RQ_ERR_QUEUE_CLOSED) | Q_GONE},
    {"start", op_start, RC(RQ_OK) | RC(RQ_ERR_ALREADY_ADDED) | Q_GONE},
    {"cancel", op_cancel, RC(RQ_OK) | RC(RQ_ERR_NOT_ACTIVE) | Q_GONE},
    {"request_free", op_request_free, RC(RQ_OK) | Q_GONE},
    {"queue_free", op_queue_free, RC(RQ_OK) | Q_GONE},
    {"cancel_all", op_cancel_all, RC(RQ_OK) | Q_GONE},
    {"cancel_tag", op_cancel_tag, RC(RQ_OK) | Q_GONE},
    {"suspend", op_suspend, RC(RQ_OK) | Q_GONE},
    {"resume", op_resume, RC(RQ_OK) | Q_GONE},
    {"set_max_concurrent", op_max_concurrent, RC(RQ_OK) | Q_GONE},
    {"set_max_per_host", op_max_per_host, RC(RQ_OK) | Q_GONE},
    {"set_rate_limit", op_rate_limit, RC(RQ_OK) | Q_GONE},
    {"set_priority", op_priority, RC(RQ_OK) | RC(RQ_ERR_NOT_ACTIVE) | Q_GONE},
    {"wait_idle", op_wait_idle, RC(RQ_OK) | RC(RQ_ERR_TIMED_OUT) | Q_GONE},
    {"dispatch", op_dispatch, RC(RQ_OK) | RC(RQ_ERR_WRONG_DELIVERY) | Q_GONE},
    {"auth_use_credential", op_auth_credential, RC(RQ_OK) | Q_GONE},
    {"auth_cancel", op_auth_cancel, RC(RQ_OK) | Q_GONE},
    {"auth_continue_without", op_auth_continue, RC(RQ_OK) | Q_GONE},
    {"snapshot", op_snapshot, RC(RQ_OK) | Q_GONE},
    {"read_response", op_read_response, RC(RQ_OK)},
    {"retain_release", op_retain_release, RC(RQ_OK)},
    /* From here on, with the "retrying" and "churning" states: in every fourth round, from the
     * second, only. */
#define OP_CORE 21 /* the operations above */
    {"set_duplicates", op_duplicates, RC(RQ_OK) | Q_GONE},
    {"defaults", op_defaults, RC(RQ_OK) | RC(RQ_ERR_QUEUE_CLOSED) | Q_GONE},
    {"cookies", op_cookies, RC(RQ_OK) | RC(RQ_ERR_QUEUE_CLOSED) | Q_GONE},
    {"set_header", op_set_header, RC(RQ_OK) | RC(RQ_ERR_REQUEST_FROZEN) | Q_GONE},
};
#define OP_COUNT ((int)(sizeof ops / sizeof ops[0]))

/* ---- workers, barrier, watchdog ------------------------------------------------------------ */

#define WORKERS 2
static pthread_barrier_t go, done;
static struct shared *current;
static const struct op *current_ops[WORKERS];
static atomic_int stopping;
static atomic_int arrived;            /* workers at the start line of the current iteration */
static atomic_long calls;
static atomic_int failures;
static char where[256];               /* the pair and state under way, for messages */
static _Atomic double phase_started;  /* rqt_now() when the current iteration began */
static const double WATCHDOG = 30.0;

#define REPORT(...)                                                                                \
    do {                                                                                           \
        if (atomic_fetch_add(&failures, 1) < 30) {                                                 \
            fprintf(stderr, "races: FAIL [%s]: ", where);                                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static void *worker(void *arg) {
    int index = (int)(intptr_t)arg;
    rel_rng rng;
    rel_rng_seed(&rng, (uint64_t)index + 1);
    for (;;) {
        pthread_barrier_wait(&go);
        if (atomic_load(&stopping))
            return NULL;
        const struct op *op = current_ops[index];
        /* Both workers are awake now: they meet at a spinning start line (a sleeping barrier
         * wakes threads microseconds apart), then one of them takes a small random head start,
         * so that every interleaving of the two calls comes up. */
        atomic_fetch_add(&arrived, 1);
        while (atomic_load(&arrived) < WORKERS) {
        }
        unsigned head = rel_below(&rng, 3) == 0 ? 0 : rel_below(&rng, 400);
        for (volatile unsigned spin = head; spin > 0; spin--) {
        }
        int rc = op->run(current, index);
        atomic_fetch_add(&calls, 1);
        if (rc < 0 || rc > 31 || !(op->allowed & RC(rc)))
            REPORT("%s returned %d (%s)", op->name, rc, rq_result_str(rc));
        pthread_barrier_wait(&done);
    }
}

static void *watchdog(void *arg) {
    (void)arg;
    while (!atomic_load(&stopping)) {
        rqt_sleep(0.25);
        double started = atomic_load(&phase_started);
        if (started > 0 && rqt_now() - started > WATCHDOG) {
            fprintf(stderr, "races: FAIL [%s]: still not done after %.0f s (a hang)\n", where, WATCHDOG);
            fflush(stderr);
            _exit(1);
        }
    }
    return NULL;
}

/* Waits for `cond`, dispatching the queue's callbacks if it is in dispatch mode. */
#define SETTLE(s, cond)                                                                            \
    do {                                                                                           \
        while (!(cond)) {                                                                          \
            if ((s)->dispatch)                                                                     \
                rq_queue_dispatch((s)->queue, 0, NULL);                                            \
            rqt_sleep(0.0005);                                                                     \
        }                                                                                          \
    } while (0)

/* ---- one iteration ------------------------------------------------------------------------- */

static const char *base;

static struct shared *prepare(enum state state, rq_delivery mode) {
    struct shared *s = calloc(1, sizeof *s);
    char *url;
    CHECK(s != NULL, "out of memory");
    s->dispatch = mode == RQ_DELIVERY_DISPATCH;
    CHECK_OK(rq_queue_new(mode, &s->queue));
    switch (state) {
    case S_RUNNING:
    case S_COALESCED: url = rqt_url(base, "/delay?s=2"); break;
    case S_CHALLENGED: url = rqt_url(base, "/basic-auth/u/p"); break;
    case S_RETRYING:
    case S_CHURNING: url = rqt_url(base, "/reset"); break;
    default: url = rqt_url(base, "/bytes?n=64"); break;
    }
    CHECK_OK(rq_request_new(url, &s->request));
    free(url);
    CHECK_OK(rq_request_set_completion(s->request, on_done, s, on_finalize));
    CHECK_OK(rq_request_set_download_progress(s->request, on_progress));
    CHECK_OK(rq_request_set_auth_handler(s->request, on_challenge));
    CHECK_OK(rq_request_set_tag(s->request, "race"));
    if (state == S_RETRYING || state == S_CHURNING) {
        /* A lost connection, retried after 60 s (the calls meet it in the delay), or after 1 ms
         * without end (they meet it in its delay, at its retry timer, or starting an attempt). */
        CHECK_OK(rq_request_set_retry(s->request, 1));
        CHECK_OK(rq_request_set_retry_delay(s->request, state == S_RETRYING ? 60 : 0.001));
    }
    if (state == S_NEW)
        return s;
    if (state == S_WAITING)
        CHECK_OK(rq_queue_suspend(s->queue));
    if (state == S_COALESCED) {
        rq_request *leader;
        s->leader = calloc(1, sizeof *s->leader);
        CHECK(s->leader != NULL, "out of memory");
        url = rqt_url(base, "/delay?s=2");
        CHECK_OK(rq_request_new(url, &leader));
        free(url);
        CHECK_OK(rq_request_set_completion(leader, on_leader_done, s->leader, on_leader_finalize));
        CHECK_OK(rq_queue_set_duplicates(s->queue, RQ_DUPLICATES_COALESCE));
        CHECK_OK(rq_add(s->queue, leader));
        CHECK_OK(rq_request_free(leader));
    }
    CHECK_OK(rq_add(s->queue, s->request));
    atomic_store(&s->accepted, 1);
    rq_request_state rs = RQ_STATE_NEW;
    switch (state) {
    case S_RUNNING:
    case S_COALESCED:
        SETTLE(s, rq_request_get_state(s->request, &rs) == RQ_OK && rs == RQ_STATE_RUNNING);
        if (state == S_COALESCED) {
            rq_queue_stats stats = {.size = sizeof stats};
            CHECK_OK(rq_queue_get_stats(s->queue, &stats));
            CHECK(stats.coalesced == 1, "the request did not join its leader's transfer");
        }
        break;
    case S_CHALLENGED: SETTLE(s, atomic_load(&s->challenge) != NULL); break;
    case S_RETRYING:
    case S_CHURNING: {
        rq_queue_stats stats = {.size = sizeof stats};
        SETTLE(s, rq_queue_get_stats(s->queue, &stats) == RQ_OK && stats.retried >= 1);
        break;
    }
    case S_COMPLETED: SETTLE(s, atomic_load(&s->completions) == 1 && atomic_load(&s->finalized) == 1); break;
    default: break;
    }
    return s;
}

/* What must hold once everything of the iteration is over. */
static void judge(struct shared *s) {
    int accepted = atomic_load(&s->accepted), completions = atomic_load(&s->completions);
    int finalized = atomic_load(&s->finalized);
    if (accepted > 1)
        REPORT("accepted %d times", accepted);
    if (completions != accepted)
        REPORT("%d completions for %d acceptances", completions, accepted);
    if (finalized != 1)
        REPORT("finalizer ran %d times", finalized);
    if (accepted && atomic_load(&s->completions_at_finalize) != 1)
        REPORT("finalizer ran after %d completions (must be after the one completion)",
               atomic_load(&s->completions_at_finalize));
    if (atomic_load(&s->late_callbacks))
        REPORT("%d callbacks after the finalizer", atomic_load(&s->late_callbacks));
    if (atomic_load(&s->request_freed) != 1)
        REPORT("rq_request_free returned RQ_OK %d times", atomic_load(&s->request_freed));
    if (atomic_load(&s->queue_freed) != 1)
        REPORT("rq_queue_free returned RQ_OK %d times", atomic_load(&s->queue_freed));
    if (atomic_load(&s->answers) > 1)
        REPORT("%d answers to one challenge accepted", atomic_load(&s->answers));
    if (s->leader && (atomic_load(&s->leader->completions) != 1 || atomic_load(&s->leader->finalized) != 1))
        REPORT("the coalesced request's leader: %d completions, %d finalizers", atomic_load(&s->leader->completions),
               atomic_load(&s->leader->finalized));
}

static void finish(struct shared *s) {
    /* What the operations left: a second free of either gets RQ_ERR_INVALID_HANDLE. */
    int rc = rq_queue_free(s->queue);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->queue_freed, 1);
    else if (rc != RQ_ERR_INVALID_HANDLE)
        REPORT("final rq_queue_free: %s", rq_result_str(rc));
    rc = rq_request_free(s->request);
    if (rc == RQ_OK)
        atomic_fetch_add(&s->request_freed, 1);
    else if (rc != RQ_ERR_INVALID_HANDLE)
        REPORT("final rq_request_free: %s", rq_result_str(rc));
    /* A request started on its own completes on the library's standalone queue (a finalizer
     * that never runs is a hang, which the watchdog reports). */
    while (atomic_load(&s->finalized) == 0 || atomic_load(&s->completions) < atomic_load(&s->accepted))
        rqt_sleep(0.0005);
    judge(s);
}

static void usage(void) {
    fprintf(stderr, "usage: races [--rounds N] [--only OP] [--skip OP] BASE_URL\n");
    exit(2);
}

int main(int argc, char **argv) {
    int rounds = 2;
    const char *only = NULL, *skip = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc)
            skip = argv[++i];
        else if (argv[i][0] == '-')
            usage();
        else
            base = argv[i];
    }
    if (!base || rounds < 1)
        usage();

    pthread_t threads[WORKERS], dog;
    pthread_barrier_init(&go, NULL, WORKERS + 1);
    pthread_barrier_init(&done, NULL, WORKERS + 1);
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
    CHECK(pthread_create(&dog, NULL, watchdog, NULL) == 0, "pthread_create");

    double started = rqt_now();
    size_t kept_count = 0, kept_capacity = 1024;
    struct shared **kept = malloc(kept_capacity * sizeof *kept);
    int pairs = 0;
    CHECK(kept != NULL, "out of memory");
    for (int round = 0; round < rounds; round++) {
        for (int a = 0; a < OP_COUNT; a++) {
            for (int b = a; b < OP_COUNT; b++) {
                if (only && strcmp(ops[a].name, only) != 0 && strcmp(ops[b].name, only) != 0)
                    continue;
                if (skip && (strcmp(ops[a].name, skip) == 0 || strcmp(ops[b].name, skip) == 0))
                    continue;
                /* The later operations and state add about half as many iterations again: they
                 * run in rounds 1, 5, 9... (not in a single round, the TSan run's). */
                int extended = round % 4 == 1;
                if (b >= OP_CORE && !extended)
                    continue;
                if (round == (b >= OP_CORE))
                    pairs++;
                for (int st = 0; st < S_COUNT; st++) {
                    if (st >= S_RETRYING && !extended)
                        continue;
                    static const char *const mode_names[] = {"threaded", "dispatch", "inline"};
                    rq_delivery mode = (rq_delivery)((round + a + b + st) % 3);
                    snprintf(where, sizeof where, "%s x %s, %s request, %s queue", ops[a].name, ops[b].name,
                             state_names[st], mode_names[mode]);
                    atomic_store(&phase_started, rqt_now());
                    struct shared *s = prepare((enum state)st, mode);
                    current = s;
                    current_ops[0] = &ops[a];
                    current_ops[1] = &ops[b];
                    atomic_store(&arrived, 0);
                    pthread_barrier_wait(&go);
                    pthread_barrier_wait(&done);
                    finish(s);
                    const rq_response *r = atomic_load(&s->retained);
                    if (r)
                        rq_response_release(r);
                    if (kept_count == kept_capacity) {
                        kept_capacity *= 2;
                        kept = realloc(kept, kept_capacity * sizeof *kept);
                        CHECK(kept != NULL, "out of memory");
                    }
                    kept[kept_count++] = s;
                    atomic_store(&phase_started, 0.0);
                }
            }
        }
    }
    /* Nothing may arrive after an iteration was judged: judge every one again. */
    snprintf(where, sizeof where, "re-check after all iterations");
    for (size_t i = 0; i < kept_count; i++) {
        judge(kept[i]);
        free(kept[i]->leader);
        free(kept[i]);
    }
    free(kept);
    atomic_store(&stopping, 1);
    pthread_barrier_wait(&go);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(threads[i], NULL);
    pthread_join(dog, NULL);
    printf("races: ops=%d pairs=%d states=%d iterations=%zu calls=%ld failures=%d seconds=%.1f\n", OP_COUNT, pairs,
           S_COUNT, kept_count, atomic_load(&calls), atomic_load(&failures), rqt_now() - started);
    return atomic_load(&failures) ? 1 : 0;
}
