/*
 * header_c.c: requestqueue.h compiles as C11 with -Wall -Wextra -Werror -pedantic (and
 * -Wredundant-decls, which a broken include guard would trip), when included twice.
 */
#include <requestqueue.h>
#include <requestqueue.h>

#include <stdio.h>

_Static_assert(RQ_OK == 0 && RQ_ERR_SYSTEM == 17, "result codes are never renumbered");
_Static_assert(RQ_OUTCOME_OK == 0 && RQ_OUTCOME_TRANSPORT == 11, "outcomes are never renumbered");
_Static_assert(RQ_DELIVERY_THREADED == 0 && RQ_DELIVERY_DISPATCH == 1, "delivery modes");
_Static_assert(RQ_STATE_NEW == 0 && RQ_STATE_COMPLETED == 3, "request states");

/* The callback types take what the documentation says. */
static void on_done(void *context, rq_request *request, const rq_response *response) {
    (void)context, (void)request, (void)response;
}
static void on_progress(void *context, rq_request *request, double progress, int64_t done,
                        int64_t total) {
    (void)context, (void)request, (void)progress, (void)done, (void)total;
}
static void on_auth(void *context, rq_request *request, rq_auth_challenge *challenge,
                    unsigned failure_count, const rq_response *response) {
    (void)context, (void)request, (void)challenge, (void)failure_count, (void)response;
}
static void on_free(void *context) { (void)context; }

int main(void) {
    rq_completion_fn completion = on_done;
    rq_progress_fn progress = on_progress;
    rq_auth_fn auth = on_auth;
    rq_context_free_fn finalizer = on_free;
    rq_result (*new_queue)(rq_delivery, rq_queue **) = rq_queue_new;
    double indeterminate = RQ_PROGRESS_INDETERMINATE;
    (void)completion, (void)progress, (void)auth, (void)finalizer, (void)new_queue;
    if (indeterminate != -1.0 || rq_version_number() != RQ_VERSION_NUMBER) {
        fprintf(stderr, "header_c: unexpected values\n");
        return 1;
    }
    printf("header_c: C11 include of requestqueue.h %s ok\n", RQ_VERSION_STRING);
    return 0;
}
