/*
 * download.c: a download straight to a file, resumed where it stopped, with progress and metrics.
 *
 *     download URL FILE [--stop-after BYTES]
 *
 * The library writes the body into FILE as it arrives (memory stays small whatever the size). When
 * FILE already holds part of the body, the request asks the server for the rest only (a Range
 * request) and appends it; a server that ignores ranges sends everything and FILE is rewritten.
 * With --stop-after, the download is cancelled once BYTES arrived, as an interrupted download
 * would be: run the same command again without it to resume. Run on a file that is already
 * complete, the server answers 416 ("Range Not Satisfiable") with its size: nothing to do.
 *
 * Exit status: 0 when the file is complete (or stopped as asked), 1 on failure, 2 on bad usage.
 */
#include <requestqueue.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct download {
    const char *path;
    int64_t stop_after; /* 0: never */
    int stopping;
    int last_quarter;
    int ok;
};

static long long file_size(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 ? (long long)info.st_size : -1;
}

/* Download progress, on the queue's delivery thread. `done` counts the bytes of this transfer:
 * after a resumed start, the file holds the earlier ones too. */
static void on_progress(void *context, rq_request *request, double progress, int64_t done,
                        int64_t total) {
    struct download *d = context;
    if (progress != RQ_PROGRESS_INDETERMINATE && (int)(progress * 4) > d->last_quarter) {
        d->last_quarter = (int)(progress * 4);
        printf("progress: %3d%% (%" PRId64 " of %" PRId64 " bytes of this transfer)\n",
               d->last_quarter * 25, done, total);
    }
    /* (Once the whole body is there, there is nothing left to stop.) */
    if (d->stop_after > 0 && done >= d->stop_after && done != total && !d->stopping) {
        d->stopping = 1;
        printf("stopping after %" PRId64 " bytes: run the same command again to resume\n", done);
        rq_cancel(request); /* allowed from any callback; the completion follows */
    }
}

static void print_time(const char *name, double seconds) {
    if (seconds < 0)
        printf(" %s -,", name);
    else
        printf(" %s %.3f s,", name, seconds);
}

/* Whether a 416 answer says the file is complete: its Content-Range (RFC 9110 14.4: "bytes",
 * a space, an asterisk, a slash and the size) gives the size of the whole body, and the file has
 * that size. */
static int already_complete(const rq_response *response, const char *path) {
    const char *range = rq_response_header(response, "Content-Range");
    long long size;
    return range != NULL && sscanf(range, "bytes */%lld", &size) == 1 && size == file_size(path);
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct download *d = context;
    rq_outcome outcome = rq_response_outcome(response);
    int status = rq_response_status(response);
    (void)request;
    if (outcome == RQ_OUTCOME_OK) {
        printf("status %d: %s\n", status,
               status == 206 ? "the server sent the rest, appended" : "the whole body was written");
        d->ok = 1;
    } else if (outcome == RQ_OUTCOME_HTTP_STATUS && status == 416 && already_complete(response, d->path)) {
        printf("status 416: the file is already complete\n");
        d->ok = 1;
    } else if (outcome == RQ_OUTCOME_CANCELLED && d->stopping) {
        printf("stopped: what arrived stays in the file\n");
        d->ok = 1;
    } else {
        /* An HTTP error leaves the file as it was; the error's own body is in the response. */
        printf("failed: %s (%s)\n", rq_response_error_message(response), rq_outcome_str(outcome));
    }

    /* Metrics: set .size so that the library knows which fields this program has. */
    rq_metrics m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    if (rq_response_metrics(response, &m) != RQ_OK || m.total < 0) {
        printf("metrics: none (no transfer finished)\n");
    } else {
        printf("metrics:");
        print_time("queued", m.queued);
        print_time("dns", m.dns);
        print_time("connect", m.connect);
        print_time("tls", m.tls);
        print_time("first byte", m.first_byte);
        print_time("total", m.total);
        printf(" %" PRIu64 " bytes down, %" PRIu64 " up, %u attempt%s, %s connection\n", m.bytes_down,
               m.bytes_up, m.attempts, m.attempts == 1 ? "" : "s",
               m.connection_reused ? "reused" : "new");
    }
}

int main(int argc, char **argv) {
    struct download d = {0};
    if (argc == 5 && strcmp(argv[3], "--stop-after") == 0)
        d.stop_after = strtoll(argv[4], NULL, 10);
    if ((argc != 3 && argc != 5) || (argc == 5 && d.stop_after <= 0)) {
        fprintf(stderr, "usage: %s URL FILE [--stop-after BYTES]\n", argv[0]);
        return 2;
    }
    d.path = argv[2];
    d.last_quarter = -1;

    long long before = file_size(d.path);
    if (before > 0)
        printf("resuming %s from byte %lld\n", d.path, before);
    else
        printf("downloading to %s: new file\n", d.path);

    rq_queue *queue;
    rq_request *request;
    if (rq_queue_new(RQ_DELIVERY_THREADED, &queue) != RQ_OK)
        return 1;
    rq_result rc = rq_request_new(argv[1], &request);
    if (rc != RQ_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], rq_result_str(rc));
        rq_queue_free(queue);
        return 2;
    }
    rq_request_set_completion(request, on_done, &d, NULL);
    rq_request_set_download_progress(request, on_progress);
    rq_request_set_output_file(request, d.path, 1); /* 1: resume what is there */
    rq_request_set_retry(request, 1);               /* a lost connection resumes, too */
    rq_request_set_retry_delay(request, 1);
    rq_request_set_max_attempts(request, 5);
    rq_add(queue, request);
    rq_request_free(request);
    rq_queue_wait_idle(queue, -1);
    rq_queue_free(queue);

    long long after = file_size(d.path);
    if (after >= 0)
        printf("%s %s: %lld bytes\n", d.ok && !d.stopping ? "saved" : "kept", d.path, after);
    return d.ok ? 0 : 1;
}
