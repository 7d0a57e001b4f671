/*
 * auth.c: HTTP Basic authentication, answering the server's challenge.
 *
 *     auth BASE_URL
 *
 * The test fixture's /basic-auth/USER/PASS answers 401 with `WWW-Authenticate: Basic` unless the
 * request carries USER:PASS. The first request below has no credentials: the server challenges it,
 * and our handler answers from a small list of candidate passwords, moving to the next one each
 * time the server rejects one (failure_count). The second request sends its credentials up front
 * (rq_request_set_credentials), so the server sees a single request and no challenge happens.
 */
#include <requestqueue.h>

#include <stdio.h>

struct login {
    const char *user;
    const char *passwords[3];  /* tried in order; NULL ends the list */
    int authenticated;
};

/* Called when the server answers 401. It must answer exactly once: now, as here, or later from
 * any thread (e.g. after asking the user), with rq_auth_use_credential, rq_auth_continue_without
 * or rq_auth_cancel. Meanwhile the request keeps its place among the running requests. */
static void on_challenge(void *context, rq_request *request, rq_auth_challenge *challenge,
                         unsigned failure_count, const rq_response *response) {
    struct login *login = context;
    const char *scheme = rq_response_header(response, "WWW-Authenticate");
    (void)request;
    printf("challenge %u: status %d, WWW-Authenticate: %s\n", failure_count,
           rq_response_status(response), scheme ? scheme : "(none)");

    const char *password = failure_count < 3 ? login->passwords[failure_count] : NULL;
    if (password) {
        printf("  answering with %s / %s\n", login->user, password);
        rq_auth_use_credential(challenge, login->user, password);
    } else {
        printf("  no more passwords to try: giving up\n");
        rq_auth_cancel(challenge);
    }
}

static void on_done(void *context, rq_request *request, const rq_response *response) {
    struct login *login = context;
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    (void)request;
    printf("%s: status %d, outcome \"%s\", body %.*s\n", rq_response_url(response),
           rq_response_status(response), rq_outcome_str(rq_response_outcome(response)), (int)size,
           (const char *)body);
    login->authenticated = rq_response_outcome(response) == RQ_OUTCOME_OK;
}

static int fetch(rq_queue *queue, const char *url, struct login *login, int send_up_front) {
    rq_request *request;
    if (rq_request_new(url, &request) != RQ_OK) {
        printf("bad URL %s\n", url);
        return 0;
    }
    rq_request_set_completion(request, on_done, login, NULL);
    if (send_up_front)
        rq_request_set_credentials(request, login->user, login->passwords[0]);
    else
        rq_request_set_auth_handler(request, on_challenge);
    rq_add(queue, request);
    rq_request_free(request);
    rq_queue_wait_idle(queue, -1);
    return login->authenticated;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BASE_URL\n", argv[0]);
        return 2;
    }
    rq_queue *queue;
    if (rq_queue_new(RQ_DELIVERY_THREADED, &queue) != RQ_OK)
        return 1;
    char url[4096];
    snprintf(url, sizeof url, "%s/basic-auth/alice/wonderland", argv[1]);

    printf("-- answering challenges\n");
    struct login guess = {"alice", {"password123", "wonderland", NULL}, 0};
    int ok = fetch(queue, url, &guess, 0);

    printf("-- credentials sent up front\n");
    snprintf(url, sizeof url, "%s/basic-auth/alice/wonderland?id=up-front", argv[1]);
    struct login known = {"alice", {"wonderland", NULL, NULL}, 0};
    ok &= fetch(queue, url, &known, 1);

    rq_queue_free(queue);
    return ok ? 0 : 1;
}
