/*
 * leak_check.c: many requests through every path of the library, for valgrind memcheck.
 *
 * In rounds, each on a new queue (threaded and dispatch in turn) that is freed at the end of the
 * round: bodies of several sizes (plain and chunked), uploads, HEAD, redirects, HTTP errors,
 * resets, truncated bodies, refused connections, timeouts, retries, a response over its size
 * limit, authentication challenges, streamed bodies, output files, tags, priorities, metrics,
 * cancels of waiting and running requests, and requests still in the queue when it is freed.
 * Every completion and every finalizer is counted: exactly one of each per request.
 *
 *   leak_check [--requests N] [--tmp DIR] BASE_URL    (default 10,000; run by with_servers.py)
 *
 * Under `valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1` the run
 * passes when valgrind finds no error and no definitely lost block.
 */
#include "rel.h"

#include <limits.h>

#define PER_ROUND 500

static const char *base;
static const char *tmpdir = "/tmp";
static atomic_int completions, finalized, auth_calls, pieces;
static atomic_long body_bytes;

static void on_done(void *context, rq_request *request, const rq_response *response) {
    size_t size = 0;
    rq_metrics m;
    (void)context, (void)request;
    rq_response_body(response, &size);
    atomic_fetch_add(&body_bytes, (long)size);
    m.size = sizeof m;
    CHECK_OK(rq_response_metrics(response, &m));
    for (size_t i = 0; i < rq_response_header_count(response); i++) {
        const char *name, *value;
        CHECK_OK(rq_response_header_at(response, i, &name, &value));
    }
    (void)rq_response_header(response, "content-type");
    (void)rq_response_error_message(response);
    (void)rq_response_url(response);
    atomic_fetch_add(&completions, 1);
}

static void on_finalize(void *context) {
    free(context);
    atomic_fetch_add(&finalized, 1);
}

static void on_auth(void *context, rq_request *request, rq_auth_challenge *challenge, unsigned failures,
                    const rq_response *response) {
    (void)context, (void)request, (void)response;
    atomic_fetch_add(&auth_calls, 1);
    if (failures == 0)
        CHECK_OK(rq_auth_use_credential(challenge, "user", "secret"));
    else
        CHECK_OK(rq_auth_cancel(challenge));
}

static int on_piece(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    (void)context, (void)request, (void)data, (void)offset;
    atomic_fetch_add(&pieces, 1);
    atomic_fetch_add(&body_bytes, (long)size);
    return 0;
}

static void on_progress(void *context, rq_request *request, double progress, int64_t done, int64_t total) {
    (void)context, (void)request, (void)progress, (void)done, (void)total;
}

int main(int argc, char **argv) {
    int requests = 10000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
            requests = atoi(argv[++i]);
        else if (strcmp(argv[i], "--tmp") == 0 && i + 1 < argc)
            tmpdir = argv[++i];
        else
            base = argv[i];
    }
    if (!base || requests < 100) {
        fprintf(stderr, "usage: %s [--requests N] [--tmp DIR] BASE_URL\n", argv[0]);
        return 2;
    }
    char *json = rqt_get(base, "/_/refuse-then-accept?after=3600");
    int refused = atoi(strstr(json, "\"port\": ") + 8);
    free(json);

    int made = 0, round = 0, cancels = 0, added = 0;
    double start = rqt_now();
    while (made < requests) {
        rq_queue *q;
        int dispatch = round % 2;
        CHECK_OK(rq_queue_new(dispatch ? RQ_DELIVERY_DISPATCH : RQ_DELIVERY_THREADED, &q));
        CHECK_OK(rq_queue_set_max_concurrent(q, 16));
        CHECK_OK(rq_queue_set_duplicates(q, round % 3 == 2 ? RQ_DUPLICATES_COALESCE : RQ_DUPLICATES_ALLOW));
        rq_request *held[PER_ROUND];
        int nheld = 0;
        for (int i = 0; i < PER_ROUND && made < requests; i++, made++) {
            char url[512];
            int k = made % 20;
            switch (k) {
            case 0: snprintf(url, sizeof url, "%s/bytes?n=%d", base, made % 5000); break;
            case 1: snprintf(url, sizeof url, "%s/bytes?n=%d&chunked=1&chunk=700", base, made % 20000); break;
            case 2: snprintf(url, sizeof url, "%s/upload", base); break;
            case 3: snprintf(url, sizeof url, "%s/redirect/2", base); break;
            case 4: snprintf(url, sizeof url, "%s/status/404", base); break;
            case 5: snprintf(url, sizeof url, "%s/reset", base); break;
            case 6: snprintf(url, sizeof url, "%s/truncated?n=3000", base); break;
            case 7: snprintf(url, sizeof url, "http://127.0.0.1:%d/", refused); break;
            case 8: snprintf(url, sizeof url, "%s/stall?s=2", base); break;
            case 9: snprintf(url, sizeof url, "%s/flaky?key=l%d&fail=1&mode=status", base, made); break;
            case 10: snprintf(url, sizeof url, "%s/bytes?n=50000", base); break;
            case 11: snprintf(url, sizeof url, "%s/basic-auth/user/secret", base); break;
            case 12: snprintf(url, sizeof url, "%s/basic-auth/user/other", base); break;
            case 13: snprintf(url, sizeof url, "%s/bytes?n=30000&chunked=1", base); break; /* streamed */
            case 14: snprintf(url, sizeof url, "%s/bytes?n=10000", base); break;           /* to a file */
            case 15: snprintf(url, sizeof url, "%s/delay?s=0.2", base); break;             /* cancelled */
            case 16: snprintf(url, sizeof url, "%s/echo", base); break;
            case 17: snprintf(url, sizeof url, "%s/bytes?n=100", base); break;             /* coalesced */
            default: snprintf(url, sizeof url, "%s/headers?id=%d", base, made); break;
            }
            rq_request *r;
            CHECK_OK(rq_request_new(url, &r));
            int *context = malloc(sizeof *context);
            CHECK(context != NULL, "out of memory");
            *context = made;
            CHECK_OK(rq_request_set_completion(r, on_done, context, on_finalize));
            CHECK_OK(rq_request_set_download_progress(r, on_progress));
            char tag[16];
            snprintf(tag, sizeof tag, "k%d", k);
            CHECK_OK(rq_request_set_tag(r, tag));
            CHECK_OK(rq_request_set_priority(r, (rq_priority)(made % 5 - 2)));
            CHECK_OK(rq_request_set_header(r, "X-Round", "leak-check"));
            if (k == 2 || k == 16) {
                static const char body[4096] = "payload";
                CHECK_OK(rq_request_set_method(r, k == 2 ? "PUT" : "POST"));
                CHECK_OK(rq_request_set_body(r, body, (size_t)(made % 4096)));
                CHECK_OK(rq_request_set_upload_progress(r, on_progress));
            }
            if (k == 8)
                CHECK_OK(rq_request_set_idle_timeout(r, 0.2));
            if (k == 9) {
                const int statuses[] = {503};
                CHECK_OK(rq_request_set_retry(r, 1));
                CHECK_OK(rq_request_set_retry_delay(r, 0.01));
                CHECK_OK(rq_request_set_retry_statuses(r, statuses, 1));
                CHECK_OK(rq_request_set_retry_backoff(r, 2, 1, 0.5));
                CHECK_OK(rq_request_set_max_attempts(r, 3));
            }
            if (k == 10)
                CHECK_OK(rq_request_set_max_response_size(r, 1000));
            if (k == 11 || k == 12)
                CHECK_OK(rq_request_set_auth_handler(r, on_auth));
            if (k == 13)
                CHECK_OK(rq_request_set_body_callback(r, on_piece));
            if (k == 14) {
                char path[512];
                snprintf(path, sizeof path, "%s/leak-check-%d.bin", tmpdir, made % 4);
                CHECK_OK(rq_request_set_output_file(r, path, made % 8 == 0));
            }
            if (k == 19)
                CHECK_OK(rq_request_set_credentials(r, "user", "secret"));
            CHECK_OK(rq_add(q, r));
            added++;
            if (k == 15)
                held[nheld++] = r; /* cancelled below, waiting or running */
            else
                CHECK_OK(rq_request_free(r));
            if (k == 17 && round % 3 == 2) { /* an equal request that joins the transfer */
                rq_request *twin;
                snprintf(url, sizeof url, "%s/bytes?n=100", base);
                CHECK_OK(rq_request_new(url, &twin));
                int *c2 = malloc(sizeof *c2);
                CHECK(c2 != NULL, "out of memory");
                CHECK_OK(rq_request_set_completion(twin, on_done, c2, on_finalize));
                CHECK_OK(rq_add(q, twin));
                CHECK_OK(rq_request_free(twin));
                added++;
            }
        }
        for (int i = 0; i < nheld; i++) {
            int rc = rq_cancel(held[i]);
            CHECK(rc == RQ_OK || rc == RQ_ERR_NOT_ACTIVE, "rq_cancel returned %d", rc);
            cancels += rc == RQ_OK;
            CHECK_OK(rq_request_free(held[i]));
        }
        size_t n;
        CHECK_OK(rq_queue_count_tag(q, "k0", &n));
        rq_queue_stats st;
        st.size = sizeof st;
        CHECK_OK(rq_queue_get_stats(q, &st));
        if (round % 4 == 3) {
            /* Freed with requests still waiting and running. */
            CHECK_OK(rq_queue_free(q));
        } else {
            CHECK_OK(rq_queue_wait_idle(q, 120));
            CHECK_OK(rq_queue_free(q));
        }
        round++;
    }
    CHECK(atomic_load(&completions) == added, "%d completions for %d requests", atomic_load(&completions), added);
    CHECK(atomic_load(&finalized) == added, "%d finalizers for %d requests", atomic_load(&finalized), added);
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/leak-check-%d.bin", tmpdir, i);
        unlink(path);
    }
    printf("leak_check: requests=%d completions=%d finalizers=%d rounds=%d cancels=%d auth_challenges=%d "
           "streamed_pieces=%d body_bytes=%ld seconds=%.1f\n",
           added, atomic_load(&completions), atomic_load(&finalized), round, cancels, atomic_load(&auth_calls),
           atomic_load(&pieces), atomic_load(&body_bytes), rqt_now() - start);
    return 0;
}
