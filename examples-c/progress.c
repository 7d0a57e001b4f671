/*
 * progress.c: download and upload progress.
 *
 *     progress BASE_URL
 *
 * Runs three transfers one after the other against the test fixture server and reports their
 * progress: a download of known size (progress from 0 to 1), a chunked download whose size is
 * unknown until the end (progress RQ_PROGRESS_INDETERMINATE: show a spinner or a byte count), and
 * an upload of a 1 MiB body.
 */
#include <requestqueue.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct transfer {
    const char *label;
    int last_tenth;     /* the last 10% step printed, to keep the output short */
    int64_t last_done;  /* bytes at the last line printed for an unknown total */
    int completed_ok;
};

/* Called on the delivery thread with the bytes so far. The last call of a successful transfer
 * reports progress 1.0 with total == done, even when the total was unknown before. */
static void on_progress(void *context, rq_request *request, double progress, int64_t done,
                        int64_t total) {
    struct transfer *t = context;
    (void)request;
    if (progress == RQ_PROGRESS_INDETERMINATE) {
        if (done - t->last_done >= 65536) { /* a line per 64 KiB */
            printf("%s: %" PRId64 " bytes so far (total unknown)\n", t->label, done);
            t->last_done = done;
        }
        return;
    }
    int tenth = (int)(progress * 10);
    if (tenth > t->last_tenth) {
        char bar[11];
        memset(bar, '#', (size_t)tenth);
        memset(bar + tenth, '.', (size_t)(10 - tenth));
        bar[10] = '\0';
        printf("%s: [%s] %3d%% (%" PRId64 " of %" PRId64 " bytes)\n", t->label, bar,
               (int)(progress * 100), done, total);
        t->last_tenth = tenth;
    }
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct transfer *t = context;
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    (void)request;
    if (rq_response_outcome(response) != RQ_OUTCOME_OK) {
        printf("%s: failed: %s\n", t->label, rq_response_error_message(response));
        return;
    }
    printf("%s: done, status %d, %zu bytes received", t->label, rq_response_status(response), size);
    if (rq_response_header(response, "Content-Type") &&
        strcmp(rq_response_header(response, "Content-Type"), "application/json") == 0)
        printf(": %.*s", (int)size, (const char *)body);
    printf("\n");
    t->completed_ok = 1;
}

/* Runs one request to completion on `queue`, with our progress callbacks. */
static int run(rq_queue *queue, const char *url, const char *method, const void *body, size_t size,
               struct transfer *t) {
    rq_request *request;
    if (rq_request_new(url, &request) != RQ_OK) {
        printf("%s: bad URL %s\n", t->label, url);
        return 0;
    }
    rq_request_set_completion(request, on_done, t, NULL);
    if (body) {
        rq_request_set_method(request, method);
        rq_request_set_body(request, body, size);
        rq_request_set_upload_progress(request, on_progress);
    } else {
        rq_request_set_download_progress(request, on_progress);
    }
    rq_add(queue, request);
    rq_request_free(request);
    rq_queue_wait_idle(queue, -1);
    return t->completed_ok;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BASE_URL\n", argv[0]);
        return 2;
    }
    char url[4096];
    rq_queue *queue;
    if (rq_queue_new(RQ_DELIVERY_THREADED, &queue) != RQ_OK)
        return 1;
    int ok = 1;

    /* 256 KiB served at 512 KiB/s, so that there is progress to see. */
    struct transfer known = {"download", 0, 0, 0};
    snprintf(url, sizeof url, "%s/bytes?n=262144&rate=524288", argv[1]);
    ok &= run(queue, url, NULL, NULL, 0, &known);

    /* Chunked transfer encoding: the size is known only at the end. */
    struct transfer unknown = {"chunked download", 0, 0, 0};
    snprintf(url, sizeof url, "%s/bytes?n=200000&chunked=1&rate=400000", argv[1]);
    ok &= run(queue, url, NULL, NULL, 0, &unknown);

    /* An upload: the server answers with the number of bytes it received. */
    struct transfer upload = {"upload", 0, 0, 0};
    size_t size = 1024 * 1024;
    char *data = malloc(size);
    if (!data)
        return 1;
    memset(data, 'x', size);
    snprintf(url, sizeof url, "%s/upload", argv[1]);
    ok &= run(queue, url, "POST", data, size, &upload);
    free(data);

    rq_queue_free(queue);
    puts(ok ? "all transfers completed" : "some transfers failed");
    return ok ? 0 : 1;
}
