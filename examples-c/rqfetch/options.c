/* rqfetch: command line, --help and URL lists. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "rqfetch.h"

enum {
    OPT_FIFO = 256,
    OPT_LIFO,
    OPT_RETRY_DELAY,
    OPT_PLAIN,
    OPT_NO_COLOR,
};

static const char short_options[] = ":j:t:r:i:o:cfX:H:d:u:hV";

static const struct option long_options[] = {
    {"jobs", required_argument, NULL, 'j'},
    {"fifo", no_argument, NULL, OPT_FIFO},
    {"lifo", no_argument, NULL, OPT_LIFO},
    {"timeout", required_argument, NULL, 't'},
    {"retry", required_argument, NULL, 'r'},
    {"retry-delay", required_argument, NULL, OPT_RETRY_DELAY},
    {"input", required_argument, NULL, 'i'},
    {"output-dir", required_argument, NULL, 'o'},
    {"stdout", no_argument, NULL, 'c'},
    {"force", no_argument, NULL, 'f'},
    {"request", required_argument, NULL, 'X'},
    {"header", required_argument, NULL, 'H'},
    {"data", required_argument, NULL, 'd'},
    {"user", required_argument, NULL, 'u'},
    {"plain", no_argument, NULL, OPT_PLAIN},
    {"no-color", no_argument, NULL, OPT_NO_COLOR},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const char usage_line[] = "Usage: rqfetch [OPTION]... [URL]...\n";

static const char help_text[] =
    "Fetch many URLs at once with librequestqueue: a bounded number in parallel, in FIFO or LIFO\n"
    "order, with a time limit and retries per request, saving each body to a file (or writing it\n"
    "to standard output), with live progress and a summary at the end.\n"
    "\n"
    "URLs come from the arguments, then from each -i list in turn (one URL per line; blank lines\n"
    "and lines starting with # are ignored). With no URL argument and no -i, they are read from\n"
    "standard input when it is not a terminal. Only http:// and https:// URLs are accepted.\n"
    "\n"
    "Input:\n"
    "  -i, --input=FILE          read URLs from FILE, one per line ('-' for standard input);\n"
    "                            may be given several times\n"
    "\n"
    "Queue:\n"
    "  -j, --jobs=N              run at most N requests at once (default 4; 0 = no limit)\n"
    "      --fifo                start waiting requests in the order given (default)\n"
    "      --lifo                start the last waiting request first (the first N start at once,\n"
    "                            then the list is taken from its end)\n"
    "  -t, --timeout=SECONDS     time limit of each attempt, from its start (default 0: none)\n"
    "  -r, --retry=N             retry a failed attempt up to N times (default 0): timeouts,\n"
    "                            unknown hosts, refused and lost connections are retried, HTTP\n"
    "                            errors (status >= 400) are not\n"
    "      --retry-delay=SECONDS wait this long before each retry (default 1)\n"
    "\n"
    "Request:\n"
    "  -X, --request=METHOD      HTTP method (default GET, or POST with -d)\n"
    "  -H, --header='NAME: VALUE'\n"
    "                            add a header to every request (repeatable); 'NAME:' sends it\n"
    "                            with an empty value\n"
    "  -d, --data=DATA           send DATA as the body of every request; @FILE reads it from FILE,\n"
    "                            @- from standard input (bytes as they are); several -d are\n"
    "                            joined with '&'; sets 'Content-Type:\n"
    "                            application/x-www-form-urlencoded' unless -H gives one\n"
    "  -u, --user=USER:PASSWORD  Basic authentication credentials (not sent to other hosts\n"
    "                            after a redirect)\n"
    "\n"
    "Output:\n"
    "  -o, --output-dir=DIR      save bodies as files in DIR, created if missing (default: the\n"
    "                            current directory)\n"
    "  -c, --stdout              write bodies to standard output instead, in the order of the\n"
    "                            URLs; progress and summary then go to standard error\n"
    "  -f, --force               overwrite existing files (default: never overwrite, add .1, .2,\n"
    "                            ... to the name instead)\n"
    "      --plain               one line per finished request instead of progress bars, even on\n"
    "                            a terminal (the default when the output is not a terminal)\n"
    "      --no-color            no colors on a terminal (also when NO_COLOR is set)\n"
    "  -h, --help                show this help and exit\n"
    "  -V, --version             show the versions of rqfetch and librequestqueue and exit\n"
    "\n"
    "Files are named after the URL's last path segment (percent-decoded, 'index.html' when\n"
    "empty), then '_' and the query if there is one (wget keeps the query too); '/', control and\n"
    "other unsafe characters, and a leading '.' or '-', become '_': http://host/bytes?n=5&rate=9\n"
    "gives 'bytes_n=5_rate=9'. A body is written when its request completes, to a temporary\n"
    "file renamed into place, so no partial file is ever left; bodies of failed requests are\n"
    "not saved.\n"
    "\n"
    "On a terminal, a bar per running transfer shows bytes, rate and time left (a bouncing bar\n"
    "when the size is unknown) above an overall bar; failures and retried requests are listed as\n"
    "they finish. Otherwise one line is printed per finished request. Ctrl-C cancels the running\n"
    "and waiting requests, keeps the files already complete, and prints the summary; a second\n"
    "Ctrl-C quits at once. The summary lists every request (status, HTTP status, bytes, time,\n"
    "attempts, file or error) and the totals.\n"
    "\n"
    "Exit status: 0 when every request succeeded, 1 when any failed, 2 for bad usage or input,\n"
    "130 when interrupted by Ctrl-C (SIGINT), 143 by SIGTERM, 129 by SIGHUP.\n";

int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("rqfetch: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fputs(usage_line, stderr);
    fputs("Try 'rqfetch --help' for more information.\n", stderr);
    return EXIT_USAGE;
}

static int parse_count(const char *s, unsigned long max, unsigned long *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    if (!*s)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0 || v > 1e6)
        return -1;
    *out = v;
    return 0;
}

/* Reads a whole file (or standard input for "-") into memory. Returns 0, or -1 with errno. */
static int read_all(const char *path, uint8_t **out, size_t *out_size)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, len = 0;
    uint8_t *buf = xmalloc(cap);
    for (;;) {
        if (len == cap)
            buf = xrealloc(buf, cap *= 2);
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    int failed = ferror(f);
    int saved = errno;
    if (f != stdin)
        fclose(f);
    if (failed) {
        free(buf);
        errno = saved ? saved : EIO;
        return -1;
    }
    *out = buf;
    *out_size = len;
    return 0;
}

static void add_url(options *opt, const char *url, char *origin)
{
    opt->urls = xrealloc(opt->urls, (opt->nurls + 1) * sizeof *opt->urls);
    opt->urls[opt->nurls].url = xstrdup(url);
    opt->urls[opt->nurls].origin = origin;
    opt->nurls++;
}

/* Reads a URL list. Returns 0, or EXIT_USAGE after a message. */
static int read_list(options *opt, const char *path)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *shown = is_stdin ? "standard input" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "r");
    if (!f)
        return usage_error("cannot read the URL list '%s': %s", shown, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long lineno = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *s = line, *e = line + n;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *e = '\0';
        if (*s == '\0' || *s == '#')
            continue;
        if (strlen(s) != (size_t)(e - s)) {
            free(line);
            if (!is_stdin)
                fclose(f);
            return usage_error("%s:%lu: the line contains a NUL byte", shown, lineno);
        }
        char *origin;
        if (asprintf(&origin, "%s:%lu", shown, lineno) < 0) {
            fputs("rqfetch: out of memory\n", stderr);
            exit(EXIT_USAGE);
        }
        add_url(opt, s, origin);
    }
    int failed = ferror(f);
    int saved = errno;
    free(line);
    if (!is_stdin)
        fclose(f);
    if (failed)
        return usage_error("cannot read the URL list '%s': %s", shown, strerror(saved));
    return 0;
}

/* Names an option for messages, from the argument that holds it. */
static void report_bad_option(char **argv, int optind_now, int code, int optopt_now)
{
    const char *arg = optind_now > 0 ? argv[optind_now - 1] : "";
    if (code == ':') {
        if (strncmp(arg, "--", 2) == 0)
            usage_error("option '%s' needs a value", arg);
        else
            usage_error("option '-%c' needs a value", optopt_now);
        return;
    }
    if (optopt_now == 0 || optopt_now >= 256 || strchr(short_options, optopt_now)) {
        /* A long option: unknown, ambiguous, or given a value it does not take. */
        size_t len = strcspn(arg, "=");
        if (optopt_now != 0) {
            usage_error("option '%.*s' takes no value", (int)len, arg);
            return;
        }
        int matches = 0;
        for (const struct option *o = long_options; o->name; o++)
            if (len > 2 && strncmp(o->name, arg + 2, len - 2) == 0)
                matches++;
        if (matches > 1)
            usage_error("ambiguous option '%.*s'", (int)len, arg);
        else
            usage_error("unknown option '%.*s'", (int)len, arg);
        return;
    }
    usage_error("unknown option '-%c'", optopt_now);
}

int parse_options(int argc, char **argv, options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->jobs = 4;
    opt->order = RQ_ORDER_FIFO;
    opt->retry_delay = 1.0;
    opt->output_dir = ".";
    const char **lists = NULL;
    size_t nlists = 0;
    int stdin_used_by_data = 0;
    int output_dir_given = 0;
    unsigned long n;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        switch (c) {
        case 'j':
            if (parse_count(optarg, 100000, &n))
                goto bad_value;
            opt->jobs = n;
            break;
        case OPT_FIFO:
            opt->order = RQ_ORDER_FIFO;
            break;
        case OPT_LIFO:
            opt->order = RQ_ORDER_LIFO;
            break;
        case 't':
            if (parse_seconds(optarg, &opt->timeout))
                goto bad_value;
            break;
        case 'r':
            if (parse_count(optarg, 999999, &n))
                goto bad_value;
            opt->retries = (unsigned)n;
            break;
        case OPT_RETRY_DELAY:
            if (parse_seconds(optarg, &opt->retry_delay))
                goto bad_value;
            break;
        case 'i':
            lists = xrealloc(lists, (nlists + 1) * sizeof *lists);
            lists[nlists++] = optarg;
            break;
        case 'o':
            if (!*optarg)
                goto bad_value;
            opt->output_dir = optarg;
            output_dir_given = 1;
            break;
        case 'c':
            opt->to_stdout = 1;
            break;
        case 'f':
            opt->force = 1;
            break;
        case 'X':
            opt->method = optarg;
            break;
        case 'H': {
            const char *colon = strchr(optarg, ':');
            if (!colon || colon == optarg) {
                free(lists);
                return usage_error("bad header '%s': expected 'NAME: VALUE'", optarg);
            }
            opt->headers = xrealloc(opt->headers, (opt->nheaders + 1) * sizeof *opt->headers);
            opt->headers[opt->nheaders++] = optarg;
            break;
        }
        case 'd': {
            const uint8_t *piece = (const uint8_t *)optarg;
            size_t piece_len = strlen(optarg);
            uint8_t *file_data = NULL;
            if (optarg[0] == '@') {
                if (strcmp(optarg, "@-") == 0) {
                    if (stdin_used_by_data) {
                        free(lists);
                        return usage_error("standard input can be read only once (-d @-)");
                    }
                    stdin_used_by_data = 1;
                }
                if (read_all(optarg + 1, &file_data, &piece_len)) {
                    int e = errno;
                    free(lists);
                    return usage_error("cannot read the data file '%s': %s", optarg + 1,
                                       strerror(e));
                }
                piece = file_data;
            }
            size_t sep = opt->has_body ? 1 : 0;
            opt->body = xrealloc(opt->body, opt->body_size + sep + piece_len + 1);
            if (sep)
                opt->body[opt->body_size] = '&';
            if (piece_len)
                memcpy(opt->body + opt->body_size + sep, piece, piece_len);
            opt->body_size += sep + piece_len;
            opt->has_body = 1;
            free(file_data);
            break;
        }
        case 'u': {
            const char *colon = strchr(optarg, ':');
            if (!colon) {
                free(lists);
                return usage_error("option '-u' needs USER:PASSWORD, got '%s'", optarg);
            }
            free(opt->user);
            free(opt->password);
            opt->user = strndup(optarg, (size_t)(colon - optarg));
            opt->password = xstrdup(colon + 1);
            if (!opt->user) {
                fputs("rqfetch: out of memory\n", stderr);
                exit(EXIT_USAGE);
            }
            break;
        }
        case OPT_PLAIN:
            opt->plain = 1;
            break;
        case OPT_NO_COLOR:
            opt->no_color = 1;
            break;
        case 'h':
            free(lists);
            fputs(usage_line, stdout);
            fputs(help_text, stdout);
            return 0;
        case 'V':
            free(lists);
            printf("rqfetch %s\nlibrequestqueue %s (built against %s)\n", RQFETCH_VERSION,
                   rq_version_string(), RQ_VERSION_STRING);
            return 0;
        case ':':
        case '?':
        default:
            free(lists);
            report_bad_option(argv, optind, c, optopt);
            return EXIT_USAGE;
        }
        continue;
    bad_value:
        free(lists);
        if (c == 'o')
            return usage_error("option '-o' needs a directory name");
        {
            const char *what = c == 'j'   ? "-j/--jobs needs a whole number from 0 to 100000"
                               : c == 'r' ? "-r/--retry needs a whole number from 0 to 999999"
                               : c == 't' ? "-t/--timeout needs a number of seconds from 0 to 1e6"
                                          : "--retry-delay needs a number of seconds from 0 to 1e6";
            return usage_error("bad value '%s': %s", optarg, what);
        }
    }

    if (opt->to_stdout && output_dir_given) {
        free(lists);
        return usage_error("-c/--stdout and -o/--output-dir cannot be used together");
    }

    for (int i = optind; i < argc; i++) {
        char *origin;
        if (asprintf(&origin, "argument %d", i - optind + 1) < 0) {
            fputs("rqfetch: out of memory\n", stderr);
            exit(EXIT_USAGE);
        }
        add_url(opt, argv[i], origin);
    }
    int read_stdin = 0;
    for (size_t i = 0; i < nlists; i++)
        if (strcmp(lists[i], "-") == 0)
            read_stdin = 1;
    if (read_stdin && stdin_used_by_data) {
        free(lists);
        return usage_error("standard input cannot hold both the URL list (-i -) and the data (-d @-)");
    }
    for (size_t i = 0; i < nlists; i++) {
        int rc = read_list(opt, lists[i]);
        if (rc) {
            free(lists);
            return rc;
        }
    }
    if (opt->nurls == 0 && nlists == 0) {
        free(lists);
        if (isatty(STDIN_FILENO) || stdin_used_by_data)
            return usage_error("no URL given");
        int rc = read_list(opt, "-");
        if (rc)
            return rc;
        if (opt->nurls == 0)
            return usage_error("no URL given (standard input holds none)");
        return -1;
    }
    free(lists);
    if (opt->nurls == 0)
        return usage_error("no URL given (the URL lists are empty)");
    return -1;
}

void free_options(options *opt)
{
    for (size_t i = 0; i < opt->nurls; i++) {
        free(opt->urls[i].url);
        free(opt->urls[i].origin);
    }
    free(opt->urls);
    free(opt->headers);
    free(opt->body);
    free(opt->user);
    free(opt->password);
}
