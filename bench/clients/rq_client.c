/*
 * rq_client.c: librequestqueue from C. Makes N GET requests for URL on one queue with
 * max_concurrent K and RQ_DUPLICATES_ALLOW (they are all equal), then waits until the last one
 * has completed. Two shapes:
 *   upfront (the default): adds all N at once; the queue keeps K in flight and N - K waiting.
 *   refill: adds K, and each completion callback adds the next one until N were added (the shape
 *           of the C reference, and of a client that does not know its next request in
 *           advance): at most K exist at any time, and every add comes from a callback.
 *
 *     rq_client threaded|dispatch|inline URL N K [stream | file PATH] [refill] [post SIZE CONTENT-TYPE [borrowed]]
 *
 * threaded: completions run on the queue's delivery thread; the main thread blocks in
 *           rq_queue_wait_idle.
 * inline:   completions (and body pieces) run on the queue's engine thread (RQ_DELIVERY_INLINE,
 *           as libcurl's own callbacks do); the main thread blocks in rq_queue_wait_idle.
 * dispatch: completions run on the main thread, in a poll() loop on rq_queue_get_fd that calls
 *           rq_queue_dispatch whenever the descriptor is readable.
 * By default the library hands the completion the whole body; it is counted and released when
 * the callback returns. With `stream`, the body goes piece by piece to a body callback
 * (rq_request_set_body_callback) that counts and discards it, when the library has that function
 * (it is looked up as a weak symbol, so that older builds can still be measured); the result line
 * then says "streamed": true. With `file PATH`, each body is written to the file at PATH by the
 * library (rq_request_set_output_file, each request rewriting it), and counted from its size in
 * rq_response_metrics; the result line says "streamed": true as well.
 * With `post SIZE CONTENT-TYPE`, each request is a POST of a SIZE-byte body from memory (one buffer
 * made once, the JSON object of bench_body) given with rq_request_set_body, with the header
 * "Content-Type: CONTENT-TYPE": what a caller does for every request it sends. With `borrowed`
 * after them, the body is given with rq_request_set_body_borrowed instead (no copy: the library
 * reads the one buffer in place; looked up as a weak symbol).
 */
#include "common.h"

#include <errno.h>
#include <poll.h>
#include <requestqueue.h>
#include <stdatomic.h>

#pragma weak rq_request_set_body_callback
#pragma weak rq_request_set_output_file
#pragma weak rq_response_metrics
#pragma weak rq_request_set_body_borrowed

static atomic_long completed, succeeded, added;
static atomic_llong received;
static int stream, refill;
static long total;
static const char *url;
static const char *output; /* file PATH */
static char *post;         /* post SIZE: the body */
static size_t post_size;
static const char *post_type;
static int borrowed; /* post ... borrowed */

static int on_data(void *context, rq_request *request, const uint8_t *data, size_t size,
                   uint64_t offset) {
    (void)context;
    (void)request;
    (void)data;
    (void)offset;
    atomic_fetch_add_explicit(&received, (long long)size, memory_order_relaxed);
    return 0;
}

static void check(rq_result result, const char *what) {
    if (result != RQ_OK) {
        fprintf(stderr, "%s: %s\n", what, rq_result_str(result));
        exit(1);
    }
}

static void on_done(void *context, rq_request *request, const rq_response *response);

/* Adds one request for URL to the queue, unless N were added already. */
static void add_one(rq_queue *queue) {
    if (atomic_fetch_add_explicit(&added, 1, memory_order_relaxed) >= total) return;
    rq_request *request;
    check(rq_request_new(url, &request), "rq_request_new");
    check(rq_request_set_completion(request, on_done, refill ? queue : NULL, NULL), "rq_request_set_completion");
    if (stream) check(rq_request_set_body_callback(request, on_data), "rq_request_set_body_callback");
    if (output != NULL) check(rq_request_set_output_file(request, output, 0), "rq_request_set_output_file");
    if (post != NULL) {
        check(rq_request_set_method(request, "POST"), "rq_request_set_method");
        check(rq_request_set_header(request, "Content-Type", post_type), "rq_request_set_header");
        if (borrowed) check(rq_request_set_body_borrowed(request, post, post_size), "rq_request_set_body_borrowed");
        else check(rq_request_set_body(request, post, post_size), "rq_request_set_body");
    }
    check(rq_add(queue, request), "rq_add");
    check(rq_request_free(request), "rq_request_free");
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    size_t size = 0;
    (void)request;
    rq_response_body(response, &size);
    if (output != NULL) {
        rq_metrics metrics = {.size = sizeof metrics};
        if (rq_response_metrics(response, &metrics) == RQ_OK) size = (size_t)metrics.bytes_down;
    }
    atomic_fetch_add_explicit(&received, (long long)size, memory_order_relaxed);
    if (rq_response_outcome(response) == RQ_OUTCOME_OK && rq_response_status(response) == 200)
        atomic_fetch_add_explicit(&succeeded, 1, memory_order_relaxed);
    else if (atomic_load(&succeeded) == 0 && atomic_load(&completed) == 0)
        fprintf(stderr, "request failed: %s (status %d)\n", rq_response_error_message(response),
                rq_response_status(response));
    /* refill: the next request (context is the queue). */
    if (context != NULL) add_one(context);
    atomic_fetch_add_explicit(&completed, 1, memory_order_release);
}

int main(int argc, char **argv) {
    int usage = argc < 5 || (strcmp(argv[1], "threaded") != 0 && strcmp(argv[1], "dispatch") != 0 &&
                             strcmp(argv[1], "inline") != 0);
    for (int i = 5; i < argc && !usage; i++) {
        if (strcmp(argv[i], "stream") == 0) stream = rq_request_set_body_callback != NULL;
        else if (strcmp(argv[i], "file") == 0 && i + 1 < argc && rq_request_set_output_file != NULL &&
                 rq_response_metrics != NULL)
            output = argv[++i];
        else if (strcmp(argv[i], "refill") == 0) refill = 1;
        else if (strcmp(argv[i], "post") == 0 && i + 2 < argc) {
            post_size = (size_t)bench_count(argv[++i], "SIZE");
            post_type = argv[++i];
            if ((post = bench_body(post_size)) == NULL) return 1;
            if (i + 1 < argc && strcmp(argv[i + 1], "borrowed") == 0) {
                if (rq_request_set_body_borrowed == NULL) {
                    fprintf(stderr, "borrowed: this library has no rq_request_set_body_borrowed\n");
                    return 2;
                }
                borrowed = 1;
                i++;
            }
        } else usage = 1;
    }
    if (usage) {
        fprintf(stderr, "usage: %s threaded|dispatch|inline URL N K [stream | file PATH] [refill] [post SIZE CONTENT-TYPE [borrowed]]\n",
                argv[0]);
        return 2;
    }
    int dispatch = strcmp(argv[1], "dispatch") == 0;
    /* RQ_DELIVERY_INLINE is 2 (spelled as a number: older headers do not name it). */
    rq_delivery delivery = dispatch ? RQ_DELIVERY_DISPATCH
                           : strcmp(argv[1], "inline") == 0 ? (rq_delivery)2 : RQ_DELIVERY_THREADED;
    url = argv[2];
    long n = bench_count(argv[3], "N"), k = bench_count(argv[4], "K");
    total = n;

    struct bench_clock clock;
    bench_start(&clock);
    rq_queue *queue;
    check(rq_queue_new(delivery, &queue), "rq_queue_new");
    check(rq_queue_set_max_concurrent(queue, (size_t)k), "rq_queue_set_max_concurrent");
    check(rq_queue_set_duplicates(queue, RQ_DUPLICATES_ALLOW), "rq_queue_set_duplicates");
    for (long i = 0; i < (refill && k < n ? k : n); i++) add_one(queue);
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
        /* refill: a callback adds the next request before it returns, so the queue is idle only
         * after the last one. */
        check(rq_queue_wait_idle(queue, -1), "rq_queue_wait_idle");
    }
    long done = atomic_load(&completed), ok = atomic_load(&succeeded);
    bench_report(&clock, done, ok, atomic_load(&received), stream || output != NULL);
    check(rq_queue_free(queue), "rq_queue_free");
    free(post);
    return ok == n && done == n ? 0 : 1;
}
