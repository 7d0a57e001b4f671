/*
 * rqfetch: a parallel downloader on the public C API of librequestqueue (include/requestqueue.h).
 *
 * One program built from the .c files of this folder:
 *   main.c     the queue, its callbacks, the poll() loop, signals, the summary
 *   options.c  command line, --help, URL lists
 *   files.c    file names from URLs, writing bodies without overwriting
 *   display.c  terminal bars, plain event lines, number formatting
 */
#ifndef RQFETCH_H
#define RQFETCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "requestqueue.h"

#define RQFETCH_VERSION "0.1.0"

/* Exit statuses. */
enum { EXIT_ALL_OK = 0, EXIT_SOME_FAILED = 1, EXIT_USAGE = 2 };

/* ---------------------------------------------------------------------------------------------
 * A growable byte string (display.c)
 * --------------------------------------------------------------------------------------------- */

typedef struct strbuf {
    char *data;
    size_t len, cap;
} strbuf;

void sb_append(strbuf *b, const char *s, size_t n);
void sb_puts(strbuf *b, const char *s);
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_repeat(strbuf *b, char c, size_t n);
void sb_free(strbuf *b);

/* Memory that cannot be allocated ends the program with a message (display.c). */
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* ---------------------------------------------------------------------------------------------
 * Options (options.c)
 * --------------------------------------------------------------------------------------------- */

typedef struct url_entry {
    char *url;
    char *origin; /* where it came from, for messages: "argument 2", "list.txt:14" */
} url_entry;

/* A transport setting given on the command line (curl's option names), set on the queue's
 * defaults (see rq_option in requestqueue.h). */
typedef struct transport_opt {
    const char *flag; /* as given, for messages */
    rq_option option;
    const char *text; /* a string setting, or NULL for an integer one */
    int64_t number;
} transport_opt;

typedef struct options {
    size_t jobs;        /* -j: maximum running at once, 0 = unlimited */
    rq_order order;     /* --fifo / --lifo */
    double timeout;     /* -t: per attempt, 0 = none */
    unsigned retries;   /* -r: retries after the first attempt */
    double retry_delay; /* --retry-delay */
    const char *output_dir;
    int to_stdout; /* -c */
    int force;     /* -f */
    int plain;     /* --plain */
    int no_color;  /* --no-color */
    const char *method; /* -X, NULL = GET, or POST with -d */
    char **headers;     /* -H values as given */
    size_t nheaders;
    uint8_t *body; /* -d */
    size_t body_size;
    int has_body;
    char *user, *password; /* -u */
    transport_opt *transport; /* -A, -x, -E, --resolve, ... */
    size_t ntransport;
    const char *cacert;      /* --cacert */
    const char *cookie_file; /* -b: cookies loaded before the first request */
    const char *cookie_jar;  /* -c: cookies written at the end */
    unsigned long max_connections, max_host_connections;
    char **owned; /* strings made while parsing (the file part of -E FILE:PASS) */
    size_t nowned;
    url_entry *urls;
    size_t nurls;
} options;

/* Parses the command line and reads URL lists. Returns -1 when the program should go on, or an
 * exit status (0 after --help/--version, EXIT_USAGE after an error already reported). */
int parse_options(int argc, char **argv, options *opt);
void free_options(options *opt);

/* Sets the transport options, --cacert and the cookie file on the queue (its defaults and jar).
 * Returns 0, or EXIT_USAGE after a message. */
int apply_transport_options(const options *opt, rq_queue *queue);

/* Prints "rqfetch: <message>", the usage line and a hint to standard error; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------------------------------------
 * Jobs and the program state (main.c)
 * --------------------------------------------------------------------------------------------- */

typedef enum job_status { JOB_WAITING, JOB_RUNNING, JOB_OK, JOB_FAILED, JOB_CANCELLED } job_status;

struct app;

typedef struct job {
    struct app *app;
    size_t index; /* 0-based position in the URL list */
    const char *url;
    char *label; /* short name for the bars: the URL without scheme and host */
    job_status status;
    int http_status;
    int64_t done, total;  /* download progress of the current attempt; total -1 = unknown */
    int64_t bytes;        /* body bytes received (at completion) */
    unsigned attempts;    /* attempts made (at completion) */
    unsigned seen_attempt;/* attempts observed while running (display only) */
    double start;         /* when it was first seen running (0 = never) */
    double attempt_start; /* when the current attempt was first seen */
    double end;
    char *message;   /* why it failed or was cancelled */
    char *saved_as;  /* the file written */
    uint8_t *held;   /* --stdout: body waiting for the bodies of earlier URLs */
    size_t held_size;
} job;

#define RATE_SAMPLES 24 /* overall rate over the last ~2.4 s of 100 ms ticks */

typedef struct name_set {
    char **slots;
    size_t cap, count;
} name_set;

typedef struct app {
    options opt;
    job *jobs;
    size_t njobs;
    rq_queue *queue;

    FILE *out; /* events, bars and summary: stdout, or stderr with --stdout */
    int out_fd;
    int tty;   /* bars on a terminal rather than plain lines */
    int color;
    int width, height;

    double t0;
    size_t n_ok, n_failed, n_cancelled, n_completed, n_retried;
    int64_t bytes_done; /* body bytes of completed requests */
    size_t next_body;   /* --stdout: index of the next body to write */
    int stdout_broken;
    int interrupted;    /* the signal that interrupted the run, 0 if none */

    /* display state */
    job **running;
    size_t nrunning, running_cap, nwaiting;
    strbuf scroll; /* finished lines to print above the bars at the next draw */
    int drawn_lines;
    unsigned tick;
    double rate_t[RATE_SAMPLES];
    int64_t rate_b[RATE_SAMPLES];
    unsigned rate_n;

    name_set names; /* files written in this run */
    size_t common_origin_len; /* length of the "scheme://host:port" all URLs share, or 0 */
} app;

double now_seconds(void);

/* ---------------------------------------------------------------------------------------------
 * Files (files.c)
 * --------------------------------------------------------------------------------------------- */

/* A file name for a URL: its last path segment, percent-decoded, plus '_' and its query; unsafe
 * bytes become '_'; "index.html" when empty. Never empty, never "." or "..", no '/'. */
char *name_from_url(const char *url);

/* Creates the output directory (and its parents) if missing, checks that it is a writable
 * directory. Returns 0, or -1 after writing a message to `err`. */
int prepare_output_dir(const char *dir, char *err, size_t errlen);

/* Writes a body to a temporary file in the output directory and moves it to its final name (see
 * --help). On success sets *out_path (allocated) and returns 0; on failure leaves no file behind,
 * writes a message to `err` and returns -1. */
int save_body(app *a, const job *j, const uint8_t *data, size_t size, char **out_path, char *err,
              size_t errlen);

/* The temporary file being written, if any, for the signal handler to remove on a forced exit. */
extern volatile int g_tmp_active;
extern char g_tmp_path[4096];

void names_free(name_set *s);

/* ---------------------------------------------------------------------------------------------
 * Display (display.c)
 * --------------------------------------------------------------------------------------------- */

void display_start(app *a);
/* A request completed: a plain line, or on a terminal a line above the bars when it is notable. */
void display_completed(app *a, const job *j);
/* A message line (interruption, ...). */
void display_note(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Redraws the bars on a terminal (no-op in plain mode). */
void display_draw(app *a, double now);
/* Final frame: prints pending lines, replaces the bars by the final overall line. */
void display_finish(app *a, double now);
void print_summary(app *a, double now);

const char *fmt_bytes(char buf[32], int64_t n);
const char *fmt_clock(char buf[32], double seconds);

/* Sets the cursor-visibility state the signal handler restores on a forced exit. */
extern volatile int g_cursor_hidden;

#endif
