/*
 * test_security.c: the library's security defaults, checked against real servers.
 *
 *   1. TLS certificates are verified by default: an HTTPS fixture with a self-signed certificate
 *      made at test time is refused (RQ_OUTCOME_TLS, and the server never sees an HTTP request);
 *      it is accepted once that certificate is given with rq_request_set_ca_file, also after a
 *      redirect from http; a CA file that did not sign it, a CA file that does not exist and a
 *      CA file reset to NULL (system CAs) are all refused (verification fails closed); the host
 *      name is verified too (the certificate is for 127.0.0.1, "localhost" is refused).
 *   2. Only http and https: rq_request_new refuses every other scheme
 *      (RQ_ERR_UNSUPPORTED_SCHEME), and a redirect to any other scheme ends with
 *      RQ_OUTCOME_BAD_REDIRECT without any connection to the target (a listening socket of this
 *      program, named as the target's host and port, is never connected to; an http redirect to
 *      the same socket is, which shows the probe works).
 *   3. Credentials do not follow a redirect to another host or port: user:password in the URL,
 *      rq_request_set_credentials and an Authorization header (complements
 *      Tests/RequestQueueTests/SecurityTests.swift, which covers set_credentials and the header
 *      to another host name, the redirect limit and the maximum response size).
 *   4. Limits, where SecurityTests.swift does not look: with the default limit of 10 redirects the
 *      server sees exactly 11 requests and never a 12th; the maximum response size also bounds a
 *      streamed body (body callback) and a body written to a file.
 *
 *   test_security BASE_URL TLS_BASE_URL CERT_FILE OTHER_CERT_FILE   (run by with_servers.py --tls)
 */
#include "rel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

static const char *base, *tls_base, *cert, *other_cert;

static void percent_encode(const char *in, char *out, size_t size) {
    size_t j = 0;
    for (const char *p = in; *p && j + 4 < size; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
            out[j++] = *p;
        else
            j += (size_t)snprintf(out + j, 4, "%%%02X", (unsigned char)*p);
    }
    out[j] = '\0';
}

struct tls_config {
    const char *ca_file;   /* NULL: none */
    int reset_to_null;     /* set ca_file, then NULL again */
};

static void configure_tls(rq_request *request, const void *arg) {
    const struct tls_config *c = arg;
    if (c && c->ca_file)
        CHECK_OK(rq_request_set_ca_file(request, c->ca_file));
    if (c && c->reset_to_null)
        CHECK_OK(rq_request_set_ca_file(request, NULL));
}

/* The number of requests with this id that the (plain or TLS) fixture logged. */
static int logged(int tls, const char *id) {
    char *log;
    if (tls) {
        char *url = rqt_url(tls_base, "/_/log");
        struct tls_config c = {cert, 0};
        struct rel_result r = rel_run(url, configure_tls, &c);
        CHECK(r.outcome == RQ_OUTCOME_OK && r.status == 200, "GET %s: %s %d", url, rq_outcome_str((int)r.outcome), r.status);
        free(url);
        log = r.body;
    } else {
        log = rqt_get(base, "/_/log");
    }
    int n = rqt_log_count_id(log, id);
    free(log);
    return n;
}

/* `redirected`: the request first got a 302 from the plain fixture (its status stays 302). */
static void expect_tls_refused(const char *what, const char *url, const struct tls_config *c, const char *id,
                               int redirected) {
    struct rel_result r = rel_run(url, configure_tls, c);
    CHECK(r.outcome == RQ_OUTCOME_TLS, "%s: outcome %s (status %d, \"%s\"), expected %s", what,
          rq_outcome_str((int)r.outcome), r.status, r.message, rq_outcome_str(RQ_OUTCOME_TLS));
    CHECK(r.status == (redirected ? 302 : 0) && r.size == 0, "%s: status %d and %zu body bytes after a TLS failure",
          what, r.status, r.size);
    CHECK(logged(1, id) == 0, "%s: the HTTPS server logged a request although TLS failed", what);
    printf("  refused as it should be: %s (%s)\n", what, r.message);
    free(r.body);
}

static void test_tls(void) {
    printf("TLS verification:\n");
    char *url = rqt_url(tls_base, "/bytes?n=64&id=tls-default");
    expect_tls_refused("self-signed certificate, no CA file (the default)", url, NULL, "tls-default", 0);
    free(url);

    url = rqt_url(tls_base, "/bytes?n=64&id=tls-ca");
    struct tls_config with_ca = {cert, 0};
    struct rel_result r = rel_run(url, configure_tls, &with_ca);
    CHECK(r.outcome == RQ_OUTCOME_OK && r.status == 200, "with its CA file: outcome %s, status %d (\"%s\")",
          rq_outcome_str((int)r.outcome), r.status, r.message);
    CHECK(r.size == 64 && rel_is_pattern((const uint8_t *)r.body, r.size), "with its CA file: %zu bytes", r.size);
    CHECK(logged(1, "tls-ca") == 1, "the HTTPS server did not log the request made with the CA file");
    printf("  accepted with rq_request_set_ca_file(its certificate): 200, 64 bytes\n");
    free(r.body);
    free(url);

    url = rqt_url(tls_base, "/bytes?n=64&id=tls-other");
    struct tls_config other = {other_cert, 0};
    expect_tls_refused("a CA file that did not sign the certificate", url, &other, "tls-other", 0);
    free(url);

    url = rqt_url(tls_base, "/bytes?n=64&id=tls-missing");
    struct tls_config missing = {"/nonexistent/rq-ca.pem", 0};
    expect_tls_refused("a CA file that does not exist", url, &missing, "tls-missing", 0);
    free(url);

    url = rqt_url(tls_base, "/bytes?n=64&id=tls-empty");
    struct tls_config empty = {"", 0};
    expect_tls_refused("a CA file path \"\"", url, &empty, "tls-empty", 0);
    free(url);

    url = rqt_url(tls_base, "/bytes?n=64&id=tls-reset");
    struct tls_config reset = {cert, 1};
    expect_tls_refused("CA file set, then reset to NULL (system CAs)", url, &reset, "tls-reset", 0);
    free(url);

    /* The host name is verified: the certificate names IP 127.0.0.1 only. */
    const char *port = strrchr(tls_base, ':');
    CHECK(port != NULL, "no port in %s", tls_base);
    char localhost[256];
    snprintf(localhost, sizeof localhost, "https://localhost%s/bytes?n=64&id=tls-name", port);
    expect_tls_refused("the right CA but another host name (localhost)", localhost, &with_ca, "tls-name", 0);

    /* Verification applies after a redirect from http, and so does the CA file. */
    char target[512], encoded[1024];
    snprintf(target, sizeof target, "%s/bytes?n=8&id=tls-redirected", tls_base);
    percent_encode(target, encoded, sizeof encoded);
    url = rqt_url(base, "/redirect-to?url=%s&id=to-tls", encoded);
    expect_tls_refused("http redirected to the https fixture, no CA file", url, NULL, "tls-redirected", 1);
    r = rel_run(url, configure_tls, &with_ca);
    CHECK(r.outcome == RQ_OUTCOME_OK && r.status == 200 && r.size == 8,
          "http redirected to https with the CA file: outcome %s, status %d", rq_outcome_str((int)r.outcome), r.status);
    CHECK(strncmp(r.url, "https://", 8) == 0, "effective URL %s", r.url);
    printf("  http -> https redirect with the CA file: 200 from %s\n", r.url);
    free(r.body);
    free(url);
}

/* ---- schemes ---- */

static const char *const other_schemes[] = {
    "ftp", "ftps", "file", "gopher", "gophers", "scp", "sftp", "smb", "smbs", "dict", "ldap", "ldaps",
    "telnet", "tftp", "imap", "imaps", "pop3", "pop3s", "smtp", "smtps", "rtsp", "rtmp", "mqtt", "ws",
    "wss", "data", "javascript", "jar", "netdoc", "unix", "h2", "httpx", "http2", "xhttp"};

static void test_scheme_new(void) {
    printf("schemes at rq_request_new:\n");
    rq_request *request;
    for (size_t i = 0; i < sizeof other_schemes / sizeof *other_schemes; i++) {
        char url[256];
        snprintf(url, sizeof url, "%s://127.0.0.1:8080/x", other_schemes[i]);
        request = (rq_request *)(uintptr_t)0x5a5a;
        CHECK_RC(rq_request_new(url, &request), RQ_ERR_UNSUPPORTED_SCHEME);
        CHECK(request == (rq_request *)(uintptr_t)0x5a5a, "%s: out-parameter written on failure", url);
    }
    /* Without the "//" too, and the file: forms. */
    const char *odd[] = {"file:///etc/passwd", "file:/etc/passwd", "file://localhost/etc/passwd",
                         "javascript:alert(1)", "data:text/plain,hello", "mailto:someone@example.com",
                         "FTP://127.0.0.1/x", "FiLe:///etc/passwd"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
        CHECK_RC(rq_request_new(odd[i], &request), RQ_ERR_UNSUPPORTED_SCHEME);
    /* http and https are case-insensitive, as in RFC 3986. */
    const char *fine[] = {"http://127.0.0.1/", "https://127.0.0.1/", "HTTP://127.0.0.1/", "HtTpS://127.0.0.1/"};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        CHECK_OK(rq_request_new(fine[i], &request));
        CHECK_OK(rq_request_free(request));
    }
    printf("  %zu other schemes and %zu odd forms refused with RQ_ERR_UNSUPPORTED_SCHEME; http/https in any case accepted\n",
           sizeof other_schemes / sizeof *other_schemes, sizeof odd / sizeof *odd);
}

/* A listening socket on 127.0.0.1 that nobody should connect to. */
static int probe_listen(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(errno));
    CHECK(listen(fd, 64) == 0, "listen: %s", strerror(errno));
    socklen_t len = sizeof a;
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname");
    *port = ntohs(a.sin_port);
    CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0, "fcntl");
    return fd;
}

/* The number of connections waiting on the probe (accepted and closed here). */
static int probe_connections(int fd) {
    int n = 0;
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            break;
        close(c);
        n++;
    }
    return n;
}

static void test_scheme_redirects(void) {
    printf("schemes on redirects:\n");
    int port;
    int probe = probe_listen(&port);
    int refused = 0;
    for (size_t i = 0; i < sizeof other_schemes / sizeof *other_schemes + 3; i++) {
        char target[256], encoded[768], id[64];
        if (i < sizeof other_schemes / sizeof *other_schemes)
            snprintf(target, sizeof target, "%s://127.0.0.1:%d/x", other_schemes[i], port);
        else if (i == sizeof other_schemes / sizeof *other_schemes)
            snprintf(target, sizeof target, "file:///etc/passwd");
        else if (i == sizeof other_schemes / sizeof *other_schemes + 1)
            snprintf(target, sizeof target, "file:/etc/passwd");
        else
            snprintf(target, sizeof target, "FTP://127.0.0.1:%d/x", port);
        percent_encode(target, encoded, sizeof encoded);
        snprintf(id, sizeof id, "scheme-redirect-%zu", i);
        for (int status = 301; status <= 308; status += (status == 303 ? 4 : 1)) {
            if (status == 304 || status == 305 || status == 306)
                continue;
            char *url = rqt_url(base, "/redirect-to?url=%s&status=%d&id=%s", encoded, status, id);
            struct rel_result r = rel_run(url, NULL, NULL);
            CHECK(r.outcome == RQ_OUTCOME_BAD_REDIRECT, "redirect (%d) to %s: outcome %s (\"%s\", status %d), expected %s",
                  status, target, rq_outcome_str((int)r.outcome), r.message, r.status,
                  rq_outcome_str(RQ_OUTCOME_BAD_REDIRECT));
            CHECK(strstr(r.body, "root:") == NULL, "redirect to %s delivered something like /etc/passwd", target);
            free(r.body);
            free(url);
            refused++;
        }
        CHECK(logged(0, id) == 5, "the fixture logged %d requests for %s, expected 5 (one per status)", logged(0, id), id);
    }
    CHECK(probe_connections(probe) == 0, "a redirect to another scheme connected to its target");

    /* The probe works: an http redirect to it does connect (it is closed at once). */
    char target[128], encoded[512];
    snprintf(target, sizeof target, "http://127.0.0.1:%d/x", port);
    percent_encode(target, encoded, sizeof encoded);
    char *url = rqt_url(base, "/redirect-to?url=%s&id=probe-http", encoded);
    rq_queue *queue;
    rq_request *request;
    struct rel_result r;
    memset(&r, 0, sizeof r);
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    CHECK_OK(rq_request_new(url, &request));
    CHECK_OK(rq_request_set_completion(request, rel_result_done, &r, NULL));
    CHECK_OK(rq_add(queue, request));
    CHECK_OK(rq_request_free(request));
    int seen = 0;
    WAIT_FOR((seen += probe_connections(probe)) > 0, "the http redirect never reached the probe");
    CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
    CHECK_OK(rq_queue_free(queue));
    CHECK(r.done == 1 && r.outcome == RQ_OUTCOME_CONNECTION_LOST, "http redirect to the probe: outcome %s",
          rq_outcome_str((int)r.outcome));
    free(r.body);
    free(url);
    close(probe);
    printf("  %d redirects (301, 302, 303, 307, 308) to %zu other schemes ended with %s, none connected; "
           "an http redirect to the same probe did connect\n",
           refused, sizeof other_schemes / sizeof *other_schemes + 3, rq_outcome_str(RQ_OUTCOME_BAD_REDIRECT));
}

/* ---- credentials across hosts and ports ---- */

struct cred_config {
    int set_credentials;
    int authorization_header;
};

static void configure_cred(rq_request *request, const void *arg) {
    const struct cred_config *c = arg;
    if (c->set_credentials)
        CHECK_OK(rq_request_set_credentials(request, "user", "secret"));
    if (c->authorization_header)
        CHECK_OK(rq_request_set_header(request, "Authorization", "Bearer token-123"));
}

/* The logged "authorization" header of the request with this id: 1 present, 0 absent, -1 none logged. */
static int logged_authorization(const char *id) {
    char *log = rqt_get(base, "/_/log");
    char needle[128];
    snprintf(needle, sizeof needle, "\"id\": \"%s\"", id);
    const char *entry = strstr(log, needle);
    int result = -1;
    if (entry) {
        /* The entry's headers follow its id; the entry ends at "body_len". */
        const char *end = strstr(entry, "\"body_len\"");
        const char *auth = strstr(entry, "\"authorization\"");
        result = auth && (!end || auth < end);
    }
    free(log);
    return result;
}

static void redirect_with_credentials(const char *what, const char *first_url_fmt, const char *target,
                                      const struct cred_config *c, const char *first_id, const char *target_id) {
    char encoded[1024];
    percent_encode(target, encoded, sizeof encoded);
    char url[2048];
    snprintf(url, sizeof url, first_url_fmt, encoded, first_id);
    struct rel_result r = rel_run(url, configure_cred, c);
    CHECK(r.outcome == RQ_OUTCOME_OK && r.status == 200, "%s: outcome %s status %d (\"%s\")", what,
          rq_outcome_str((int)r.outcome), r.status, r.message);
    CHECK(logged_authorization(first_id) == 1, "%s: the first request carried no Authorization", what);
    CHECK(logged_authorization(target_id) == 0, "%s: the Authorization header was forwarded to %s", what, target);
    printf("  %s: sent to the first host, not forwarded\n", what);
    free(r.body);
}

static void test_credentials(void) {
    printf("credentials on redirects:\n");
    const char *port = strrchr(base, ':') + 1;

    /* A second port of the same fixture (same log): refuse-then-accept with after=0. */
    char *json = rqt_get(base, "/_/refuse-then-accept?after=0");
    const char *p = strstr(json, "\"port\": ");
    CHECK(p != NULL, "no port in %s", json);
    int port2 = atoi(p + 8);
    free(json);
    char probe_url[128];
    snprintf(probe_url, sizeof probe_url, "http://127.0.0.1:%d/bytes?n=1&id=port2-ready", port2);
    double deadline = rqt_now() + WATCHDOG_SECONDS;
    for (;;) { /* until it listens */
        struct rel_result r = rel_run(probe_url, NULL, NULL);
        free(r.body);
        if (r.outcome == RQ_OUTCOME_OK)
            break;
        CHECK(rqt_now() < deadline, "the second port %d never started listening", port2);
        rqt_sleep(0.02);
    }

    char target[512], first[512];
    struct cred_config userinfo = {0, 0}, creds = {1, 0}, header = {0, 1}, both = {1, 1};

    snprintf(first, sizeof first, "http://user:secret@127.0.0.1:%s/redirect-to?url=%%s&id=%%s", port);
    snprintf(target, sizeof target, "http://localhost:%s/headers?id=ui-other-host", port);
    redirect_with_credentials("user:password in the URL, redirect to another host", first, target, &userinfo,
                              "ui-first", "ui-other-host");

    snprintf(first, sizeof first, "%s/redirect-to?url=%%s&id=%%s", base);
    snprintf(target, sizeof target, "http://127.0.0.1:%d/headers?id=creds-other-port", port2);
    redirect_with_credentials("rq_request_set_credentials, redirect to another port", first, target, &creds,
                              "creds-first", "creds-other-port");
    snprintf(target, sizeof target, "http://127.0.0.1:%d/headers?id=header-other-port", port2);
    redirect_with_credentials("an Authorization header, redirect to another port", first, target, &header,
                              "header-first", "header-other-port");
    snprintf(first, sizeof first, "http://user:secret@127.0.0.1:%s/redirect-to?url=%%s&id=%%s", port);
    snprintf(target, sizeof target, "http://127.0.0.1:%d/headers?id=ui-other-port", port2);
    redirect_with_credentials("user:password in the URL, redirect to another port", first, target, &userinfo,
                              "ui2-first", "ui-other-port");
    snprintf(first, sizeof first, "%s/redirect-to?status=307&url=%%s&id=%%s", base);
    snprintf(target, sizeof target, "http://localhost:%s/headers?id=both-other-host", port);
    redirect_with_credentials("credentials and an Authorization header, a 307 to another host", first, target, &both,
                              "both-first", "both-other-host");

    /* Control: on the same host and port they do follow (so the checks above can fail). */
    snprintf(target, sizeof target, "%s/headers?id=same-host", base);
    char encoded[1024], url[2048];
    percent_encode(target, encoded, sizeof encoded);
    snprintf(url, sizeof url, "%s/redirect-to?url=%s&id=same-first", base, encoded);
    struct rel_result r = rel_run(url, configure_cred, &creds);
    CHECK(r.outcome == RQ_OUTCOME_OK, "same-host redirect: %s", rq_outcome_str((int)r.outcome));
    CHECK(logged_authorization("same-host") == 1, "credentials did not follow a redirect on the same host and port");
    free(r.body);
    printf("  control: on the same host and port the credentials do follow\n");
}

/* ---- limits ---- */

static atomic_long streamed;

static int count_piece(void *context, rq_request *request, const uint8_t *data, size_t size, uint64_t offset) {
    (void)context, (void)request, (void)data, (void)offset;
    atomic_fetch_add(&streamed, (long)size);
    return 0;
}

struct limit_config {
    uint64_t max;
    int stream;
    const char *file;
};

static void configure_limit(rq_request *request, const void *arg) {
    const struct limit_config *c = arg;
    CHECK_OK(rq_request_set_max_response_size(request, c->max));
    if (c->stream)
        CHECK_OK(rq_request_set_body_callback(request, count_piece));
    if (c->file)
        CHECK_OK(rq_request_set_output_file(request, c->file, 0));
}

static void test_limits(const char *tmp) {
    printf("limits:\n");
    char *url = rqt_url(base, "/redirect/10?id=redirects-10");
    struct rel_result r = rel_run(url, NULL, NULL);
    CHECK(r.outcome == RQ_OUTCOME_OK && r.status == 200, "10 redirects: %s %d", rq_outcome_str((int)r.outcome), r.status);
    free(r.body);
    free(url);
    url = rqt_url(base, "/redirect/11?id=redirects-11");
    r = rel_run(url, NULL, NULL);
    CHECK(r.outcome == RQ_OUTCOME_TOO_MANY_REDIRECTS, "11 redirects: %s", rq_outcome_str((int)r.outcome));
    CHECK(logged(0, "redirects-11") == 11, "11 redirects: the server saw %d requests, expected 11 (no 12th)",
          logged(0, "redirects-11"));
    printf("  default limit: 10 redirects followed; at 11 the server saw 11 requests and the outcome is %s\n",
           rq_outcome_str((int)r.outcome));
    free(r.body);
    free(url);

    struct { const char *path; uint64_t max; } cases[] = {{"/bytes?n=100000", 1000}, {"/bytes?n=100000&chunked=1&chunk=4096", 10000}};
    for (int i = 0; i < 2; i++) {
        url = rqt_url(base, "%s", cases[i].path);
        struct limit_config stream = {cases[i].max, 1, NULL};
        atomic_store(&streamed, 0);
        r = rel_run(url, configure_limit, &stream);
        CHECK(r.outcome == RQ_OUTCOME_RESPONSE_TOO_LARGE, "%s streamed, limit %llu: %s", cases[i].path,
              (unsigned long long)cases[i].max, rq_outcome_str((int)r.outcome));
        CHECK((uint64_t)atomic_load(&streamed) <= cases[i].max, "%s: %ld bytes streamed past a limit of %llu", cases[i].path,
              atomic_load(&streamed), (unsigned long long)cases[i].max);
        free(r.body);

        char file[1100];
        snprintf(file, sizeof file, "%.1000s/limited-%d.bin", tmp, i);
        unlink(file);
        struct limit_config to_file = {cases[i].max, 0, file};
        r = rel_run(url, configure_limit, &to_file);
        CHECK(r.outcome == RQ_OUTCOME_RESPONSE_TOO_LARGE, "%s to a file, limit %llu: %s", cases[i].path,
              (unsigned long long)cases[i].max, rq_outcome_str((int)r.outcome));
        FILE *f = fopen(file, "rb");
        long size = 0;
        if (f) {
            fseek(f, 0, SEEK_END);
            size = ftell(f);
            fclose(f);
        }
        CHECK((uint64_t)size <= cases[i].max, "%s: the file has %ld bytes past a limit of %llu", cases[i].path, size,
              (unsigned long long)cases[i].max);
        unlink(file);
        free(r.body);
        free(url);
    }
    printf("  the maximum response size bounds streamed bodies and output files too (announced and chunked bodies)\n");
}

/* The CA file's path is used as given: a copy of the certificate under a non-UTF-8 file name is
 * accepted (or rq_request_set_ca_file refuses the name), never silently replaced by another path. */
static void test_ca_path_bytes(void) {
    printf("CA file path bytes:\n");
    char path[1024];
    const char *slash = strrchr(cert, '/');
    snprintf(path, sizeof path, "%.*s/ca-\xe4\xff.pem", (int)(slash ? slash - cert : 1), slash ? cert : ".");
    FILE *in = fopen(cert, "rb"), *out = fopen(path, "wb");
    CHECK(in && out, "cannot copy %s", cert);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CHECK(fwrite(buf, 1, n, out) == n, "write");
    fclose(in);
    fclose(out);
    rq_request *probe;
    CHECK_OK(rq_request_new("https://127.0.0.1/", &probe));
    int rc = rq_request_set_ca_file(probe, path);
    CHECK_OK(rq_request_free(probe));
    if (rc != RQ_OK) {
        printf("  a non-UTF-8 CA file name is refused (%s)\n", rq_result_str(rc));
    } else {
        char *url = rqt_url(tls_base, "/bytes?n=8&id=tls-bytes");
        struct tls_config c = {path, 0};
        struct rel_result r = rel_run(url, configure_tls, &c);
        CHECK(r.outcome == RQ_OUTCOME_OK, "the CA file \"ca-\\xe4\\xff.pem\" (a copy of the right certificate) was not used: "
              "outcome %s, \"%s\"", rq_outcome_str((int)r.outcome), r.message);
        printf("  a non-UTF-8 CA file name is used as given\n");
        free(r.body);
        free(url);
    }
    unlink(path);
}

struct tls_fault {
    const char *ca_file;
    double idle;          /* 0: the default */
};

static void configure_tls_fault(rq_request *request, const void *arg) {
    const struct tls_fault *f = arg;
    CHECK_OK(rq_request_set_ca_file(request, f->ca_file));
    if (f->idle > 0)
        CHECK_OK(rq_request_set_idle_timeout(request, f->idle));
}

/* A verified TLS server that misbehaves after the handshake, as the hostile suite's plain one
 * does: a reset, a close inside a body of announced length, a close-delimited body ended without
 * TLS's close_notify (a truncation that TLS lets the client see), bytes that are not HTTP, a stall. */
static void test_tls_faults(void) {
    static const struct { const char *path; rq_outcome outcome; const char *what; } faults[] = {
        {"/reset?id=tls-fault", RQ_OUTCOME_CONNECTION_LOST, "a reset after the handshake"},
        {"/truncated?n=100&id=tls-fault", RQ_OUTCOME_CONNECTION_LOST, "a close inside a body of 100 bytes"},
        /* "HTTP/1.1 200 OK\r\n\r\nclose-delimited" */
        {"/raw?b64=SFRUUC8xLjEgMjAwIE9LDQoNCmNsb3NlLWRlbGltaXRlZA&id=tls-fault", RQ_OUTCOME_CONNECTION_LOST,
         "a close-delimited body ended without close_notify"},
        /* "hello, this is not HTTP\n" */
        {"/raw?b64=aGVsbG8sIHRoaXMgaXMgbm90IEhUVFAK&id=tls-fault", RQ_OUTCOME_BAD_RESPONSE, "bytes that are not HTTP"},
        {"/stall?s=30&id=tls-fault", RQ_OUTCOME_TIMEOUT, "a server that never answers (idle limit 0.5 s)"},
    };
    printf("TLS faults after the handshake:\n");
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        char *url = rqt_url(tls_base, "%s", faults[i].path);
        struct tls_fault f = {cert, i == 4 ? 0.5 : 0};
        struct rel_result r = rel_run(url, configure_tls_fault, &f);
        printf("  %s: %s (%s)\n", faults[i].what, rq_outcome_str((int)r.outcome), r.message);
        /* libcurl 7.88 takes an EOF without close_notify for the end of such a body (RFC 9112 9.8
         * says incomplete; libcurl with OpenSSL 3 refuses it from 8.x): the header says so. */
        int truncated_ok = i == 2 && r.outcome == RQ_OUTCOME_OK && r.size == 15;
        CHECK(r.outcome == faults[i].outcome || truncated_ok, "%s: outcome %s (\"%s\"), expected %s", faults[i].what,
              rq_outcome_str((int)r.outcome), r.message, rq_outcome_str((int)faults[i].outcome));
        free(r.body);
        free(url);
    }
}

/* A second response an HTTPS server sends 0.05 s after its reply, on the HTTP/1.1 connection it
 * keeps open, is not the reply to the next request of the queue (libcurl 7.88 sent that request on
 * the connection and took those bytes for its reply: the plain http case is in hostile.c). */
static void test_tls_late_bytes(void) {
    /* "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", then the same with 6 bytes, "forged" */
    char *first = rqt_url(tls_base, "/raw?b64=SFRUUC8xLjEgMjAwIE9LDQpDb250ZW50LUxlbmd0aDogNQ0KDQpoZWxsbw"
                                    "&late=SFRUUC8xLjEgMjAwIE9LDQpDb250ZW50LUxlbmd0aDogNg0KDQpmb3JnZWQ&id=tls-late");
    char *next = rqt_url(tls_base, "/bytes?n=4&id=tls-late-next");
    struct tls_config c = {cert, 0};
    struct rel_result r[2];
    memset(r, 0, sizeof r);
    rq_queue *queue;
    CHECK_OK(rq_queue_new(RQ_DELIVERY_THREADED, &queue));
    for (int i = 0; i < 2; i++) {
        rq_request *request;
        CHECK_OK(rq_request_new(i == 0 ? first : next, &request));
        CHECK_OK(rq_request_set_completion(request, rel_result_done, &r[i], NULL));
        configure_tls(request, &c);
        CHECK_OK(rq_add(queue, request));
        CHECK_OK(rq_request_free(request));
        CHECK_OK(rq_queue_wait_idle(queue, WATCHDOG_SECONDS));
        if (i == 0)
            rqt_sleep(1); /* the late bytes reach the idle connection */
    }
    CHECK_OK(rq_queue_free(queue));
    printf("TLS: a reply, then bytes after it on the kept connection: %s (%zu bytes), the next request %s (%zu bytes)\n",
           rq_outcome_str((int)r[0].outcome), r[0].size, rq_outcome_str((int)r[1].outcome), r[1].size);
    CHECK(r[0].outcome == RQ_OUTCOME_OK && r[0].size == 5, "the reply: %s (%s), %zu bytes", rq_outcome_str((int)r[0].outcome),
          r[0].message, r[0].size);
    CHECK(r[1].outcome == RQ_OUTCOME_OK && r[1].size == 4 && logged(1, "tls-late-next") == 1,
          "the next request: %s (%s), %zu bytes (\"%.8s\"), the server saw it %d times", rq_outcome_str((int)r[1].outcome),
          r[1].message, r[1].size, r[1].body ? r[1].body : "", logged(1, "tls-late-next"));
    free(r[0].body);
    free(r[1].body);
    free(first);
    free(next);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s BASE_URL TLS_BASE_URL CERT_FILE OTHER_CERT_FILE\n", argv[0]);
        return 2;
    }
    base = argv[1];
    tls_base = argv[2];
    cert = argv[3];
    other_cert = argv[4];
    test_tls();
    test_tls_faults();
    test_tls_late_bytes();
    test_scheme_new();
    test_scheme_redirects();
    test_credentials();
    const char *slash = strrchr(cert, '/');
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%.*s", (int)(slash ? slash - cert : 1), slash ? cert : ".");
    test_limits(tmp);
    test_ca_path_bytes(); /* last: it fails today (see the report) */
    printf("test_security: %d checks passed\n", atomic_load(&rqt_checks));
    return 0;
}
