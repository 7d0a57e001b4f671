/*
 * retry.c: automatic retry of failed attempts.
 *
 *     retry BASE_URL
 *
 * The test fixture's /flaky?key=K&fail=F&mode=reset resets the connection for the first F
 * requests with key K, then answers 200. Two requests run at once:
 *   - "recovers": fails twice, then succeeds on its third attempt;
 *   - "gives up": would fail ten times, but is limited to three attempts.
 * A lost connection is one of the outcomes retried by default (with timeouts, unresolvable hosts
 * and refused connections). HTTP error statuses are never retried: the server did answer.
 */
#include <requestqueue.h>

#include <stdio.h>
#include <time.h>

struct job {
    const char *name;
    rq_outcome outcome;
    unsigned attempts;
};

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct job *job = context;
    (void)request;
    job->outcome = rq_response_outcome(response);
    job->attempts = rq_response_attempts(response);
    if (job->outcome == RQ_OUTCOME_OK) {
        const char *server_count = rq_response_header(response, "X-Attempt"); /* the fixture's */
        printf("%s: status %d after %u attempts (X-Attempt: %s)\n", job->name,
               rq_response_status(response), job->attempts, server_count ? server_count : "none");
    } else
        printf("%s: %s after %u attempts: %s\n", job->name, rq_outcome_str(job->outcome),
               job->attempts, rq_response_error_message(response));
}

static void add(rq_queue *queue, const char *url, unsigned max_attempts, struct job *job) {
    rq_request *request;
    if (rq_request_new(url, &request) != RQ_OK) {
        printf("bad URL %s\n", url);
        return;
    }
    rq_request_set_completion(request, on_done, job, NULL);
    rq_request_set_retry(request, 1);               /* off by default */
    rq_request_set_retry_delay(request, 0.2);       /* default 5 s */
    rq_request_set_max_attempts(request, max_attempts); /* default 0: no limit */
    rq_add(queue, request);
    rq_request_free(request);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BASE_URL\n", argv[0]);
        return 2;
    }
    /* The fixture counts failures per key: make ours unique so that runs do not interfere. */
    unsigned long run = (unsigned long)time(NULL);
    char url[4096];
    rq_queue *queue;
    if (rq_queue_new(RQ_DELIVERY_THREADED, &queue) != RQ_OK)
        return 1;

    struct job recovers = {"recovers", RQ_OUTCOME_TRANSPORT, 0};
    snprintf(url, sizeof url, "%s/flaky?key=%lu-recovers&fail=2&mode=reset", argv[1], run);
    add(queue, url, 5, &recovers);

    struct job gives_up = {"gives up", RQ_OUTCOME_TRANSPORT, 0};
    snprintf(url, sizeof url, "%s/flaky?key=%lu-gives-up&fail=10&mode=reset", argv[1], run);
    add(queue, url, 3, &gives_up);

    rq_queue_wait_idle(queue, -1);
    rq_queue_free(queue);

    int as_expected = recovers.outcome == RQ_OUTCOME_OK && recovers.attempts == 3 &&
                      gives_up.outcome == RQ_OUTCOME_CONNECTION_LOST && gives_up.attempts == 3;
    puts(as_expected ? "as expected" : "NOT as expected");
    return as_expected ? 0 : 1;
}
