/*
 * rel.h: what only the reliability programs use, on top of Tests/c/rqtest.h (CHECK, CHECK_RC, FAIL,
 * WAIT_FOR, rqt_url, rqt_run, rqt_is_pattern, rqt_log_count_id, ...), which it includes.
 */
#ifndef REL_H
#define REL_H

#include "rqtest.h"

#include <dirent.h>
#include <pthread.h>

/* The reliability programs' names for helpers that rqtest.h holds. */
#define REL_PATTERN RQT_PATTERN
#define rel_is_pattern rqt_is_pattern
#define rel_result rqt_result
#define rel_result_done rqt_result_done
#define rel_configure_fn rqt_configure_fn
#define rel_run rqt_run

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

/* A size in KiB from /proc/self/status (`field` is "VmRSS", "VmSize", ...), or -1 when absent. */
RQT_UNUSED static long rel_status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(field);
    long kib = -1;
    if (!f)
        FAIL("cannot open /proc/self/status: %s", strerror(errno));
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kib = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return kib;
}

/* Resident memory in KiB (VmRSS), or -1. */
RQT_UNUSED static long rel_rss_kib(void) { return rel_status_kib("VmRSS"); }

#endif
