/*
 * test_wakeup.c: no add is left waiting for the engine. Eight sources each keep one request in
 * flight (K = 1 each), on a queue whose limit lets every add go straight to the engine: four
 * chains, where each completion callback adds the chain's next request, and four plain threads
 * that add one, wait for its completion, and add the next. The engine thread keeps going idle and
 * blocking while adds arrive from the delivering thread and from the others. An add that finds
 * the engine awake, or already woken, does not wake it; one that raced with the engine going to
 * sleep and was not seen would leave its request waiting, and an idle engine blocks until woken:
 * the test would hang there. It runs in the three delivery modes and checks that every request
 * completes, with status 200 and the right body, and (with_fixture.py) that the server saw each
 * exactly once. A watchdog turns a hang into a failure that says how many completed.
 * Then the idle engine's spin (Engine.waitForWork): several queues at K = 1, each with one
 * chain, so that each engine goes idle after every completion and spins a little for the add the
 * callback makes. The callbacks add after delays around the spin's bound (50 us: before it, just
 * as it gives up, after it, and with no delay), and some take long enough that the engine stops
 * spinning for a while and blocks: an add that landed just as a spin gave up and was not seen
 * would hang its chain, which the watchdog reports. Both delivery modes.
 * Then an engine with nothing running, and no add to wake it, must wake up for its own timers:
 * the rate limit's next start, a retry's delay (an idle engine waits on a semaphore with the
 * nearest deadline as its timeout; a wait that missed it would hang the test).
 * Then a busy queue's batches (Queue.signalOwedEvents, Engine.run): at K = 1 with requests
 * waiting to start, the engine lets the events of its running transfers gather (64 events or
 * 1 ms) instead of handing them over before each wait. Nothing may be held while the engine
 * waits: with the server holding a transfer's body and requests waiting, the completion before it
 * and the held transfer's head must reach their callbacks, as must the completion of a waiting
 * request cancelled meanwhile; with the queue then suspended (requests waiting, none can start)
 * and the held transfer released, its completion must reach the callback while the engine idles.
 * In dispatch mode the test thread runs the callbacks only when the descriptor says so. Both
 * modes; a hold that is never handed over hangs, which the watchdog reports.
 * Then, with a single file descriptor left to the process (too few for libcurl's wake-up socket
 * pair), rq_queue_new must either fail with RQ_ERR_SYSTEM or give a queue whose engine can be
 * woken: a request added to it once descriptors are back completes.
 *
 *   test_wakeup BASE_URL
 */
#include "rqtest.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <sys/resource.h>

enum { CHAINS = 4, ADDERS = 4, PER_SOURCE = 200, TOTAL = (CHAINS + ADDERS) * PER_SOURCE };

/* A source of requests: a chain (its completion callback adds the next) or an adder thread. */
struct source {
    int chain;
    atomic_int added; /* chain: requests added so far */
    sem_t done;       /* adder: posted by the completion of its request */
};

static const char *base;
static rq_queue *queue;
static atomic_int completed, failed;
static struct source sources[CHAINS + ADDERS];
static int mode_index; /* tells the server's log entries of the three runs apart */

static void on_done(void *context, rq_request *request, const rq_response *response);
static void on_spin_done(void *context, rq_request *request, const rq_response *response);

/* Adds one GET for 16 bytes on behalf of `source`. */
static void add_request(struct source *source) {
    char *url = rqt_url(base, "/bytes?n=16&wakeup=%d-%d", mode_index, (int)(source - sources));
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_done, source, NULL));
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    free(url);
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct source *source = context;
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    (void)request;
    if (rq_response_outcome(response) != RQ_OUTCOME_OK || rq_response_status(response) != 200 ||
        size != 16 || memcmp(body, "abcdefghijklmnop", 16) != 0) {
        fprintf(stderr, "request failed: %s (status %d, %zu bytes)\n", rq_response_error_message(response),
                rq_response_status(response), size);
        atomic_fetch_add(&failed, 1);
    }
    atomic_fetch_add(&completed, 1);
    if (!source->chain)
        CHECK(sem_post(&source->done) == 0, "sem_post");
    else if (atomic_fetch_add(&source->added, 1) < PER_SOURCE)
        add_request(source);
}

static void *adder(void *arg) {
    struct source *source = arg;
    for (int i = 0; i < PER_SOURCE; i++) {
        add_request(source);
        while (sem_wait(&source->done) != 0) CHECK(errno == EINTR, "sem_wait");
    }
    return NULL;
}

static void run(rq_delivery delivery, const char *name) {
    atomic_store(&completed, 0);
    atomic_store(&failed, 0);
    CHECK_OK(rq_queue_new(delivery, &queue));
    CHECK_OK(rq_queue_set_max_concurrent(queue, CHAINS + ADDERS));
    CHECK_OK(rq_queue_set_duplicates(queue, RQ_DUPLICATES_ALLOW));
    for (int c = 0; c < CHAINS; c++) {
        sources[c].chain = 1;
        atomic_store(&sources[c].added, 1);
        add_request(&sources[c]);
    }
    pthread_t threads[ADDERS];
    for (int i = 0; i < ADDERS; i++) {
        CHECK(sem_init(&sources[CHAINS + i].done, 0, 0) == 0, "sem_init");
        CHECK(pthread_create(&threads[i], NULL, adder, &sources[CHAINS + i]) == 0, "pthread_create");
    }
    /* Dispatch mode runs the callbacks here, in rq_queue_wait_idle: wait in slices so that the
     * chains go on while the adders add, until everything completed or the watchdog fires. */
    double deadline = rqt_now() + WATCHDOG_SECONDS;
    while (atomic_load(&completed) < TOTAL) {
        if (rqt_now() > deadline)
            FAIL("%s: %d of %d requests completed after %.0f s: an add was not seen by the engine", name,
                 atomic_load(&completed), TOTAL, WATCHDOG_SECONDS);
        rq_result rc = rq_queue_wait_idle(queue, 0.05);
        if (rc != RQ_OK && rc != RQ_ERR_TIMED_OUT) FAIL("%s: rq_queue_wait_idle: %s", name, rq_result_str(rc));
    }
    for (int i = 0; i < ADDERS; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0, "pthread_join");
        CHECK(sem_destroy(&sources[CHAINS + i].done) == 0, "sem_destroy");
    }
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK(atomic_load(&completed) == TOTAL, "%s: %d completions for %d requests", name, atomic_load(&completed),
          TOTAL);
    CHECK(atomic_load(&failed) == 0, "%s: %d requests failed", name, atomic_load(&failed));
    CHECK_OK(rq_queue_free(queue));
    printf("%s: %d requests completed\n", name, TOTAL);
}

enum { SPIN_QUEUES = 1, SPIN_PER_QUEUE = 600 };

/* The delays (us) a spin chain's callback waits before it adds the next request, in turn. */
static const int spin_delays[] = {0, 5, 20, 40, 47, 49, 50, 51, 53, 60, 100, 0, 250, 48, 52, 0, 1000};

struct spin_chain {
    rq_queue *queue;
    int index;
    atomic_int added, completed, failed;
};

static struct spin_chain spin_chains[SPIN_QUEUES];

/* A wait that does not sleep (the engine must not get a whole timeslice to itself). */
static void busy_wait_us(int us) {
    double until = rqt_now() + us / 1e6;
    while (rqt_now() < until) {
    }
}

static void add_spin_request(struct spin_chain *chain) {
    char *url = rqt_url(base, "/bytes?n=16&wakeup=spin%d-%d", mode_index, chain->index);
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_spin_done, chain, NULL));
    CHECK_OK(rq_add(chain->queue, request));
    CHECK_OK(rq_request_free(request));
    free(url);
}

static void on_spin_done(void *context, rq_request *request, const rq_response *response) {
    struct spin_chain *chain = context;
    size_t size = 0;
    (void)request;
    rq_response_body(response, &size);
    if (rq_response_outcome(response) != RQ_OUTCOME_OK || rq_response_status(response) != 200 || size != 16) {
        fprintf(stderr, "spin chain %d: a request failed: %s (status %d)\n", chain->index,
                rq_response_error_message(response), rq_response_status(response));
        atomic_fetch_add(&chain->failed, 1);
    }
    int done = atomic_fetch_add(&chain->completed, 1);
    if (atomic_load(&chain->added) < SPIN_PER_QUEUE) {
        int count = (int)(sizeof spin_delays / sizeof spin_delays[0]);
        busy_wait_us(spin_delays[(done + chain->index * 3) % count]);
        atomic_fetch_add(&chain->added, 1);
        add_spin_request(chain);
    }
}

/* Dispatch mode: each queue's callbacks run on a thread of its own, as soon as its descriptor
 * says so (a host's poll loop), until its chain has completed or the watchdog fires. */
static void *spin_dispatcher(void *arg) {
    struct spin_chain *chain = arg;
    int fd;
    CHECK_OK(rq_queue_get_fd(chain->queue, &fd));
    double deadline = rqt_now() + WATCHDOG_SECONDS;
    while (atomic_load(&chain->completed) < SPIN_PER_QUEUE && rqt_now() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) < 0) CHECK(errno == EINTR, "poll");
        CHECK_OK(rq_queue_dispatch(chain->queue, 0, NULL));
    }
    return NULL;
}

static void run_spin_chains(rq_delivery delivery, const char *name) {
    pthread_t dispatchers[SPIN_QUEUES];
    for (int i = 0; i < SPIN_QUEUES; i++) {
        struct spin_chain *chain = &spin_chains[i];
        chain->index = i;
        atomic_store(&chain->added, 1);
        atomic_store(&chain->completed, 0);
        atomic_store(&chain->failed, 0);
        CHECK_OK(rq_queue_new(delivery, &chain->queue));
        CHECK_OK(rq_queue_set_max_concurrent(chain->queue, 1));
        CHECK_OK(rq_queue_set_duplicates(chain->queue, RQ_DUPLICATES_ALLOW));
        add_spin_request(chain);
        if (delivery == RQ_DELIVERY_DISPATCH)
            CHECK(pthread_create(&dispatchers[i], NULL, spin_dispatcher, chain) == 0, "pthread_create");
    }
    double deadline = rqt_now() + WATCHDOG_SECONDS;
    for (int i = 0; i < SPIN_QUEUES; i++) {
        struct spin_chain *chain = &spin_chains[i];
        if (delivery == RQ_DELIVERY_DISPATCH) CHECK(pthread_join(dispatchers[i], NULL) == 0, "pthread_join");
        while (atomic_load(&chain->completed) < SPIN_PER_QUEUE && rqt_now() < deadline) {
            rq_result rc = rq_queue_wait_idle(chain->queue, 0.05);
            if (rc != RQ_OK && rc != RQ_ERR_TIMED_OUT)
                FAIL("%s spin chains: rq_queue_wait_idle: %s", name, rq_result_str(rc));
        }
        if (atomic_load(&chain->completed) < SPIN_PER_QUEUE)
            FAIL("%s spin chain %d: %d of %d requests completed after %.0f s: an add was not seen by a spinning "
                 "engine", name, i, atomic_load(&chain->completed), SPIN_PER_QUEUE, WATCHDOG_SECONDS);
    }
    for (int i = 0; i < SPIN_QUEUES; i++) {
        struct spin_chain *chain = &spin_chains[i];
        CHECK_OK(rq_queue_free(chain->queue));
        CHECK(atomic_load(&chain->completed) == SPIN_PER_QUEUE, "%s spin chain %d: %d completions for %d requests",
              name, i, atomic_load(&chain->completed), SPIN_PER_QUEUE);
        CHECK(atomic_load(&chain->failed) == 0, "%s spin chain %d: %d requests failed", name, i,
              atomic_load(&chain->failed));
    }
    printf("%s spin chains: %d requests completed\n", name, SPIN_QUEUES * SPIN_PER_QUEUE);
}

static atomic_int timed_done, timed_failed;

static void on_timed_done(void *context, rq_request *request, const rq_response *response) {
    size_t size = 0;
    (void)context;
    (void)request;
    rq_response_body(response, &size);
    if (rq_response_outcome(response) != RQ_OUTCOME_OK || rq_response_status(response) != 200 || size != 16) {
        fprintf(stderr, "idle timers: a request failed: %s (status %d)\n", rq_response_error_message(response),
                rq_response_status(response));
        atomic_fetch_add(&timed_failed, 1);
    }
    atomic_fetch_add(&timed_done, 1);
}

/* One start per 50 ms, one at a time: after each completion the engine has nothing running and
 * sleeps until the next token; then a request whose first attempt loses its connection, retried
 * after 50 ms with nothing else running. Nothing but the engine's own timeouts ends those waits. */
static void run_idle_timers(void) {
    enum { RATED = 6 };
    rq_queue *q;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &q));
    CHECK_OK(rq_queue_set_max_concurrent(q, 1));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    CHECK_OK(rq_queue_set_rate_limit(q, 1, 0.05, 0));
    for (int i = 0; i <= RATED; i++) {
        char *url = i < RATED ? rqt_url(base, "/bytes?n=16&wakeup=rate-%d", i)
                              : rqt_url(base, "/flaky?key=wakeup-retry&fail=1&mode=reset&n=16");
        rq_request *request;
        CHECK_OK(rq_request_new(url, &request));
        CHECK_OK(rq_request_set_completion(request, on_timed_done, NULL, NULL));
        if (i == RATED) {
            CHECK_OK(rq_request_set_retry(request, 1));
            CHECK_OK(rq_request_set_retry_delay(request, 0.05));
        }
        CHECK_OK(rq_add(q, request));
        CHECK_OK(rq_request_free(request));
        free(url);
    }
    WAIT_FOR(atomic_load(&timed_done) == RATED + 1,
             "idle timers: %d of %d requests completed (an idle engine missed its timer)",
             atomic_load(&timed_done), RATED + 1);
    CHECK(atomic_load(&timed_failed) == 0, "idle timers: %d requests failed", atomic_load(&timed_failed));
    CHECK_OK(rq_queue_free(q));
    printf("idle timers: %d requests completed\n", RATED + 1);
}

enum { RIPEN_WAITING = 3 };

/* The requests of a batch test: 0 completes at once, 1 is held by the server (its head comes
 * first), 2.. wait to start. */
static atomic_int ripen_done[2 + RIPEN_WAITING], ripen_heads, ripen_outcome[2 + RIPEN_WAITING];

static void on_ripen_done(void *context, rq_request *request, const rq_response *response) {
    (void)request;
    int index = (int)(intptr_t)context;
    atomic_store(&ripen_outcome[index], (int)rq_response_outcome(response));
    atomic_fetch_add(&ripen_done[index], 1);
}

static void on_ripen_head(void *context, rq_request *request, const rq_response *head) {
    (void)context;
    (void)request;
    (void)head;
    atomic_fetch_add(&ripen_heads, 1);
}

/* Until `cond`: threaded mode sleeps between looks; dispatch mode waits on the queue's descriptor
 * and runs the callbacks only once it is readable (an event the engine holds back leaves it
 * unreadable, and the watchdog fires). */
#define RIPEN_WAIT(q, fd, cond, ...)                                                               \
    do {                                                                                           \
        double ripen_deadline_ = rqt_now() + WATCHDOG_SECONDS;                                     \
        while (!(cond)) {                                                                          \
            if (rqt_now() > ripen_deadline_) FAIL(__VA_ARGS__);                                    \
            if ((fd) < 0) {                                                                        \
                rqt_sleep(0.002);                                                                  \
                continue;                                                                          \
            }                                                                                      \
            struct pollfd ripen_poll_ = {.fd = (fd), .events = POLLIN};                            \
            if (poll(&ripen_poll_, 1, 100) > 0) CHECK_OK(rq_queue_dispatch((q), 0, NULL));         \
        }                                                                                          \
    } while (0)

static void run_ripening_batches(rq_delivery delivery, const char *name) {
    enum { COUNT = 2 + RIPEN_WAITING };
    rq_queue *q;
    rq_request *requests[COUNT];
    int fd = -1;
    atomic_store(&ripen_heads, 0);
    CHECK_OK(rq_queue_new(delivery, &q));
    if (delivery == RQ_DELIVERY_DISPATCH) CHECK_OK(rq_queue_get_fd(q, &fd));
    CHECK_OK(rq_queue_set_max_concurrent(q, 1));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    for (int i = 0; i < COUNT; i++) {
        atomic_store(&ripen_done[i], 0);
        char *url = i == 1 ? rqt_url(base, "/hold?key=ripen-%s&n=16", name)
                           : rqt_url(base, "/bytes?n=16&ripen=%s-%d", name, i);
        CHECK_OK(rq_request_new(url, &requests[i]));
        CHECK_OK(rq_request_set_completion(requests[i], on_ripen_done, (void *)(intptr_t)i, NULL));
        if (i == 1) CHECK_OK(rq_request_set_head_callback(requests[i], on_ripen_head));
        CHECK_OK(rq_add(q, requests[i]));
        free(url);
    }
    /* The engine waits on the held transfer, requests waiting: what it produced before must come. */
    RIPEN_WAIT(q, fd, atomic_load(&ripen_done[0]) == 1 && atomic_load(&ripen_heads) == 1,
               "%s: the completion before a held transfer (%d) or its head (%d) held back while the engine waits",
               name, atomic_load(&ripen_done[0]), atomic_load(&ripen_heads));
    rq_request_state state;
    CHECK_OK(rq_request_get_state(requests[1], &state));
    CHECK(state == RQ_STATE_RUNNING, "%s: the held request is not running (state %d)", name, (int)state);
    CHECK_OK(rq_cancel(requests[COUNT - 1]));
    RIPEN_WAIT(q, fd, atomic_load(&ripen_done[COUNT - 1]) == 1, "%s: a cancelled waiting request never completed",
               name);
    CHECK(atomic_load(&ripen_outcome[COUNT - 1]) == RQ_OUTCOME_CANCELLED, "%s: the cancelled request's outcome is %d",
          name, atomic_load(&ripen_outcome[COUNT - 1]));
    /* Suspended: requests wait but none can start; the held transfer ends and the engine idles. */
    CHECK_OK(rq_queue_suspend(q));
    free(rqt_get(base, "/_/release?key=ripen-%s", name));
    RIPEN_WAIT(q, fd, atomic_load(&ripen_done[1]) == 1,
               "%s: the last completion before an idle, suspended engine was held back", name);
    CHECK(atomic_load(&ripen_outcome[1]) == RQ_OUTCOME_OK, "%s: the held request's outcome is %d", name,
          atomic_load(&ripen_outcome[1]));
    for (int i = 2; i < COUNT - 1; i++) {
        CHECK_OK(rq_request_get_state(requests[i], &state));
        CHECK(state == RQ_STATE_WAITING && atomic_load(&ripen_done[i]) == 0,
              "%s: request %d ran in a suspended queue (state %d)", name, i, (int)state);
    }
    CHECK_OK(rq_queue_resume(q));
    CHECK_OK(rq_queue_wait_idle(q, WATCHDOG_SECONDS));
    for (int i = 0; i < COUNT; i++) {
        CHECK(atomic_load(&ripen_done[i]) == 1, "%s: request %d completed %d times", name, i,
              atomic_load(&ripen_done[i]));
        CHECK_OK(rq_request_free(requests[i]));
    }
    CHECK_OK(rq_queue_free(q));
    printf("%s batches: nothing held while the engine waits or idles\n", name);
}

/* The dispatch descriptor's reset (Queue.endEventFDReset) when the host was not woken by the
 * write: a host calling rq_queue_dispatch over and over, without polling, may take a completion
 * while the engine's write for it is still on its way, and the dispatch that ran it must still
 * leave the descriptor unreadable once that write is made. Nothing else is written for the
 * request afterwards (a write is decided only while events are pending), so after each round the
 * descriptor must not be readable. */
enum { RESET_ROUNDS = 1000 };
static atomic_int reset_done;

static void on_reset_done(void *context, rq_request *request, const rq_response *response) {
    (void)context;
    (void)request;
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_OK && rq_response_status(response) == 200,
          "descriptor resets: a request failed: %s", rq_response_error_message(response));
    atomic_fetch_add(&reset_done, 1);
}

static void run_descriptor_resets(void) {
    rq_queue *q;
    int fd, readable_after = 0;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_DISPATCH, &q));
    CHECK_OK(rq_queue_get_fd(q, &fd));
    CHECK_OK(rq_queue_set_max_concurrent(q, 1));
    CHECK_OK(rq_queue_set_duplicates(q, RQ_DUPLICATES_ALLOW));
    char *url = rqt_url(base, "/bytes?n=16&wakeup=reset");
    for (int round = 0; round < RESET_ROUNDS; round++) {
        rq_request *request;
        CHECK_OK(rq_request_new(url, &request));
        CHECK_OK(rq_request_set_completion(request, on_reset_done, NULL, NULL));
        CHECK_OK(rq_add(q, request));
        CHECK_OK(rq_request_free(request));
        double deadline = rqt_now() + WATCHDOG_SECONDS;
        while (atomic_load(&reset_done) <= round) {
            if (rqt_now() > deadline) CHECK(0, "descriptor resets: request %d never completed", round);
            rq_result rc = rq_queue_dispatch(q, 0, NULL);
            if (rc != RQ_OK) CHECK_OK(rc);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0) readable_after++;
    }
    free(url);
    CHECK(readable_after == 0, "descriptor resets: readable with nothing pending after %d of %d rounds",
          readable_after, RESET_ROUNDS);
    CHECK_OK(rq_queue_free(q));
    printf("dispatch descriptor resets: unreadable after each of %d completions\n", RESET_ROUNDS);
}

static atomic_int short_done;

static void on_short_done(void *context, rq_request *request, const rq_response *response) {
    (void)context;
    (void)request;
    CHECK(rq_response_outcome(response) == RQ_OUTCOME_OK && rq_response_status(response) == 200,
          "descriptor shortage: the request failed: %s", rq_response_error_message(response));
    atomic_store(&short_done, 1);
}

/* rq_queue_new with one descriptor free. */
static void run_with_one_descriptor_left(void) {
    enum { LIMIT = 1024 };
    static int hoard[LIMIT];
    struct rlimit saved, low;
    CHECK(getrlimit(RLIMIT_NOFILE, &saved) == 0, "getrlimit");
    low = saved;
    if (low.rlim_cur > LIMIT) low.rlim_cur = LIMIT;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
    int null = open("/dev/null", O_RDONLY), count = 0, fd;
    CHECK(null >= 0, "open /dev/null");
    while (count < LIMIT && (fd = dup(null)) >= 0) hoard[count++] = fd;
    CHECK(count > 0 && count < LIMIT && errno == EMFILE, "could not use up the descriptors (%d)", count);
    close(hoard[--count]);
    rq_queue *q = NULL;
    rq_result rc = rq_queue_new(RQ_DELIVERY_THREADED, &q);
    while (count > 0) close(hoard[--count]);
    close(null);
    CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0, "setrlimit");
    if (rc != RQ_OK) {
        CHECK_RC(rc, RQ_ERR_SYSTEM);
        printf("one descriptor left: rq_queue_new gave RQ_ERR_SYSTEM\n");
        return;
    }
    /* A queue was made: its engine, idle by now, must still be woken by an add. */
    char *url = rqt_url(base, "/bytes?n=16&wakeup=shortage");
    rq_request *request;
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, on_short_done, NULL, NULL));
    CHECK_OK(rq_add(q, request));
    CHECK_OK(rq_request_free(request));
    free(url);
    WAIT_FOR(atomic_load(&short_done), "descriptor shortage: the request never completed (engine not woken)");
    CHECK_OK(rq_queue_free(q));
    printf("one descriptor left: the queue works\n");
}

int main(int argc, char **argv) {
    base = rqt_base_url(argc, argv);
    mode_index = 0;
    run(RQ_DELIVERY_THREADED, "threaded");
    mode_index = 1;
    run(RQ_DELIVERY_DISPATCH, "dispatch");
    mode_index = 2;
    run(RQ_DELIVERY_INLINE, "inline");
    mode_index = 0;
    run_spin_chains(RQ_DELIVERY_THREADED, "threaded");
    mode_index = 1;
    run_spin_chains(RQ_DELIVERY_DISPATCH, "dispatch");
    run_idle_timers();
    run_ripening_batches(RQ_DELIVERY_THREADED, "threaded");
    run_ripening_batches(RQ_DELIVERY_DISPATCH, "dispatch");
    run_descriptor_resets();
    run_with_one_descriptor_left();
    printf("test_wakeup: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
