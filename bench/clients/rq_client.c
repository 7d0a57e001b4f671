/*
 * rq_client.c: librequestqueue from C. Adds N GET requests for URL to one queue with
 * max_concurrent K and RQ_DUPLICATES_ALLOW (they are all equal), then waits until the last one
 * has completed.
 *
 *     rq_client threaded|dispatch URL N K [stream]
 *
 * threaded: completions run on the queue's delivery thread; the main thread blocks in
 *           rq_queue_wait_idle.
 * dispatch: completions run on the main thread, in a poll() loop on rq_queue_get_fd that calls
 *           rq_queue_dispatch whenever the descriptor is readable.
 * By default the library hands the completion the whole body; it is counted and released when
 * the callback returns. With `stream`, the body goes piece by piece to a body callback
 * (rq_request_set_body_callback) that counts and discards it, when the library has that function
 * (it is looked up as a weak symbol, so that older builds can still be measured); the result line
 * then says "streamed": true.
 */
#include "common.h"

#include <errno.h>
#include <poll.h>
#include <requestqueue.h>
#include <stdatomic.h>

#pragma weak rq_request_set_body_callback

static atomic_long completed, succeeded;
static atomic_llong received;

static int on_data(void *context, rq_request *request, const uint8_t *data, size_t size,
                   uint64_t offset) {
    (void)context;
    (void)request;
    (void)data;
    (void)offset;
    atomic_fetch_add_explicit(&received, (long long)size, memory_order_relaxed);
    return 0;
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    size_t size = 0;
    (void)context;
    (void)request;
    rq_response_body(response, &size);
    atomic_fetch_add_explicit(&received, (long long)size, memory_order_relaxed);
    if (rq_response_outcome(response) == RQ_OUTCOME_OK && rq_response_status(response) == 200)
        atomic_fetch_add_explicit(&succeeded, 1, memory_order_relaxed);
    else if (atomic_load(&succeeded) == 0 && atomic_load(&completed) == 0)
        fprintf(stderr, "request failed: %s (status %d)\n", rq_response_error_message(response),
                rq_response_status(response));
    atomic_fetch_add_explicit(&completed, 1, memory_order_release);
}

static void check(rq_result result, const char *what) {
    if (result != RQ_OK) {
        fprintf(stderr, "%s: %s\n", what, rq_result_str(result));
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6 || (strcmp(argv[1], "threaded") != 0 && strcmp(argv[1], "dispatch") != 0) ||
        (argc == 6 && strcmp(argv[5], "stream") != 0)) {
        fprintf(stderr, "usage: %s threaded|dispatch URL N K [stream]\n", argv[0]);
        return 2;
    }
    int stream = argc == 6 && rq_request_set_body_callback != NULL;
    int dispatch = strcmp(argv[1], "dispatch") == 0;
    const char *url = argv[2];
    long n = bench_count(argv[3], "N"), k = bench_count(argv[4], "K");

    struct bench_clock clock;
    bench_start(&clock);
    rq_queue *queue;
    check(rq_queue_new(dispatch ? RQ_DELIVERY_DISPATCH : RQ_DELIVERY_THREADED, &queue), "rq_queue_new");
    check(rq_queue_set_max_concurrent(queue, (size_t)k), "rq_queue_set_max_concurrent");
    check(rq_queue_set_duplicates(queue, RQ_DUPLICATES_ALLOW), "rq_queue_set_duplicates");
    for (long i = 0; i < n; i++) {
        rq_request *request;
        check(rq_request_new(url, &request), "rq_request_new");
        check(rq_request_set_completion(request, on_done, NULL, NULL), "rq_request_set_completion");
        if (stream) check(rq_request_set_body_callback(request, on_data), "rq_request_set_body_callback");
        check(rq_add(queue, request), "rq_add");
        check(rq_request_free(request), "rq_request_free");
    }
    if (dispatch) {
        int fd;
        check(rq_queue_get_fd(queue, &fd), "rq_queue_get_fd");
        while (atomic_load_explicit(&completed, memory_order_acquire) < n) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, -1) < 0 && errno != EINTR) {
                perror("poll");
                return 1;
            }
            check(rq_queue_dispatch(queue, 0, NULL), "rq_queue_dispatch");
        }
    } else {
        check(rq_queue_wait_idle(queue, -1), "rq_queue_wait_idle");
    }
    long done = atomic_load(&completed), ok = atomic_load(&succeeded);
    bench_report(&clock, done, ok, atomic_load(&received), stream);
    check(rq_queue_free(queue), "rq_queue_free");
    return ok == n && done == n ? 0 : 1;
}
