/*
 * measure.c: runs a command and reports the resources it used, as GNU time does.
 *
 *     measure OUTFILE COMMAND [ARG...]
 *
 * Forks, executes COMMAND, waits for it with wait4 and writes one JSON line to OUTFILE:
 *   {"status": exit code (128 + signal number if killed), "maxrss_kib": peak resident set size,
 *    "user": user CPU seconds, "sys": system CPU seconds}
 * Why a separate program: Linux counts in a child's maxrss the memory of the process it was forked
 * from (the fork's copy, before exec), so a child forked from the Python driver (~35 MiB) would never
 * report less than the driver's size. This program is small, so a client forked from it reports
 * its own peak.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTFILE COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        fprintf(stderr, "%s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) {
            perror("wait4");
            return 1;
        }
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *out = fopen(argv[1], "w");
    if (out == NULL) {
        perror(argv[1]);
        return 1;
    }
    fprintf(out, "{\"status\": %d, \"maxrss_kib\": %ld, \"user\": %.6f, \"sys\": %.6f}\n", code,
            usage.ru_maxrss, (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6,
            (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6);
    fclose(out);
    return code;
}
