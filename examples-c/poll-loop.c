/*
 * poll-loop.c: dispatch mode, for programs that run their own event loop.
 *
 *     poll-loop BASE_URL
 *
 * A queue created with RQ_DELIVERY_DISPATCH never calls back on a thread of its own. Its callbacks
 * wait until the program calls rq_queue_dispatch, and then run on the program's thread. The queue's
 * file descriptor (rq_queue_get_fd) is readable exactly while callbacks are waiting, so it goes into
 * poll()/epoll/select next to the program's other descriptors. Everything here runs on one thread:
 * no locks are needed, and callbacks may call the library (here: one adds a follow-up request).
 */
#define _POSIX_C_SOURCE 200809L
#include <requestqueue.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

struct app {
    rq_queue *queue;
    const char *base;
    int outstanding; /* requests added and not yet completed */
    int failures;
};

static void on_done(void *context, rq_request *request, const rq_response *response);

static void fetch(struct app *app, const char *path) {
    char url[4096];
    rq_request *request;
    snprintf(url, sizeof url, "%s%s", app->base, path);
    if (rq_request_new(url, &request) != RQ_OK) {
        printf("bad URL %s\n", url);
        app->failures++;
        return;
    }
    rq_request_set_completion(request, on_done, app, NULL);
    if (rq_add(app->queue, request) == RQ_OK)
        app->outstanding++;
    rq_request_free(request);
}

/* Runs inside rq_queue_dispatch, on the main thread. */
static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct app *app = context;
    size_t size = 0;
    (void)request;
    rq_response_body(response, &size);
    app->outstanding--;
    if (rq_response_outcome(response) != RQ_OUTCOME_OK) {
        printf("%s: %s\n", rq_response_url(response), rq_response_error_message(response));
        app->failures++;
        return;
    }
    printf("%s: status %d, %zu bytes\n", rq_response_url(response), rq_response_status(response),
           size);
    /* Calling the library from a callback is allowed: queue a follow-up request. */
    if (strstr(rq_response_url(response), "/bytes?n=1000") != NULL) {
        printf("  queueing a follow-up request from the callback\n");
        fetch(app, "/bytes?n=10&id=follow-up");
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BASE_URL\n", argv[0]);
        return 2;
    }
    struct app app = {NULL, argv[1], 0, 0};
    int fd;
    if (rq_queue_new(RQ_DELIVERY_DISPATCH, &app.queue) != RQ_OK ||
        rq_queue_get_fd(app.queue, &fd) != RQ_OK)
        return 1;

    fetch(&app, "/bytes?n=1000");
    fetch(&app, "/delay?s=0.2");
    fetch(&app, "/redirect/1");

    /* The event loop. A real program would poll its sockets, pipes or timers here too. */
    while (app.outstanding > 0) {
        struct pollfd fds[1] = {{.fd = fd, .events = POLLIN}};
        int ready = poll(fds, 1, -1);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            perror("poll");
            break;
        }
        if (fds[0].revents & POLLIN) {
            size_t ran = 0;
            rq_queue_dispatch(app.queue, 0, &ran); /* runs the pending callbacks right here */
            printf("[loop] dispatched %zu callback%s\n", ran, ran == 1 ? "" : "s");
        }
    }

    rq_queue_free(app.queue);
    printf("all done, %d failure%s\n", app.failures, app.failures == 1 ? "" : "s");
    return app.failures == 0 ? 0 : 1;
}
