/*
 * rqfetch: a parallel downloader on librequestqueue's C API.
 *
 * The queue runs in RQ_DELIVERY_DISPATCH mode: every callback runs on this one thread, inside
 * rq_queue_dispatch(), called when poll() says the queue's descriptor is readable. So no lock is
 * needed anywhere. The same poll() waits on a self-pipe written by the signal handler (Ctrl-C) and
 * times out every 100 ms to redraw the bars on a terminal.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "rqfetch.h"

#define FRAME_SECONDS 0.1

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t signal_count;
static int signal_out_fd = STDOUT_FILENO;

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The first signal asks the main loop to cancel everything; a second one quits at once. */
static void on_signal(int sig)
{
    int saved = errno;
    if (++signal_count > 1) {
        if (g_tmp_active)
            unlink(g_tmp_path);
        if (g_cursor_hidden) {
            static const char show[] = "\033[?25h\n";
            if (write(signal_out_fd, show, sizeof show - 1) < 0) {
                /* nothing to do: we are leaving */
            }
        }
        _exit(128 + sig);
    }
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {
        /* the pipe is non-blocking; a full pipe already holds a wake-up */
    }
    errno = saved;
}

static int install_signals(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    static const int signals[] = {SIGINT, SIGHUP, SIGTERM};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        struct sigaction old;
        if (sigaction(signals[i], NULL, &old) != 0)
            return -1;
        /* A program started with SIGINT or SIGHUP ignored (a background job of a script, nohup)
         * keeps ignoring it, as the shell intended. */
        if (old.sa_handler == SIG_IGN && signals[i] != SIGTERM)
            continue;
        if (sigaction(signals[i], &sa, NULL) != 0)
            return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* Standard descriptors that are closed are opened on /dev/null, so that no descriptor opened later
 * (a file being saved, the signal pipe) takes their place and receives the output. */
static void guard_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) < 0)
            _exit(EXIT_SOME_FAILED);
}

/* Shows the cursor again whatever way the program ends. */
static void restore_cursor(void)
{
    if (g_cursor_hidden) {
        static const char show[] = "\033[?25h";
        if (write(signal_out_fd, show, sizeof show - 1) < 0) {
            /* the terminal is gone */
        }
        g_cursor_hidden = 0;
    }
}

static void update_size(app *a)
{
    struct winsize ws;
    if (ioctl(a->out_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        a->width = ws.ws_col;
        a->height = ws.ws_row > 0 ? ws.ws_row : 24;
    } else {
        a->width = 80;
        a->height = 24;
    }
}

/* ---- the queue's view ---------------------------------------------------------------------------- */

static void mark_running(job *j, double now)
{
    if (j->status != JOB_WAITING)
        return;
    j->status = JOB_RUNNING;
    j->start = now;
    j->attempt_start = now;
    j->seen_attempt = 1;
}

/* Reads the queue's snapshot: the running requests in the order they started (for the bars and
 * the start times), and how many wait. */
static double last_scan;

static void scan_queue(app *a, double now)
{
    rq_request **list;
    size_t n;
    a->nrunning = 0;
    if (rq_queue_snapshot(a->queue, &list, &n) != RQ_OK)
        return;
    a->nwaiting = 0;
    for (size_t i = 0; i < n; i++) {
        rq_request_state state;
        void *ctx;
        if (rq_request_get_state(list[i], &state) != RQ_OK)
            continue;
        if (state == RQ_STATE_WAITING) {
            a->nwaiting = n - i; /* the waiting ones come after the running ones */
            break;
        }
        if (state != RQ_STATE_RUNNING || rq_request_get_context(list[i], &ctx) != RQ_OK || !ctx)
            continue;
        job *j = ctx;
        mark_running(j, now);
        if (a->nrunning == a->running_cap) {
            a->running_cap = a->running_cap ? a->running_cap * 2 : 16;
            a->running = xrealloc(a->running, a->running_cap * sizeof *a->running);
        }
        a->running[a->nrunning++] = j;
    }
    rq_snapshot_free(list);
    last_scan = now;
}

/* ---- callbacks (all on the main thread, inside rq_queue_dispatch) --------------------------- */

static void on_progress(void *context, rq_request *request, double progress, int64_t done,
                        int64_t total)
{
    (void)request;
    (void)progress;
    job *j = context;
    if (j->status != JOB_WAITING && j->status != JOB_RUNNING)
        return;
    double now = now_seconds();
    mark_running(j, now);
    if (done < j->done) { /* a retry starts again from 0 */
        j->seen_attempt++;
        j->attempt_start = now;
    }
    j->done = done;
    j->total = total;
}

static void fail_job(app *a, job *j, const char *message)
{
    if (j->status == JOB_OK)
        a->n_ok--;
    j->status = JOB_FAILED;
    a->n_failed++;
    free(j->message);
    j->message = xstrdup(message);
}

/* --stdout: writes the bodies that are ready, in the order of the URLs. */
static void flush_bodies(app *a)
{
    while (a->next_body < a->njobs) {
        job *j = &a->jobs[a->next_body];
        if (j->status == JOB_WAITING || j->status == JOB_RUNNING)
            return;
        if (j->held && !a->stdout_broken) {
            if (fwrite(j->held, 1, j->held_size, stdout) != j->held_size || fflush(stdout) != 0) {
                char msg[256];
                snprintf(msg, sizeof msg, "cannot write to standard output: %s", strerror(errno));
                a->stdout_broken = 1;
                fail_job(a, j, msg);
                display_note(a, "rqfetch: %s; cancelling the other requests", msg);
                rq_queue_cancel_all(a->queue);
            }
        }
        free(j->held);
        j->held = NULL;
        a->next_body++;
    }
}

static int completions_since_scan;

static void on_complete(void *context, rq_request *request, const rq_response *response)
{
    (void)request;
    job *j = context;
    app *a = j->app;
    double now = now_seconds();
    rq_outcome outcome = rq_response_outcome(response);
    size_t size = 0;
    const uint8_t *body = rq_response_body(response, &size);

    j->end = now;
    j->http_status = rq_response_status(response);
    j->attempts = rq_response_attempts(response);
    j->bytes = (int64_t)size;
    if (j->attempts == 0)
        j->start = 0; /* never started (cancelled while waiting) */
    else if (j->start == 0)
        j->start = last_scan; /* it was not running at the last look, so it started since */
    a->n_completed++;
    a->bytes_done += (int64_t)size;
    if (j->attempts > 1)
        a->n_retried++;

    if (outcome == RQ_OUTCOME_OK) {
        j->status = JOB_OK;
        a->n_ok++;
        if (a->opt.to_stdout) {
            if (!a->stdout_broken) {
                j->held = xmalloc(size);
                if (size)
                    memcpy(j->held, body, size);
                j->held_size = size;
            }
        } else {
            char err[640];
            if (save_body(a, j, body, size, &j->saved_as, err, sizeof err) != 0)
                fail_job(a, j, err);
        }
    } else if (outcome == RQ_OUTCOME_CANCELLED) {
        j->status = JOB_CANCELLED;
        a->n_cancelled++;
        j->message = xstrdup(a->interrupted ? "cancelled: interrupted"
                                            : rq_response_error_message(response));
    } else {
        const char *msg = rq_response_error_message(response);
        j->status = JOB_FAILED;
        a->n_failed++;
        j->message = xstrdup(*msg ? msg : rq_outcome_str((int)outcome));
    }
    if (a->opt.to_stdout)
        flush_bodies(a);
    completions_since_scan++;
    display_completed(a, j);
}

/* ---- setting up ---------------------------------------------------------------------------------- */

/* The length of "scheme://host:port" at the start of a URL. */
static size_t origin_len(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    return (size_t)(p - url) + strcspn(p, "/?#");
}

static char *label_of(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    p += strcspn(p, "/?#");
    return xstrdup(*p ? p : "/");
}

/* Splits "Name: value" (as given to -H) into a trimmed name and value. */
static void split_header(const char *h, char **name, char **value)
{
    const char *colon = strchr(h, ':');
    size_t n = (size_t)(colon - h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    *name = strndup(h, n);
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t vn = strlen(v);
    while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
        vn--;
    *value = strndup(v, vn);
    if (!*name || !*value) {
        fputs("rqfetch: out of memory\n", stderr);
        exit(EXIT_SOME_FAILED);
    }
}

static int has_header(const options *opt, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < opt->nheaders; i++)
        if (strncasecmp(opt->headers[i], name, n) == 0 &&
            (opt->headers[i][n] == ':' || opt->headers[i][n] == ' ' || opt->headers[i][n] == '\t'))
            return 1;
    return 0;
}

/* Creates the request for job `j`. Returns NULL after reporting bad input. */
static rq_request *make_request(app *a, job *j, const url_entry *u)
{
    const options *opt = &a->opt;
    rq_request *r;
    rq_result res = rq_request_new(u->url, &r);
    if (res != RQ_OK) {
        usage_error("bad URL '%s' (%s): %s", u->url, u->origin, rq_result_str(res));
        return NULL;
    }
    const char *method = opt->method ? opt->method : opt->has_body ? "POST" : NULL;
    if (method && (res = rq_request_set_method(r, method)) != RQ_OK) {
        usage_error("bad method '%s' for -X: %s", method, rq_result_str(res));
        goto fail;
    }
    int agent_given = has_header(opt, "User-Agent"); /* -H, or -A (the queue's defaults) */
    for (size_t i = 0; i < opt->ntransport; i++)
        agent_given |= opt->transport[i].option == RQ_OPTION_USER_AGENT;
    if (!agent_given && (res = rq_request_set_header(r, "User-Agent", "rqfetch/" RQFETCH_VERSION)) != RQ_OK)
        goto fail_header;
    if (opt->has_body && !has_header(opt, "Content-Type") &&
        (res = rq_request_set_header(r, "Content-Type", "application/x-www-form-urlencoded")) != RQ_OK)
        goto fail_header;
    for (size_t i = 0; i < opt->nheaders; i++) {
        char *name, *value;
        split_header(opt->headers[i], &name, &value);
        res = rq_request_set_header(r, name, value);
        free(name);
        free(value);
        if (res != RQ_OK) {
            usage_error("bad header '%s' for -H: %s", opt->headers[i], rq_result_str(res));
            goto fail;
        }
    }
    if (opt->has_body && (res = rq_request_set_body(r, opt->body, opt->body_size)) != RQ_OK) {
        usage_error("cannot set the body: %s", rq_result_str(res));
        goto fail;
    }
    if ((res = rq_request_set_timeout(r, opt->timeout)) != RQ_OK ||
        (opt->retries &&
         ((res = rq_request_set_retry(r, 1)) != RQ_OK ||
          (res = rq_request_set_retry_delay(r, opt->retry_delay)) != RQ_OK ||
          (res = rq_request_set_max_attempts(r, opt->retries + 1)) != RQ_OK)) ||
        (opt->user && (res = rq_request_set_credentials(r, opt->user, opt->password)) != RQ_OK) ||
        (res = rq_request_set_completion(r, on_complete, j, NULL)) != RQ_OK ||
        (res = rq_request_set_download_progress(r, on_progress)) != RQ_OK) {
        usage_error("cannot set up the request for '%s': %s", u->url, rq_result_str(res));
        goto fail;
    }
    return r;
fail_header:
    usage_error("cannot set a default header: %s", rq_result_str(res));
fail:
    rq_request_free(r);
    return NULL;
}

static void free_app(app *a)
{
    for (size_t i = 0; i < a->njobs; i++) {
        free(a->jobs[i].label);
        free(a->jobs[i].message);
        free(a->jobs[i].saved_as);
        free(a->jobs[i].held);
    }
    free(a->jobs);
    free(a->running);
    sb_free(&a->scroll);
    names_free(&a->names);
    free_options(&a->opt);
}

int main(int argc, char **argv)
{
    static app the_app;
    app *a = &the_app;

    guard_std_fds();
    int rc = parse_options(argc, argv, &a->opt);
    if (rc >= 0) {
        free_options(&a->opt);
        return rc;
    }
    if (rq_version_number() < RQ_VERSION_NUMBER ||
        rq_version_number() / 10000 != RQ_VERSION_MAJOR) {
        fprintf(stderr, "rqfetch: built for librequestqueue %s but %s is loaded\n",
                RQ_VERSION_STRING, rq_version_string());
        free_options(&a->opt);
        return EXIT_SOME_FAILED;
    }

    /* Where the progress and summary go, and how. */
    a->out = a->opt.to_stdout ? stderr : stdout;
    a->out_fd = fileno(a->out);
    signal_out_fd = a->out_fd;
    const char *term = getenv("TERM");
    const char *no_color = getenv("NO_COLOR");
    a->tty = !a->opt.plain && isatty(a->out_fd) && !(term && strcmp(term, "dumb") == 0) &&
             !(a->opt.to_stdout && isatty(STDOUT_FILENO));
    a->color = a->tty && !a->opt.no_color && !(no_color && *no_color);
    setvbuf(a->out, NULL, _IOFBF, 1 << 16);
    update_size(a);

    if (!a->opt.to_stdout) {
        char err[600];
        if (prepare_output_dir(a->opt.output_dir, err, sizeof err) != 0) {
            usage_error("%s", err);
            free_options(&a->opt);
            return EXIT_USAGE;
        }
    }

    rq_result res = rq_queue_new(RQ_DELIVERY_DISPATCH, &a->queue);
    int qfd = -1;
    if (res == RQ_OK)
        res = rq_queue_get_fd(a->queue, &qfd);
    if (res == RQ_OK)
        res = rq_queue_set_max_concurrent(a->queue, a->opt.jobs);
    if (res == RQ_OK)
        res = rq_queue_set_order(a->queue, a->opt.order);
    if (res == RQ_OK) /* every URL given is fetched, even one given twice */
        res = rq_queue_set_duplicates(a->queue, RQ_DUPLICATES_ALLOW);
    if (res != RQ_OK) {
        fprintf(stderr, "rqfetch: cannot set up the queue: %s\n", rq_result_str(res));
        rq_queue_free(a->queue);
        free_options(&a->opt);
        return EXIT_SOME_FAILED;
    }
    if (apply_transport_options(&a->opt, a->queue) != 0) {
        rq_queue_free(a->queue);
        free_options(&a->opt);
        return EXIT_USAGE;
    }

    /* Every request is built and checked before any is added: bad input fetches nothing. */
    a->njobs = a->opt.nurls;
    a->jobs = calloc(a->njobs, sizeof *a->jobs);
    rq_request **requests = calloc(a->njobs, sizeof *requests);
    if (!a->jobs || !requests) {
        fputs("rqfetch: out of memory\n", stderr);
        return EXIT_SOME_FAILED;
    }
    for (size_t i = 0; i < a->njobs; i++) {
        job *j = &a->jobs[i];
        j->app = a;
        j->index = i;
        j->url = a->opt.urls[i].url;
        j->label = label_of(j->url);
        j->total = -1;
        requests[i] = make_request(a, j, &a->opt.urls[i]);
        if (!requests[i]) {
            for (size_t k = 0; k < i; k++)
                rq_request_free(requests[k]);
            free(requests);
            rq_queue_free(a->queue);
            free_app(a);
            return EXIT_USAGE;
        }
    }

    a->common_origin_len = a->njobs ? origin_len(a->jobs[0].url) : 0;
    for (size_t i = 1; i < a->njobs && a->common_origin_len; i++)
        if (origin_len(a->jobs[i].url) != a->common_origin_len ||
            strncmp(a->jobs[i].url, a->jobs[0].url, a->common_origin_len) != 0)
            a->common_origin_len = 0;

    if (install_signals() != 0) {
        fprintf(stderr, "rqfetch: cannot set up signal handling: %s\n", strerror(errno));
        return EXIT_SOME_FAILED;
    }

    a->t0 = now_seconds();
    atexit(restore_cursor);
    display_start(a);
    for (size_t i = 0; i < a->njobs; i++) {
        res = rq_add(a->queue, requests[i]);
        if (res != RQ_OK) { /* no completion will come for it */
            job *j = &a->jobs[i];
            j->status = JOB_FAILED;
            j->message = xstrdup(rq_result_str(res));
            a->n_failed++;
            a->n_completed++;
            display_completed(a, j);
        }
        rq_request_free(requests[i]); /* the queue keeps what it needs */
    }
    free(requests);
    scan_queue(a, now_seconds());

    double next_frame = 0;
    int cancelled_all = 0;
    while (a->n_completed < a->njobs) {
        double now = now_seconds();
        int timeout_ms = 250;
        if (a->tty)
            timeout_ms = next_frame > now ? (int)((next_frame - now) * 1000) + 1 : 0;
        struct pollfd fds[2] = {{.fd = qfd, .events = POLLIN}, {.fd = sig_pipe[0], .events = POLLIN}};
        if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
            fprintf(stderr, "rqfetch: poll: %s\n", strerror(errno));
            break;
        }
        unsigned char sig;
        while (read(sig_pipe[0], &sig, 1) == 1)
            if (!a->interrupted)
                a->interrupted = sig;
        if (a->interrupted && !cancelled_all) {
            scan_queue(a, now_seconds());
            display_note(a, "Interrupted: cancelling %zu running and %zu waiting request%s "
                            "(Ctrl-C again quits at once)",
                         a->nrunning, a->nwaiting, a->nrunning + a->nwaiting == 1 ? "" : "s");
            rq_queue_cancel_all(a->queue);
            cancelled_all = 1;
        }
        res = rq_queue_dispatch(a->queue, 0, NULL);
        if (res != RQ_OK) {
            fprintf(stderr, "rqfetch: dispatch: %s\n", rq_result_str(res));
            break;
        }
        now = now_seconds();
        if (completions_since_scan || (a->tty && now >= next_frame)) {
            scan_queue(a, now);
            completions_since_scan = 0;
        }
        if (a->tty && now >= next_frame) {
            update_size(a);
            display_draw(a, now);
            next_frame = now + FRAME_SECONDS;
        }
    }

    double end = now_seconds();
    display_finish(a, end);
    if (a->opt.cookie_jar && (res = rq_queue_cookies_save(a->queue, a->opt.cookie_jar)) != RQ_OK)
        fprintf(stderr, "rqfetch: cannot write the cookie jar '%s'\n", a->opt.cookie_jar);
    rq_queue_free(a->queue);
    a->queue = NULL;
    print_summary(a, end);

    int code = a->interrupted ? 128 + a->interrupted
               : (a->n_failed || a->n_cancelled) ? EXIT_SOME_FAILED
                                                 : EXIT_ALL_OK;
    free_app(a);
    return code;
}
