/*
 * test_inline.c: RQ_DELIVERY_INLINE, callbacks on the queue's engine thread.
 *  1. A refill chain (each completion adds the next request, max_concurrent 1, as libcurl's own
 *     examples do): every request completes once, in order; every callback runs on one thread,
 *     named "rq-engine" (the library names its engine threads so), not the caller's.
 *  2. Inside a callback: rq_queue_free and rq_queue_wait_idle of its own queue return
 *     RQ_ERR_WOULD_DEADLOCK, rq_queue_dispatch and rq_queue_get_fd RQ_ERR_WRONG_DELIVERY; adds,
 *     limits, suspend and resume work.
 *  3. rq_queue_free from another thread with two requests held running by the server and four
 *     waiting: each completes exactly once, cancelled, before the call returns; none after.
 *  4. A streamed body: the pieces are the exact body, the head before them; each piece lies in
 *     libcurl's own buffer (all of a 4 MiB body inside one 256 KiB region); a non-zero return
 *     cancels (no piece after it).
 *  5. fork(): in the child, calls on the inherited inline queue say RQ_ERR_QUEUE_CLOSED, its free
 *     releases it, and a new inline queue works.
 *
 *   test_inline BASE_URL
 */
#include "rqtest.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *base;

/* The name of the calling thread (/proc/thread-self/comm), without the newline. */
static void thread_name(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/thread-self/comm", "r");
    if (!f)
        return;
    if (!fgets(out, (int)size, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* ---- 1 and 2. refill chain, calls from inside --------------------------------------------------- */

enum { CHAIN = 50 };

static rq_queue *chain_queue;
static pthread_t main_thread, callback_thread;
static atomic_int chain_done, chain_order_ok = 1, chain_thread_ok = 1, chain_freed;
static rq_result inside[8];

static void add_link(int index);

static void on_link(void *context, rq_request *request, const rq_response *response) {
    int index = (int)(intptr_t)context;
    (void)request;
    char name[32];
    thread_name(name, sizeof name);
    if (strcmp(name, "rq-engine") != 0 || pthread_equal(pthread_self(), main_thread))
        atomic_store(&chain_thread_ok, 0);
    if (index == 0)
        callback_thread = pthread_self();
    else if (!pthread_equal(pthread_self(), callback_thread))
        atomic_store(&chain_thread_ok, 0);
    if (atomic_load(&chain_done) != index || rq_response_status(response) != 200)
        atomic_store(&chain_order_ok, 0);
    if (index == 0) {
        int fd = -1;
        inside[0] = rq_queue_free(chain_queue);
        inside[1] = rq_queue_wait_idle(chain_queue, 0);
        inside[2] = rq_queue_dispatch(chain_queue, 0, NULL);
        inside[3] = rq_queue_get_fd(chain_queue, &fd);
        inside[4] = rq_queue_set_max_concurrent(chain_queue, 1);
        inside[5] = rq_queue_suspend(chain_queue);
        inside[6] = rq_queue_resume(chain_queue);
    }
    atomic_fetch_add(&chain_done, 1);
    if (index + 1 < CHAIN)
        add_link(index + 1);
}

static void on_link_free(void *context) {
    (void)context;
    atomic_fetch_add(&chain_freed, 1);
}

static void add_link(int index) {
    char *url = rqt_url(base, "/bytes?n=32&id=inline-chain-%d", index);
    rq_request *r;
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_completion(r, on_link, (void *)(intptr_t)index, on_link_free));
    CHECK_OK(rq_add(chain_queue, r));
    CHECK_OK(rq_request_free(r));
    free(url);
}

static void test_chain(void) {
    main_thread = pthread_self();
    CHECK_OK(rq_queue_new(RQ_DELIVERY_INLINE, &chain_queue));
    CHECK_OK(rq_queue_set_max_concurrent(chain_queue, 1));
    add_link(0);
    CHECK_OK(rq_queue_wait_idle(chain_queue, WATCHDOG_SECONDS));
    CHECK(atomic_load(&chain_done) == CHAIN, "%d of %d completed", atomic_load(&chain_done), CHAIN);
    CHECK(atomic_load(&chain_freed) == CHAIN, "%d finalizers", atomic_load(&chain_freed));
    CHECK(atomic_load(&chain_order_ok), "completions out of order");
    CHECK(atomic_load(&chain_thread_ok), "a callback ran off the engine thread");
    CHECK(inside[0] == RQ_ERR_WOULD_DEADLOCK, "free inside: %s", rq_result_str(inside[0]));
    CHECK(inside[1] == RQ_ERR_WOULD_DEADLOCK, "wait_idle inside: %s", rq_result_str(inside[1]));
    CHECK(inside[2] == RQ_ERR_WRONG_DELIVERY, "dispatch inside: %s", rq_result_str(inside[2]));
    CHECK(inside[3] == RQ_ERR_WRONG_DELIVERY, "get_fd inside: %s", rq_result_str(inside[3]));
    CHECK(inside[4] == RQ_OK && inside[5] == RQ_OK && inside[6] == RQ_OK, "limits, suspend, resume inside");
    int fd;
    CHECK_RC(rq_queue_get_fd(chain_queue, &fd), RQ_ERR_WRONG_DELIVERY);
    CHECK_RC(rq_queue_dispatch(chain_queue, 0, NULL), RQ_ERR_WRONG_DELIVERY);
    char *log = rqt_get(base, "/_/log");
    for (int i = 0; i < CHAIN; i++) {
        char id[64];
        snprintf(id, sizeof id, "inline-chain-%d", i);
        CHECK(rqt_log_count_id(log, id) == 1, "%s seen %d times by the server", id, rqt_log_count_id(log, id));
    }
    free(log);
    CHECK_OK(rq_queue_free(chain_queue));
    printf("chain: %d requests in order on the engine thread\n", CHAIN);
}

/* ---- 3. free from another thread ------------------------------------------------------------- */

enum { HELD = 6 };
static atomic_int held_done[HELD], held_cancelled;

static void on_held(void *context, rq_request *request, const rq_response *response) {
    (void)request;
    atomic_fetch_add(&held_done[(intptr_t)context], 1);
    if (rq_response_outcome(response) == RQ_OUTCOME_CANCELLED)
        atomic_fetch_add(&held_cancelled, 1);
}

static void test_free_from_another_thread(void) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_INLINE, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 2));
    for (intptr_t i = 0; i < HELD; i++) {
        char *url = rqt_url(base, "/hold?key=inline-free&n=4&id=inline-free-%d", (int)i);
        rq_request *r;
        CHECK_OK(rq_request_new(url, &r));
        CHECK_OK(rq_request_set_completion(r, on_held, (void *)i, NULL));
        CHECK_OK(rq_add(q, r));
        CHECK_OK(rq_request_free(r));
        free(url);
    }
    /* Both running requests reached the server. */
    for (double deadline = rqt_now() + WATCHDOG_SECONDS;;) {
        char *log = rqt_get(base, "/_/log");
        int seen = rqt_log_count_id(log, "inline-free-0") + rqt_log_count_id(log, "inline-free-1");
        free(log);
        if (seen == 2)
            break;
        CHECK(rqt_now() < deadline, "the held requests never reached the server");
        rqt_sleep(0.01);
    }
    CHECK_OK(rq_queue_free(q));
    int snapshot[HELD];
    for (int i = 0; i < HELD; i++) {
        snapshot[i] = atomic_load(&held_done[i]);
        CHECK(snapshot[i] == 1, "request %d: %d completions when rq_queue_free returned", i, snapshot[i]);
    }
    CHECK(atomic_load(&held_cancelled) == HELD, "%d cancelled", atomic_load(&held_cancelled));
    free(rqt_get(base, "/_/release?key=inline-free"));
    for (int i = 0; i < HELD; i++) CHECK(atomic_load(&held_done[i]) == 1, "request %d completed again", i);
    printf("free from another thread: %d requests, one completion each\n", HELD);
}

/* ---- 4. streamed bodies ----------------------------------------------------------------------- */

struct stream {
    size_t expect;
    size_t bytes;
    int pieces, head_after_piece, heads, bad, done, stop_at;
    uintptr_t low, high;
    rq_outcome outcome;
    int pieces_at_done;
};

static void on_head(void *context, rq_request *request, const rq_response *head) {
    struct stream *s = context;
    (void)request;
    (void)head;
    s->heads++;
    if (s->pieces > 0)
        s->head_after_piece = 1;
}

static int on_piece(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    struct stream *s = context;
    (void)request;
    if (offset != s->bytes || s->done)
        s->bad = 1;
    for (size_t i = 0; i < size; i++)
        if (data[i] != (uint8_t)RQT_PATTERN[(offset + i) % 36]) {
            s->bad = 1;
            break;
        }
    uintptr_t start = (uintptr_t)data;
    if (s->pieces == 0 || start < s->low)
        s->low = start;
    if (start + size > s->high)
        s->high = start + size;
    s->bytes += size;
    s->pieces++;
    return s->stop_at > 0 && s->pieces == s->stop_at ? 1 : 0;
}

static void on_stream_done(void *context, rq_request *request, const rq_response *response) {
    struct stream *s = context;
    (void)request;
    s->outcome = rq_response_outcome(response);
    s->pieces_at_done = s->pieces;
    s->done++;
}

static void stream(struct stream *s, size_t size) {
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_INLINE, &q));
    char *url = rqt_url(base, "/bytes?n=%zu", size);
    rq_request *r;
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_request_set_completion(r, on_stream_done, s, NULL));
    CHECK_OK(rq_request_set_body_callback(r, on_piece));
    CHECK_OK(rq_request_set_head_callback(r, on_head));
    CHECK_OK(rq_add(q, r));
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(q));
    CHECK(s->done == 1, "%d completions", s->done);
    free(url);
}

static void test_stream(void) {
    struct stream s = {0};
    size_t n = (size_t)4 << 20;
    stream(&s, n);
    CHECK(s.outcome == RQ_OUTCOME_OK, "outcome %s", rq_outcome_str((int)s.outcome));
    CHECK(s.bytes == n && !s.bad, "%zu bytes streamed of %zu (bad: %d)", s.bytes, n, s.bad);
    CHECK(s.heads == 1 && !s.head_after_piece, "the head came after a piece");
    CHECK(s.pieces > 1 && s.pieces == s.pieces_at_done, "%d pieces", s.pieces);
    CHECK(s.high - s.low <= (uintptr_t)256 << 10,
          "pieces spread over %zu bytes: not libcurl's one buffer", (size_t)(s.high - s.low));

    struct stream c = {0};
    c.stop_at = 2;
    stream(&c, (size_t)8 << 20);
    CHECK(c.outcome == RQ_OUTCOME_CANCELLED, "outcome %s", rq_outcome_str((int)c.outcome));
    CHECK(c.pieces == 2 && c.pieces_at_done == 2, "%d pieces after a non-zero return", c.pieces);
    printf("stream: %zu bytes in %d pieces of libcurl's buffer\n", s.bytes, s.pieces);
}

/* ---- 5. fork ---------------------------------------------------------------------------------- */

#ifndef RQT_TSAN
static atomic_int fresh_done;

static void on_fresh(void *context, rq_request *request, const rq_response *response) {
    (void)context;
    (void)request;
    if (rq_response_status(response) == 200)
        atomic_fetch_add(&fresh_done, 1);
}
#endif

static void test_fork(void) {
#ifdef RQT_TSAN
    printf("fork: skipped under ThreadSanitizer\n");
#else
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_INLINE, &q));
    char *url = rqt_url(base, "/hold?key=inline-fork&n=2&id=inline-fork");
    rq_request *r;
    CHECK_OK(rq_request_new(url, &r));
    CHECK_OK(rq_add(q, r));
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        int ok = rq_queue_set_max_concurrent(q, 3) == RQ_ERR_QUEUE_CLOSED && rq_queue_free(q) == RQ_OK &&
                 rq_queue_free(q) == RQ_ERR_INVALID_HANDLE;
        rq_queue *fresh;
        ok = ok && rq_queue_new(RQ_DELIVERY_INLINE, &fresh) == RQ_OK;
        rq_request *f;
        ok = ok && rq_request_new(url, &f) == RQ_OK;
        if (ok) {
            char *small = rqt_url(base, "/bytes?n=3&id=inline-fork-child");
            rq_request_free(f);
            ok = rq_request_new(small, &f) == RQ_OK && rq_request_set_completion(f, on_fresh, NULL, NULL) == RQ_OK &&
                 rq_add(fresh, f) == RQ_OK && rq_queue_wait_idle(fresh, WATCHDOG_SECONDS) == RQ_OK &&
                 atomic_load(&fresh_done) == 1 && rq_queue_free(fresh) == RQ_OK;
        }
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);
    free(rqt_get(base, "/_/release?key=inline-fork"));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    rq_request_state state;
    CHECK_OK(rq_request_get_state(r, &state));
    CHECK(state == RQ_STATE_COMPLETED, "the parent's request did not complete");
    CHECK_OK(rq_request_free(r));
    CHECK_OK(rq_queue_free(q));
    free(url);
    printf("fork: the child released the inherited inline queue and used a new one\n");
#endif
}

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    test_chain();
    test_free_from_another_thread();
    test_stream();
    test_fork();
    printf("%d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
