/*
 * consumer.c: a program built outside the RequestQueue tree against the installed package
 * (find_package or pkg-config). Checks that the library it loads matches the header it was
 * compiled with and, given the fixture's base URL, fetches 42 bytes through it.
 *
 *     consumer [BASE_URL]
 */
#include <requestqueue.h>

#include <stdio.h>

static void on_done(void *context, rq_request *request, const rq_response *response) {
    size_t *size = context;
    (void)request;
    if (rq_response_outcome(response) == RQ_OUTCOME_OK)
        rq_response_body(response, size);
    else
        printf("failed: %s\n", rq_response_error_message(response));
}

int main(int argc, char **argv) {
    if (rq_version_number() != RQ_VERSION_NUMBER) {
        printf("library %s (%u) does not match the header %s\n", rq_version_string(),
               rq_version_number(), RQ_VERSION_STRING);
        return 1;
    }
    printf("requestqueue %s\n", rq_version_string());
    if (argc < 2)
        return 0;

    char url[1024];
    size_t size = 0;
    rq_queue *queue;
    rq_request *request;
    snprintf(url, sizeof url, "%s/bytes?n=42", argv[1]);
    if (rq_queue_new(RQ_DELIVERY_THREADED, &queue) != RQ_OK || rq_request_new(url, &request) != RQ_OK)
        return 1;
    rq_request_set_completion(request, on_done, &size, NULL);
    rq_add(queue, request);
    rq_request_free(request);
    rq_queue_wait_idle(queue, -1);
    rq_queue_free(queue);
    printf("fetched %zu bytes\n", size);
    return size == 42 ? 0 : 1;
}
