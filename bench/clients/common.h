/*
 * common.h: shared by the C benchmark clients. Every client prints one JSON line on stdout:
 *   {"n": requests made, "ok": requests that succeeded with status 200, "bytes": body bytes received,
 *    "wall": seconds of the timed phase, "cpu": user+sys seconds of the whole process (every thread)
 *    during the timed phase, "streamed": whether bodies were consumed piece by piece as they arrived
 *    rather than collected whole}
 * The timed phase starts before the client creates its engine (multi handle, queue, session) and
 * ends when the last response has completed.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct bench_clock {
    struct timespec wall;
    double cpu;
};

static inline double bench_cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

static inline void bench_start(struct bench_clock *clock) {
    clock->cpu = bench_cpu_seconds();
    clock_gettime(CLOCK_MONOTONIC, &clock->wall);
}

static inline double bench_elapsed(const struct bench_clock *clock) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - clock->wall.tv_sec) + (now.tv_nsec - clock->wall.tv_nsec) / 1e9;
}

static inline void bench_report(const struct bench_clock *clock, long n, long ok,
                                long long bytes, int streamed) {
    double wall = bench_elapsed(clock);
    double cpu = bench_cpu_seconds() - clock->cpu;
    printf("{\"n\": %ld, \"ok\": %ld, \"bytes\": %lld, \"wall\": %.6f, \"cpu\": %.6f, "
           "\"streamed\": %s}\n", n, ok, bytes, wall, cpu, streamed ? "true" : "false");
    fflush(stdout);
}

/* Parses a positive count; exits with a message on bad input. */
static inline long bench_count(const char *text, const char *what) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value <= 0) {
        fprintf(stderr, "bad %s: %s (a positive integer)\n", what, text);
        exit(2);
    }
    return value;
}

/* A request body of `size` bytes (malloc'd): a JSON object, {"data":"xxxx..."}, padded to `size`
 * (at least 12 bytes; smaller sizes are filled with 'x'). */
static inline char *bench_body(size_t size) {
    char *body = malloc(size);
    if (body == NULL) return NULL;
    memset(body, 'x', size);
    if (size >= 12) {
        memcpy(body, "{\"data\":\"", 9);
        memcpy(body + size - 2, "\"}", 2);
    }
    return body;
}

#endif
