/*
 * queue_ops.c: the queue itself, without network. On a suspended queue (RQ_DUPLICATES_ALLOW, so
 * equal requests do not cancel each other), creates N requests (rq_request_new), adds them
 * (rq_add), then cancels every one (rq_cancel) in a shuffled order, so that a queue whose removal
 * cost grows with its length shows it. Each phase is timed on its own with clock_gettime around
 * the loop. The resident set size is read from /proc/self/statm before the requests are created,
 * after they are created and after they are added: (after add - before) / N is the memory per
 * waiting request (the request itself plus its place in the queue).
 * The queue uses dispatch delivery, so the N cancellation completions wait until the final
 * rq_queue_dispatch (timed too, as the cost of delivering a completion) instead of competing with
 * the cancel loop for the CPU.
 *
 *     queue_ops N [URL]
 *
 * A phase that runs past 60 s stops early and reports the rate of the operations it did
 * ("partial"), so an O(N^2) queue shows up as a number rather than a hang.
 */
#include "common.h"

#include <requestqueue.h>
#include <stdint.h>
#include <unistd.h>

#define BUDGET_SECONDS 60.0

static long completions;

static void on_done(void *context, rq_request *request, const rq_response *response) {
    (void)context;
    (void)request;
    if (rq_response_outcome(response) == RQ_OUTCOME_CANCELLED) completions++;
}

static void check(rq_result result, const char *what) {
    if (result != RQ_OK) {
        fprintf(stderr, "%s: %s\n", what, rq_result_str(result));
        exit(1);
    }
}

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f == NULL || fscanf(f, "%ld %ld", &size, &resident) != 2) {
        fprintf(stderr, "cannot read /proc/self/statm\n");
        exit(1);
    }
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s N [URL]\n", argv[0]);
        return 2;
    }
    long n = bench_count(argv[1], "N");
    const char *url = argc == 3 ? argv[2] : "http://127.0.0.1:9/queue-benchmark/small.bin";

    rq_request **requests = malloc((size_t)n * sizeof *requests);
    long *order = malloc((size_t)n * sizeof *order);
    if (requests == NULL || order == NULL) return 1;
    /* Touch the caller's arrays now so that they are not counted as the queue's memory. */
    memset(requests, 0, (size_t)n * sizeof *requests);
    uint64_t seed = 0x9E3779B97F4A7C15u;
    for (long i = 0; i < n; i++) order[i] = i;
    for (long i = n - 1; i > 0; i--) { /* Fisher-Yates with xorshift64 */
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        long j = (long)(seed % (uint64_t)(i + 1));
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }

    rq_queue *queue;
    check(rq_queue_new(RQ_DELIVERY_DISPATCH, &queue), "rq_queue_new");
    check(rq_queue_set_duplicates(queue, RQ_DUPLICATES_ALLOW), "rq_queue_set_duplicates");
    check(rq_queue_set_max_concurrent(queue, 8), "rq_queue_set_max_concurrent");
    check(rq_queue_suspend(queue), "rq_queue_suspend");
    /* Warm up: one request through every call, so first-use costs are not counted. */
    {
        rq_request *warm;
        check(rq_request_new(url, &warm), "rq_request_new");
        check(rq_request_set_completion(warm, on_done, NULL, NULL), "rq_request_set_completion");
        check(rq_add(queue, warm), "rq_add");
        check(rq_cancel(warm), "rq_cancel");
        check(rq_request_free(warm), "rq_request_free");
        check(rq_queue_dispatch(queue, 0, NULL), "rq_queue_dispatch");
        completions = 0;
    }

    long rss_before = rss_bytes();
    double t0 = now();
    for (long i = 0; i < n; i++) {
        check(rq_request_new(url, &requests[i]), "rq_request_new");
        check(rq_request_set_completion(requests[i], on_done, NULL, NULL), "rq_request_set_completion");
    }
    double t1 = now();
    long rss_created = rss_bytes();

    long added = 0, partial = 0;
    double t2 = now(), t3;
    for (;;) {
        check(rq_add(queue, requests[added]), "rq_add");
        added++;
        if (added == n) break;
        if ((added & 1023) == 0 && now() - t2 > BUDGET_SECONDS) {
            partial = 1;
            break;
        }
    }
    t3 = now();
    long rss_added = rss_bytes();
    size_t count = 0;
    check(rq_queue_count(queue, &count), "rq_queue_count");
    if ((long)count != added) {
        fprintf(stderr, "rq_queue_count says %zu waiting, expected %ld\n", count, added);
        return 1;
    }

    long cancelled = 0;
    double t4 = now(), t5;
    for (long i = 0; i < n; i++) {
        if (order[i] >= added) continue;
        check(rq_cancel(requests[order[i]]), "rq_cancel");
        cancelled++;
        if ((cancelled & 1023) == 0 && now() - t4 > BUDGET_SECONDS) {
            partial = 1;
            break;
        }
    }
    t5 = now();
    long rss_cancelled = rss_bytes();
    if (cancelled < added) check(rq_queue_cancel_all(queue), "rq_queue_cancel_all");

    double t6 = now();
    size_t ran = 0;
    check(rq_queue_dispatch(queue, 0, &ran), "rq_queue_dispatch");
    double t7 = now();
    check(rq_queue_count(queue, &count), "rq_queue_count");
    if (count != 0 || completions != added) {
        fprintf(stderr, "after cancelling: %zu still in the queue, %ld cancelled completions of %ld\n",
                count, completions, added);
        return 1;
    }
    for (long i = 0; i < n; i++) rq_request_free(requests[i]);
    check(rq_queue_free(queue), "rq_queue_free");

    printf("{\"n\": %ld, \"added\": %ld, \"cancelled\": %ld, \"partial\": %s, "
           "\"new_ns\": %.1f, \"add_ns\": %.1f, \"cancel_ns\": %.1f, \"deliver_ns\": %.1f, "
           "\"bytes_per_request\": %.1f, \"bytes_per_waiting\": %.1f, \"queue_bytes_per_waiting\": %.1f, "
           "\"rss_before\": %ld, \"rss_created\": %ld, \"rss_added\": %ld, \"rss_cancelled\": %ld}\n",
           n, added, cancelled, partial ? "true" : "false", (t1 - t0) * 1e9 / n,
           (t3 - t2) * 1e9 / added, (t5 - t4) * 1e9 / (cancelled ? cancelled : 1),
           (t7 - t6) * 1e9 / (ran ? (double)ran : 1), (double)(rss_created - rss_before) / n,
           (double)(rss_added - rss_before) / added, (double)(rss_added - rss_created) / added,
           rss_before, rss_created, rss_added, rss_cancelled);
    free(requests);
    free(order);
    return 0;
}
