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
    OPT_RAW,
    OPT_NOPROXY,
    OPT_PROXY_CACERT,
    OPT_KEY,
    OPT_PASS,
    OPT_PINNEDPUBKEY,
    OPT_CACERT,
    OPT_CAPATH,
    OPT_TLS10,
    OPT_TLS11,
    OPT_TLS12,
    OPT_TLS13,
    OPT_UNIX_SOCKET,
    OPT_RESOLVE,
    OPT_INTERFACE,
    OPT_KEEPALIVE_TIME,
    OPT_LIMIT_RATE,
    OPT_HTTP11,
    OPT_HTTP2,
    OPT_HTTP2_PRIOR,
    OPT_COOKIE_JAR,
    OPT_MAX_CONNECTIONS,
    OPT_MAX_HOST_CONNECTIONS,
};

static const char short_options[] = ":j:t:r:i:o:cfX:H:d:u:A:x:E:kb:46hV";

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
    {"raw", no_argument, NULL, OPT_RAW},
    {"user-agent", required_argument, NULL, 'A'},
    {"proxy", required_argument, NULL, 'x'},
    {"noproxy", required_argument, NULL, OPT_NOPROXY},
    {"proxy-cacert", required_argument, NULL, OPT_PROXY_CACERT},
    {"cert", required_argument, NULL, 'E'},
    {"key", required_argument, NULL, OPT_KEY},
    {"pass", required_argument, NULL, OPT_PASS},
    {"pinnedpubkey", required_argument, NULL, OPT_PINNEDPUBKEY},
    {"cacert", required_argument, NULL, OPT_CACERT},
    {"capath", required_argument, NULL, OPT_CAPATH},
    {"insecure", no_argument, NULL, 'k'},
    {"tlsv1", no_argument, NULL, OPT_TLS10},
    {"tlsv1.0", no_argument, NULL, OPT_TLS10},
    {"tlsv1.1", no_argument, NULL, OPT_TLS11},
    {"tlsv1.2", no_argument, NULL, OPT_TLS12},
    {"tlsv1.3", no_argument, NULL, OPT_TLS13},
    {"unix-socket", required_argument, NULL, OPT_UNIX_SOCKET},
    {"resolve", required_argument, NULL, OPT_RESOLVE},
    {"interface", required_argument, NULL, OPT_INTERFACE},
    {"ipv4", no_argument, NULL, '4'},
    {"ipv6", no_argument, NULL, '6'},
    {"keepalive-time", required_argument, NULL, OPT_KEEPALIVE_TIME},
    {"limit-rate", required_argument, NULL, OPT_LIMIT_RATE},
    {"http1.1", no_argument, NULL, OPT_HTTP11},
    {"http2", no_argument, NULL, OPT_HTTP2},
    {"http2-prior-knowledge", no_argument, NULL, OPT_HTTP2_PRIOR},
    {"cookie", required_argument, NULL, 'b'},
    {"cookie-jar", required_argument, NULL, OPT_COOKIE_JAR},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"max-host-connections", required_argument, NULL, OPT_MAX_HOST_CONNECTIONS},
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
    "\n";

static const char help_request[] =
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
    "  -A, --user-agent=NAME     User-Agent to send (default 'rqfetch/VERSION'; '' sends none)\n"
    "      --raw                 no content decoding: no Accept-Encoding is sent and bodies are\n"
    "                            saved as the server sent them (by default gzip, deflate, br and\n"
    "                            zstd bodies are decoded, like curl --compressed)\n"
    "  -b, --cookie=FILE         use a cookie jar, starting with the cookies of FILE (Netscape\n"
    "                            format, as curl -c writes it); cookies set by responses are\n"
    "                            sent with later requests\n"
    "      --cookie-jar=FILE     use a cookie jar and write it to FILE at the end\n"
    "\n";

static const char help_connection[] =
    "Connection:\n"
    "  -x, --proxy=URL           proxy: http://, https://, socks4://, socks4a://, socks5:// or\n"
    "                            socks5h:// (host names resolved by the proxy), with USER:PASS@\n"
    "                            if needed; '' uses no proxy. Without -x, http_proxy,\n"
    "                            https_proxy, all_proxy and no_proxy are honoured, as by curl\n"
    "      --noproxy=HOSTS       comma-separated hosts reached without the proxy ('*': all)\n"
    "      --proxy-cacert=FILE   CA certificates (PEM) to verify an https:// proxy with\n"
    "      --unix-socket=PATH    connect to this Unix domain socket instead of the URL's host\n"
    "      --resolve=HOST:PORT:ADDR[,ADDR...]\n"
    "                            use ADDR for HOST:PORT (repeatable)\n"
    "      --interface=NAME      connect from this interface or local address\n"
    "  -4, --ipv4                use only IPv4 addresses\n"
    "  -6, --ipv6                use only IPv6 addresses\n"
    "      --keepalive-time=SECONDS\n"
    "                            send TCP keep-alive probes after SECONDS idle\n"
    "      --limit-rate=BYTES    at most BYTES per second per transfer, each way (suffix k, M,\n"
    "                            G for 1024 multiples)\n"
    "      --http1.1             never HTTP/2\n"
    "      --http2               HTTP/2 over TLS when the server offers it (the default)\n"
    "      --http2-prior-knowledge\n"
    "                            cleartext HTTP/2 (h2c) without upgrade, for http:// URLs\n"
    "      --max-connections=N   at most N connections open at once (libcurl's limit, beside\n"
    "                            -j; 0 = none)\n"
    "      --max-host-connections=N\n"
    "                            at most N connections to one host (0 = none)\n"
    "\n"
    "TLS:\n"
    "      --cacert=FILE         CA certificates (PEM) to verify servers with\n"
    "      --capath=DIR          a folder of CA certificates (c_rehash layout)\n"
    "  -E, --cert=FILE[:PASS]    client certificate (PEM), with its key's passphrase\n"
    "      --key=FILE            the client certificate's key (PEM)\n"
    "      --pass=PASSPHRASE     the key's passphrase\n"
    "      --pinnedpubkey=sha256//HASH[;...] or FILE\n"
    "                            accept only a server with this public key\n"
    "      --tlsv1.0             use TLS 1.0 or later (--tlsv1 is the same)\n"
    "      --tlsv1.1             use TLS 1.1 or later\n"
    "      --tlsv1.2             use TLS 1.2 or later\n"
    "      --tlsv1.3             use TLS 1.3 only\n"
    "      --tlsv1               (as --tlsv1.0)\n"
    "  -k, --insecure            UNSAFE: do not verify the server's certificate and name\n"
    "\n";

static const char help_output[] =
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

/* A rate in bytes per second, with an optional k, M or G suffix (1024 multiples), as curl. */
static int parse_rate(const char *s, int64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long unit = 1;
    if (*end == 'k' || *end == 'K')
        unit = 1024, end++;
    else if (*end == 'm' || *end == 'M')
        unit = 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G')
        unit = 1024ULL * 1024 * 1024, end++;
    if (errno || *end || v == 0 || v > (unsigned long long)INT64_MAX / unit)
        return -1;
    *out = (int64_t)(v * unit);
    return 0;
}

static void add_transport(options *opt, const char *flag, rq_option option, const char *text, int64_t number)
{
    opt->transport = xrealloc(opt->transport, (opt->ntransport + 1) * sizeof *opt->transport);
    opt->transport[opt->ntransport++] = (transport_opt){flag, option, text, number};
}

static void add_text(options *opt, const char *flag, rq_option option, const char *text)
{
    add_transport(opt, flag, option, text, 0);
}

static void add_int(options *opt, const char *flag, rq_option option, int64_t number)
{
    add_transport(opt, flag, option, NULL, number);
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
        case OPT_RAW:
            add_int(opt, "--raw", RQ_OPTION_DECODE_CONTENT, 0);
            break;
        case 'A':
            add_text(opt, "-A/--user-agent", RQ_OPTION_USER_AGENT, optarg);
            break;
        case 'x':
            add_text(opt, "-x/--proxy", RQ_OPTION_PROXY, optarg);
            break;
        case OPT_NOPROXY:
            add_text(opt, "--noproxy", RQ_OPTION_NO_PROXY, optarg);
            break;
        case OPT_PROXY_CACERT:
            add_text(opt, "--proxy-cacert", RQ_OPTION_PROXY_CA_FILE, optarg);
            break;
        case 'E': {
            /* FILE[:PASSPHRASE], as curl (a ':' in the file name is written '\:' there; here the
             * last ':' splits when what follows is not a path). */
            const char *colon = strrchr(optarg, ':');
            if (colon && !strchr(colon, '/')) {
                char *file = strndup(optarg, (size_t)(colon - optarg));
                if (!file) {
                    fputs("rqfetch: out of memory\n", stderr);
                    exit(EXIT_USAGE);
                }
                opt->owned = xrealloc(opt->owned, (opt->nowned + 1) * sizeof *opt->owned);
                opt->owned[opt->nowned++] = file;
                add_text(opt, "-E/--cert", RQ_OPTION_CLIENT_CERT, file);
                add_text(opt, "-E/--cert", RQ_OPTION_KEY_PASSWORD, colon + 1);
            } else {
                add_text(opt, "-E/--cert", RQ_OPTION_CLIENT_CERT, optarg);
            }
            break;
        }
        case OPT_KEY:
            add_text(opt, "--key", RQ_OPTION_CLIENT_KEY, optarg);
            break;
        case OPT_PASS:
            add_text(opt, "--pass", RQ_OPTION_KEY_PASSWORD, optarg);
            break;
        case OPT_PINNEDPUBKEY:
            add_text(opt, "--pinnedpubkey", RQ_OPTION_PINNED_PUBLIC_KEY, optarg);
            break;
        case OPT_CACERT:
            opt->cacert = optarg;
            break;
        case OPT_CAPATH:
            add_text(opt, "--capath", RQ_OPTION_CA_DIRECTORY, optarg);
            break;
        case 'k':
            add_int(opt, "-k/--insecure", RQ_OPTION_UNSAFE_NO_TLS_VERIFY, 1);
            break;
        case OPT_TLS10:
        case OPT_TLS11:
        case OPT_TLS12:
        case OPT_TLS13:
            add_int(opt, "--tlsv1.x", RQ_OPTION_TLS_MIN_VERSION, RQ_TLS_1_0 + (c - OPT_TLS10));
            break;
        case OPT_UNIX_SOCKET:
            add_text(opt, "--unix-socket", RQ_OPTION_UNIX_SOCKET, optarg);
            break;
        case OPT_RESOLVE:
            add_text(opt, "--resolve", RQ_OPTION_RESOLVE, optarg);
            break;
        case OPT_INTERFACE:
            add_text(opt, "--interface", RQ_OPTION_INTERFACE, optarg);
            break;
        case '4':
        case '6':
            add_int(opt, c == '4' ? "-4/--ipv4" : "-6/--ipv6", RQ_OPTION_IP_VERSION, c == '4' ? RQ_IP_V4 : RQ_IP_V6);
            break;
        case OPT_KEEPALIVE_TIME:
            if (parse_count(optarg, 86400, &n) || n == 0)
                goto bad_value;
            add_int(opt, "--keepalive-time", RQ_OPTION_TCP_KEEPALIVE, (int64_t)n);
            break;
        case OPT_LIMIT_RATE: {
            int64_t rate;
            if (parse_rate(optarg, &rate))
                goto bad_value;
            add_int(opt, "--limit-rate", RQ_OPTION_MAX_RECV_SPEED, rate);
            add_int(opt, "--limit-rate", RQ_OPTION_MAX_SEND_SPEED, rate);
            break;
        }
        case OPT_HTTP11:
        case OPT_HTTP2:
        case OPT_HTTP2_PRIOR:
            add_int(opt, "--http*", RQ_OPTION_HTTP_VERSION,
                    c == OPT_HTTP11 ? RQ_HTTP_VERSION_1_1
                    : c == OPT_HTTP2 ? RQ_HTTP_VERSION_DEFAULT : RQ_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
            break;
        case 'b':
            opt->cookie_file = optarg;
            add_int(opt, "-b/--cookie", RQ_OPTION_COOKIES, 1);
            break;
        case OPT_COOKIE_JAR:
            opt->cookie_jar = optarg;
            add_int(opt, "--cookie-jar", RQ_OPTION_COOKIES, 1);
            break;
        case OPT_MAX_CONNECTIONS:
        case OPT_MAX_HOST_CONNECTIONS:
            if (parse_count(optarg, 100000, &n))
                goto bad_value;
            if (c == OPT_MAX_CONNECTIONS)
                opt->max_connections = n;
            else
                opt->max_host_connections = n;
            break;
        case OPT_NO_COLOR:
            opt->no_color = 1;
            break;
        case 'h':
            free(lists);
            fputs(usage_line, stdout);
            fputs(help_text, stdout); /* (in parts: C99 compilers need not take longer literals) */
            fputs(help_request, stdout);
            fputs(help_connection, stdout);
            fputs(help_output, stdout);
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
                               : c == OPT_KEEPALIVE_TIME ? "--keepalive-time needs whole seconds from 1 to 86400"
                               : c == OPT_LIMIT_RATE ? "--limit-rate needs a number of bytes per second (k, M, G)"
                               : c == OPT_MAX_CONNECTIONS || c == OPT_MAX_HOST_CONNECTIONS
                                   ? "--max-connections/--max-host-connections need a whole number from 0 to 100000"
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
    free(opt->transport);
    for (size_t i = 0; i < opt->nowned; i++)
        free(opt->owned[i]);
    free(opt->owned);
}

int apply_transport_options(const options *opt, rq_queue *queue)
{
    rq_request *defaults;
    rq_result res = rq_queue_get_defaults(queue, &defaults);
    if (res != RQ_OK) {
        fprintf(stderr, "rqfetch: cannot set up the queue: %s\n", rq_result_str(res));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < opt->ntransport; i++) {
        const transport_opt *t = &opt->transport[i];
        res = t->text ? rq_request_set_option_string(defaults, t->option, t->text)
                      : rq_request_set_option_int(defaults, t->option, t->number);
        if (res != RQ_OK) {
            if (t->text)
                return usage_error("bad value '%s' for %s: %s", t->text, t->flag, rq_result_str(res));
            return usage_error("%s: %s", t->flag, rq_result_str(res));
        }
    }
    if (opt->cacert && (res = rq_request_set_ca_file(defaults, opt->cacert)) != RQ_OK)
        return usage_error("bad value for --cacert: %s", rq_result_str(res));
    if ((opt->max_connections || opt->max_host_connections) &&
        (res = rq_queue_set_max_connections(queue, opt->max_connections, opt->max_host_connections)) != RQ_OK)
        return usage_error("bad connection limits: %s", rq_result_str(res));
    if (opt->cookie_file && (res = rq_queue_cookies_load(queue, opt->cookie_file)) != RQ_OK)
        return usage_error("cannot read the cookie file '%s'", opt->cookie_file);
    return 0;
}
