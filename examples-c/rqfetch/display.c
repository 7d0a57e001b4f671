/* rqfetch: terminal bars, plain event lines, the summary, and small helpers. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rqfetch.h"

volatile int g_cursor_hidden;

/* ---- memory and strings ------------------------------------------------------------------------ */

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("rqfetch: out of memory\n", stderr);
        exit(EXIT_SOME_FAILED);
    }
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fputs("rqfetch: out of memory\n", stderr);
        exit(EXIT_SOME_FAILED);
    }
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

static void sb_reserve(strbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void sb_append(strbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sb_puts(strbuf *b, const char *s)
{
    sb_append(b, s, strlen(s));
}

void sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    sb_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sb_repeat(strbuf *b, char c, size_t n)
{
    sb_reserve(b, n);
    memset(b->data + b->len, c, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sb_free(strbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---- numbers ------------------------------------------------------------------------------------ */

const char *fmt_bytes(char buf[32], int64_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (n < 1024) {
        snprintf(buf, 32, "%lld B", (long long)(n < 0 ? 0 : n));
        return buf;
    }
    double v = (double)n / 1024;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, 32, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

const char *fmt_clock(char buf[32], double seconds)
{
    if (!(seconds >= 0) || seconds > 359999) {
        snprintf(buf, 32, "--:--");
        return buf;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, 32, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, 32, "%ld:%02ld", s / 60, s % 60);
    return buf;
}

/* ---- lines about one request --------------------------------------------------------------------- */

#define GREEN "\033[32m"
#define RED "\033[31m"
#define YELLOW "\033[33m"
#define BOLD "\033[1m"
#define RESET "\033[0m"

static const char *status_word(const job *j)
{
    switch (j->status) {
    case JOB_OK:
        return "ok";
    case JOB_FAILED:
        return "failed";
    case JOB_CANCELLED:
        return "cancelled";
    case JOB_RUNNING:
        return "running";
    case JOB_WAITING:
    default:
        return "waiting";
    }
}

static const char *status_color(const job *j)
{
    return j->status == JOB_OK ? GREEN : j->status == JOB_FAILED ? RED : YELLOW;
}

/* "ok         200       16384 B     0.05 s  1 try    URL -> FILE" (or "URL (message)"). The
 * columns match the summary's header. */
static void job_line(strbuf *b, const app *a, const job *j, int color, int compact, int with_file)
{
    const char *word = status_word(j);
    if (color)
        sb_printf(b, "%s%s" RESET "%*s", status_color(j), word, (int)(9 - strlen(word)), "");
    else
        sb_printf(b, "%-9s", word);
    if (j->http_status > 0)
        sb_printf(b, " %4d", j->http_status);
    else
        sb_puts(b, "    -");
    sb_printf(b, " %11lld B", (long long)j->bytes);
    if (j->start > 0)
        sb_printf(b, "  %7.2f s", j->end - j->start);
    else
        sb_puts(b, "        -  "); /* as wide as "  %7.2f s" */
    char tries[16];
    snprintf(tries, sizeof tries, "%u %s", j->attempts, j->attempts == 1 ? "try" : "tries");
    /* Compact (the summary on a terminal): the URL without the origin all URLs share, the file
     * without the output directory (both are printed above the table). */
    const char *url = compact ? j->url + a->common_origin_len : j->url;
    sb_printf(b, "  %-7s  %s", tries, *url ? url : "/");
    if (j->status == JOB_OK && !with_file) {
        /* the line above the bars: short enough not to wrap; the summary names the file */
    } else if (j->status == JOB_OK && j->saved_as) {
        const char *slash = strrchr(j->saved_as, '/');
        sb_printf(b, " -> %s", compact && slash ? slash + 1 : j->saved_as);
    } else if (j->status == JOB_OK) {
        sb_puts(b, " -> (stdout)");
    } else if (j->message && *j->message) {
        sb_printf(b, " (%s)", j->message);
    }
}

static void flush_out(app *a)
{
    fflush(a->out);
}

void display_start(app *a)
{
    char delay[32];
    strbuf b = {0};
    sb_printf(&b, "rqfetch: %zu URL%s", a->njobs, a->njobs == 1 ? "" : "s");
    if (a->common_origin_len)
        sb_printf(&b, " on %.*s", (int)a->common_origin_len, a->jobs[0].url);
    sb_puts(&b, ", ");
    if (a->opt.jobs)
        sb_printf(&b, "at most %zu at once", a->opt.jobs);
    else
        sb_puts(&b, "all at once");
    sb_printf(&b, ", %s", a->opt.order == RQ_ORDER_LIFO ? "LIFO" : "FIFO");
    if (a->opt.timeout > 0)
        sb_printf(&b, ", timeout %g s", a->opt.timeout);
    if (a->opt.retries) {
        snprintf(delay, sizeof delay, "%g s", a->opt.retry_delay);
        sb_printf(&b, ", up to %u retr%s after %s", a->opt.retries,
                  a->opt.retries == 1 ? "y" : "ies", delay);
    }
    if (a->opt.to_stdout)
        sb_puts(&b, ", bodies to standard output");
    else
        sb_printf(&b, ", saving into %s", a->opt.output_dir);
    sb_puts(&b, "\n");
    fputs(b.data, a->out);
    sb_free(&b);
    flush_out(a);
    if (a->tty) {
        fputs("\033[?25l", a->out); /* hide the cursor while the bars are drawn */
        g_cursor_hidden = 1;
        flush_out(a);
    }
}

void display_completed(app *a, const job *j)
{
    int width = 1;
    for (size_t n = a->njobs; n >= 10; n /= 10)
        width++;
    if (!a->tty) {
        strbuf b = {0};
        sb_printf(&b, "[%*zu/%zu] ", width, a->n_completed, a->njobs);
        job_line(&b, a, j, 0, 0, 1);
        sb_puts(&b, "\n");
        fputs(b.data, a->out);
        sb_free(&b);
        flush_out(a);
        return;
    }
    /* On a terminal the bars show the flow; list only what a person should notice. */
    if (j->status == JOB_FAILED || (j->status == JOB_OK && j->attempts > 1)) {
        sb_printf(&a->scroll, "[%*zu/%zu] ", width, a->n_completed, a->njobs);
        job_line(&a->scroll, a, j, a->color, 1, 0);
        sb_puts(&a->scroll, "\n");
    }
}

void display_note(app *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    if (!msg)
        return;
    if (a->tty) {
        if (a->color)
            sb_printf(&a->scroll, BOLD "%s" RESET "\n", msg);
        else
            sb_printf(&a->scroll, "%s\n", msg);
    } else {
        fprintf(a->out, "%s\n", msg);
        flush_out(a);
    }
    free(msg);
}

/* ---- the terminal frame ----------------------------------------------------------------------- */

static size_t label_width(const app *a)
{
    size_t w = (size_t)a->width / 5;
    return w < 10 ? 10 : w > 36 ? 36 : w;
}

static void put_label(strbuf *f, const char *label, size_t lw)
{
    size_t n = strlen(label);
    if (n <= lw) {
        sb_puts(f, label);
        sb_repeat(f, ' ', lw - n);
    } else {
        sb_append(f, label, lw - 2);
        sb_puts(f, "..");
    }
}

static void put_bar(strbuf *f, size_t bw, int64_t done, int64_t total, unsigned phase)
{
    sb_puts(f, "[");
    if (total >= 0) {
        size_t filled = total == 0 ? bw : (size_t)((double)bw * (double)done / (double)total);
        if (filled > bw)
            filled = bw;
        sb_repeat(f, '=', filled);
        if (filled < bw) {
            sb_puts(f, ">");
            sb_repeat(f, ' ', bw - filled - 1);
        }
    } else if (bw >= 4) {
        /* Size unknown: a "<=>" bouncing from side to side. */
        size_t span = bw - 3, pos = phase % (2 * span);
        if (pos > span)
            pos = 2 * span - pos;
        sb_repeat(f, ' ', pos);
        sb_puts(f, "<=>");
        sb_repeat(f, ' ', bw - 3 - pos);
    } else {
        sb_repeat(f, ' ', bw);
    }
    sb_puts(f, "]");
}

/* "  label  [=====>    ]  45%   1.20 MiB/2.00 MiB   512 KiB/s  ETA 0:02" */
static void transfer_line(strbuf *f, const app *a, const job *j, double now)
{
    char b1[32], b2[32], b3[32], b4[32], stats[160];
    double elapsed = now - j->attempt_start;
    double rate = elapsed > 0.25 && j->done > 0 ? (double)j->done / elapsed : 0;
    char rate_s[40];
    if (rate > 0)
        snprintf(rate_s, sizeof rate_s, "%s/s", fmt_bytes(b3, (int64_t)rate));
    else
        snprintf(rate_s, sizeof rate_s, "--");
    /* Fixed columns so that the bars line up: 47 characters before the retry marker. */
    if (j->total >= 0) {
        int pct = j->total ? (int)(100.0 * (double)j->done / (double)j->total) : 100;
        if (pct > 100)
            pct = 100;
        snprintf(stats, sizeof stats, "%3d%%  %9s/%-9s %10s  ETA %-5s", pct,
                 fmt_bytes(b1, j->done), fmt_bytes(b2, j->total), rate_s,
                 rate > 0 ? fmt_clock(b4, (double)(j->total - j->done) / rate) : "--:--");
    } else if (j->done == 0) {
        snprintf(stats, sizeof stats, "%6swaiting for the response  %s", "",
                 fmt_clock(b4, elapsed));
    } else {
        snprintf(stats, sizeof stats, "%6s%9s %-9s %10s  %9s", "", fmt_bytes(b1, j->done), "",
                 rate_s, "");
    }
    size_t sl = strlen(stats);
    while (sl && stats[sl - 1] == ' ')
        stats[--sl] = '\0';
    if (j->seen_attempt > 1)
        snprintf(stats + sl, sizeof stats - sl, "  try %u", j->seen_attempt);
    sl = strlen(stats);

    const size_t slot = 47;
    size_t lw = label_width(a);
    size_t avail = (size_t)a->width - 1;
    sb_puts(f, "  ");
    put_label(f, j->label, lw);
    size_t used = 2 + lw;
    if (used + 5 + slot + 6 <= avail) { /* "  [" bar "] " stats */
        size_t bw = avail - used - 5 - slot;
        if (bw > 60)
            bw = 60;
        sb_puts(f, "  ");
        put_bar(f, bw, j->done, j->total, a->tick + (unsigned)j->index * 5);
        used += 4 + bw;
    }
    sb_puts(f, " ");
    used += 1;
    if (used < avail)
        sb_append(f, stats, sl < avail - used ? sl : avail - used);
}

static void overall_line(strbuf *f, app *a, double now)
{
    char b1[32], b2[32], b3[32], stats[200];
    int64_t received = a->bytes_done;
    for (size_t i = 0; i < a->nrunning; i++)
        received += a->running[i]->done;
    /* Rate over the last couple of seconds of samples. */
    unsigned slot = a->rate_n % RATE_SAMPLES;
    a->rate_t[slot] = now;
    a->rate_b[slot] = received;
    a->rate_n++;
    unsigned oldest = a->rate_n > RATE_SAMPLES ? a->rate_n % RATE_SAMPLES : 0;
    double dt = now - a->rate_t[oldest];
    double rate = dt > 0.2 ? (double)(received - a->rate_b[oldest]) / dt : 0;

    size_t lw = label_width(a);
    size_t avail = (size_t)a->width - 1;
    char cancelled[48] = "";
    if (a->n_cancelled)
        snprintf(cancelled, sizeof cancelled, ", %zu cancelled", a->n_cancelled);
    snprintf(stats, sizeof stats, "%zu/%zu done, %s%zu failed%s%s, %zu running  %s  %s/s  %s",
             a->n_completed, a->njobs, a->color && a->n_failed ? RED : "", a->n_failed,
             a->color && a->n_failed ? RESET : "", cancelled, a->nrunning,
             fmt_bytes(b1, received), fmt_bytes(b2, rate > 0 ? (int64_t)rate : 0),
             fmt_clock(b3, now - a->t0));
    size_t visible = strlen(stats) - (a->color && a->n_failed ? strlen(RED) + strlen(RESET) : 0);
    if (a->color)
        sb_puts(f, BOLD);
    sb_puts(f, "  ");
    put_label(f, "all", lw);
    if (a->color)
        sb_puts(f, RESET);
    size_t used = 2 + lw;
    if (used + 5 + visible + 8 <= avail) { /* "  [" bar "] " stats */
        size_t bw = avail - used - 5 - visible;
        if (bw > 60)
            bw = 60;
        sb_puts(f, "  ");
        put_bar(f, bw, (int64_t)a->n_completed, (int64_t)a->njobs, 0);
        used += 2 + bw + 2;
        sb_puts(f, " ");
        used += 1;
        sb_puts(f, stats);
    } else {
        /* Narrow terminal: the counts only. */
        char small[64];
        snprintf(small, sizeof small, " %zu/%zu done, %zu failed", a->n_completed, a->njobs,
                 a->n_failed);
        size_t n = strlen(small);
        if (used < avail)
            sb_append(f, small, n < avail - used ? n : avail - used);
    }
}

static void begin_frame(strbuf *f, app *a)
{
    /* The cursor rests on the empty line below the frame, where the echo of Ctrl-C or of typed
     * keys lands too: going up over the frame and clearing to the end removes both. */
    sb_puts(f, "\r");
    if (a->drawn_lines > 0)
        sb_printf(f, "\033[%dA", a->drawn_lines);
    sb_puts(f, "\033[J");
    if (a->scroll.len) {
        sb_append(f, a->scroll.data, a->scroll.len);
        a->scroll.len = 0;
    }
}

void display_draw(app *a, double now)
{
    if (!a->tty)
        return;
    a->tick++;
    strbuf f = {0};
    begin_frame(&f, a);
    int lines = 0;
    size_t max = a->height > 5 ? (size_t)a->height - 4 : 1;
    size_t shown = a->nrunning <= max ? a->nrunning : max - 1;
    for (size_t i = 0; i < shown; i++) {
        transfer_line(&f, a, a->running[i], now);
        sb_puts(&f, "\n");
        lines++;
    }
    if (shown < a->nrunning) {
        sb_printf(&f, "  ... and %zu more running\n", a->nrunning - shown);
        lines++;
    }
    overall_line(&f, a, now);
    sb_puts(&f, "\n");
    lines++;
    a->drawn_lines = lines;
    fwrite(f.data, 1, f.len, a->out);
    fflush(a->out);
    sb_free(&f);
}

void display_finish(app *a, double now)
{
    if (!a->tty)
        return;
    strbuf f = {0};
    begin_frame(&f, a);
    a->nrunning = 0;
    overall_line(&f, a, now);
    sb_puts(&f, "\n\033[?25h");
    a->drawn_lines = 0;
    fwrite(f.data, 1, f.len, a->out);
    fflush(a->out);
    g_cursor_hidden = 0;
    sb_free(&f);
}

/* ---- the summary ------------------------------------------------------------------------------- */

void print_summary(app *a, double now)
{
    char b1[32], b2[32];
    strbuf b = {0};
    int color = a->tty && a->color;
    int compact = a->tty;
    sb_puts(&b, "\nSummary");
    if (compact && a->common_origin_len && !a->opt.to_stdout)
        sb_printf(&b, " (URLs on %.*s, files in %s)", (int)a->common_origin_len, a->jobs[0].url,
                  a->opt.output_dir);
    else if (compact && a->common_origin_len)
        sb_printf(&b, " (URLs on %.*s)", (int)a->common_origin_len, a->jobs[0].url);
    else if (compact && !a->opt.to_stdout)
        sb_printf(&b, " (files in %s)", a->opt.output_dir);
    sb_puts(&b, ":\n");
    sb_printf(&b, "%6s  %-9s %4s %13s  %9s  %-7s  %s\n", "#", "status", "HTTP", "bytes", "time",
              "tries", "URL");
    for (size_t i = 0; i < a->njobs; i++) {
        sb_printf(&b, "%6zu  ", i + 1);
        job_line(&b, a, &a->jobs[i], color, compact, 1);
        sb_puts(&b, "\n");
        if (b.len > 1 << 16) {
            fwrite(b.data, 1, b.len, a->out);
            b.len = 0;
        }
    }
    double elapsed = now - a->t0;
    if (a->interrupted)
        sb_printf(&b, "Interrupted by %s.\n",
                  a->interrupted == 2 ? "Ctrl-C (SIGINT)" : a->interrupted == 15 ? "SIGTERM" : "SIGHUP");
    sb_printf(&b, "%sTotal: %zu request%s, %zu ok, %zu failed, %zu cancelled, %zu retried; %lld bytes (%s) in %.1f s (%s/s)%s\n",
              color ? BOLD : "", a->njobs, a->njobs == 1 ? "" : "s", a->n_ok, a->n_failed, a->n_cancelled, a->n_retried,
              (long long)a->bytes_done, fmt_bytes(b1, a->bytes_done), elapsed,
              fmt_bytes(b2, elapsed > 0 ? (int64_t)((double)a->bytes_done / elapsed) : 0),
              color ? RESET : "");
    fwrite(b.data, 1, b.len, a->out);
    fflush(a->out);
    sb_free(&b);
}
