/*
 * rel.h: helpers shared by the reliability programs (header-only), on top of Tests/c/rqtest.h
 * (CHECK, CHECK_RC, FAIL, WAIT_FOR, rqt_url, rqt_log_count_id, ...).
 */
#ifndef REL_H
#define REL_H

#include "rqtest.h"

#include <dirent.h>
#include <pthread.h>

/* ---- the fixture's /bytes pattern ------------------------------------------------------------ */

static const char REL_PATTERN[] = "abcdefghijklmnopqrstuvwxyz0123456789";

/* 1 when body[0..size) is the fixture's /bytes pattern from offset 0. */
RQT_UNUSED static int rel_is_pattern(const uint8_t *body, size_t size) {
    for (size_t i = 0; i < size; i++)
        if (body[i] != (uint8_t)REL_PATTERN[i % (sizeof REL_PATTERN - 1)])
            return 0;
    return 1;
}

/* ---- a small PRNG per thread (xorshift64*) --------------------------------------------------- */

typedef struct { uint64_t s; } rel_rng;

RQT_UNUSED static void rel_rng_seed(rel_rng *r, uint64_t seed) {
    r->s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (r->s == 0)
        r->s = 1;
}

RQT_UNUSED static uint64_t rel_next(rel_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

/* A number in [0, n), n > 0. */
RQT_UNUSED static unsigned rel_below(rel_rng *r, unsigned n) { return (unsigned)(rel_next(r) % n); }

/* ---- what the process holds: descriptors and threads (Linux /proc) --------------------------- */

/* The number of entries of a /proc directory, without "." and ".." (and without the descriptor
 * opendir itself uses, for /proc/self/fd). */
RQT_UNUSED static int rel_count_dir(const char *path, int minus_own_fd) {
    DIR *dir = opendir(path);
    if (!dir)
        FAIL("cannot open %s: %s", path, strerror(errno));
    int n = 0;
    for (struct dirent *e = readdir(dir); e; e = readdir(dir))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(dir);
    return minus_own_fd ? n - 1 : n;
}

RQT_UNUSED static int rel_open_fds(void) { return rel_count_dir("/proc/self/fd", 1); }
RQT_UNUSED static int rel_threads(void) { return rel_count_dir("/proc/self/task", 0); }

/* Resident memory in KiB (VmRSS), or -1. */
RQT_UNUSED static long rel_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

/* ---- one request, synchronously, on a private threaded queue ---------------------------------- */

struct rel_result {
    int done;
    int status;
    rq_outcome outcome;
    unsigned attempts;
    size_t size;
    char *body;        /* NUL-terminated copy, free it */
    char message[512];
    char url[1024];
};

RQT_UNUSED static void rel_result_done(void *context, rq_request *request, const rq_response *response) {
    struct rel_result *r = context;
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);
    (void)request;
    r->status = rq_response_status(response);
    r->outcome = rq_response_outcome(response);
    r->attempts = rq_response_attempts(response);
    r->size = size;
    r->body = malloc(size + 1);
    if (!r->body)
        FAIL("out of memory");
    memcpy(r->body, body, size);
    r->body[size] = '\0';
    snprintf(r->message, sizeof r->message, "%s", rq_response_error_message(response));
    snprintf(r->url, sizeof r->url, "%s", rq_response_url(response));
    r->done++;
}

typedef void (*rel_configure_fn)(rq_request *request, const void *arg);

/* Runs `url` (configured by `configure` unless NULL) to its completion and returns what came back.
 * Fails the test if the request is not accepted or does not complete exactly once. */
RQT_UNUSED static struct rel_result rel_run(const char *url, rel_configure_fn configure, const void *arg) {
    struct rel_result r;
    memset(&r, 0, sizeof r);
    rq_queue *queue;
    rq_request *request;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, rel_result_done, &r, NULL));
    if (configure)
        configure(request, arg);
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(queue));
    CHECK(r.done == 1, "%s: %d completions", url, r.done);
    return r;
}

#endif
