/*
 * fetch.c: the basic use of RequestQueue. Puts a few GET requests on a queue, which runs two at a
 * time, and prints what comes back.
 *
 *     fetch BASE_URL [PATH...]
 *     fetch http://127.0.0.1:8080 /bytes?n=1000 /status/404
 *
 * Without paths it fetches /bytes?n=1024, /redirect/2 and /headers (endpoints of the test fixture
 * server). Exits 0 when every request got an answer with a status below 400.
 */
#include <requestqueue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Our own record of one request. It travels as the context of the request's callbacks. */
struct fetch {
    char url[4096];
    int succeeded;
};

/* Prints up to 40 bytes of a body, replacing what is not printable. */
static void print_preview(const uint8_t *body, size_t size) {
    size_t shown = size < 40 ? size : 40;
    printf("  \"");
    for (size_t i = 0; i < shown; i++)
        putchar(body[i] >= 0x20 && body[i] < 0x7f && body[i] != '"' ? body[i] : '.');
    printf("\"%s\n", size > shown ? "..." : "");
}

/* Called once per request, on the queue's delivery thread (one callback at a time). The response
 * and everything it hands out are borrowed: valid only during this call. */
static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct fetch *fetch = context;
    rq_outcome outcome = rq_response_outcome(response);
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    (void)request;

    if (outcome == RQ_OUTCOME_OK) {
        const char *type = rq_response_header(response, "Content-Type");
        printf("%s: %d, %zu bytes (%s)\n", fetch->url, rq_response_status(response), size,
               type ? type : "no Content-Type");
        if (strcmp(fetch->url, rq_response_url(response)) != 0)
            printf("  redirected to %s\n", rq_response_url(response));
        print_preview(body, size);
        fetch->succeeded = 1;
    } else if (outcome == RQ_OUTCOME_HTTP_STATUS) {
        /* A status >= 400 is a failure, but its headers and body are still delivered. */
        printf("%s: HTTP error %d, %zu bytes: %s\n", fetch->url, rq_response_status(response), size,
               rq_response_error_message(response));
        print_preview(body, size);
    } else {
        printf("%s: failed (%s): %s\n", fetch->url, rq_outcome_str(outcome),
               rq_response_error_message(response));
    }
}

int main(int argc, char **argv) {
    static const char *default_paths[] = {"/bytes?n=1024", "/redirect/2", "/headers"};
    if (argc < 2) {
        fprintf(stderr, "usage: %s BASE_URL [PATH...]\n", argv[0]);
        return 2;
    }
    const char *base = argv[1];
    const char **paths = argc > 2 ? (const char **)(argv + 2) : default_paths;
    size_t count = argc > 2 ? (size_t)(argc - 2) : sizeof default_paths / sizeof *default_paths;

    rq_queue *queue;
    rq_result rc = rq_queue_new(RQ_DELIVERY_THREADED, &queue);
    if (rc != RQ_OK) {
        fprintf(stderr, "rq_queue_new: %s\n", rq_result_str(rc));
        return 1;
    }

    struct fetch *fetches = calloc(count, sizeof *fetches);
    if (!fetches)
        return 1;
    for (size_t i = 0; i < count; i++) {
        snprintf(fetches[i].url, sizeof fetches[i].url, "%s%s", base, paths[i]);

        rq_request *request;
        rc = rq_request_new(fetches[i].url, &request);
        if (rc != RQ_OK) {
            /* Bad input is reported, never a crash: e.g. "invalid URL". */
            printf("%s: %s\n", fetches[i].url, rq_result_str(rc));
            continue;
        }
        rq_request_set_completion(request, on_done, &fetches[i], NULL);
        rc = rq_add(queue, request);
        if (rc != RQ_OK)
            printf("%s: rq_add: %s\n", fetches[i].url, rq_result_str(rc));
        /* The queue keeps what it needs: our handle can go at once. */
        rq_request_free(request);
    }

    /* Block until every request has completed and its callback has returned. */
    rq_queue_wait_idle(queue, -1);
    rq_queue_free(queue);

    size_t succeeded = 0;
    for (size_t i = 0; i < count; i++)
        succeeded += (size_t)fetches[i].succeeded;
    printf("%zu of %zu succeeded\n", succeeded, count);
    free(fetches);
    return succeeded == count ? 0 : 1;
}
