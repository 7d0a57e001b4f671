/*
 * curl_multi.c: the reference. A C program on libcurl's multi interface doing the benchmark's work
 * with K easy handles: each handle is reused for the next request as soon as its transfer ends, so
 * at most K are in flight. This is the engine's own cost, the physical limit for librequestqueue.
 *
 *     curl_multi URL N K [--post SIZE CONTENT-TYPE] [LINE...]
 *
 * Body bytes are counted and discarded as they arrive (small or large bodies alike).
 *
 * --post: each request is a POST of a SIZE-byte body from memory (made once: a JSON object padded
 * to SIZE bytes), sent with "Content-Type: CONTENT-TYPE" and Content-Length, as a C programmer
 * does it on libcurl: CURLOPT_POSTFIELDS pointing at the caller's buffer (libcurl copies nothing
 * before its upload buffer) with CURLOPT_POSTFIELDSIZE_LARGE, set once per handle. libcurl's own
 * defaults stay (for a body over 1 MiB it sends "Expect: 100-continue", which nginx answers).
 *
 * Each LINE ("Name: value") is sent as a request header, from one curl_slist made once. bench/driver.py
 * passes the two lines librequestqueue sends by default (its User-Agent and Accept-Encoding lines) to
 * measure what they cost libcurl, which formats every header byte through its printf: with an
 * Accept-Encoding line, CURLOPT_ACCEPT_ENCODING "" is set too (libcurl then decodes what it asked for,
 * and does not add a line of its own), as the library does.
 */
#include "common.h"

#include <curl/curl.h>
#include <strings.h>

struct slot {
    CURL *easy;
    long long bytes;
};

static size_t on_data(char *data, size_t size, size_t count, void *user) {
    struct slot *slot = user;
    (void)data;
    slot->bytes += (long long)(size * count);
    return size * count;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s URL N K [--post SIZE CONTENT-TYPE] [HEADER-LINE...]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    long n = bench_count(argv[2], "N"), k = bench_count(argv[3], "K");
    if (k > n) k = n;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    struct curl_slist *headers = NULL;
    int decode = 0, first_line = 4;
    char *post = NULL;
    long post_size = 0;
    if (argc > 4 && strcmp(argv[4], "--post") == 0) {
        if (argc < 7) {
            fprintf(stderr, "--post: SIZE and CONTENT-TYPE\n");
            return 2;
        }
        post_size = bench_count(argv[5], "SIZE");
        post = bench_body((size_t)post_size);
        char line[256];
        snprintf(line, sizeof line, "Content-Type: %s", argv[6]);
        headers = curl_slist_append(NULL, line);
        if (post == NULL || headers == NULL) return 1;
        first_line = 7;
    }
    for (int i = first_line; i < argc; i++) {
        struct curl_slist *longer = curl_slist_append(headers, argv[i]);
        if (longer == NULL) return 1;
        headers = longer;
        if (strncasecmp(argv[i], "Accept-Encoding:", 16) == 0) decode = 1;
    }

    struct bench_clock clock;
    bench_start(&clock);
    CURLM *multi = curl_multi_init();
    struct slot *slots = calloc((size_t)k, sizeof *slots);
    if (multi == NULL || slots == NULL) return 1;
    long started = 0, done = 0, ok = 0;
    long long bytes = 0;
    for (long i = 0; i < k; i++) {
        CURL *easy = curl_easy_init();
        if (easy == NULL) return 1;
        slots[i].easy = easy;
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L); /* as librequestqueue: no SIGPIPE juggling */
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &slots[i]);
        if (headers != NULL) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
        if (decode) curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
        if (post != NULL) {
            curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)post_size);
            curl_easy_setopt(easy, CURLOPT_POSTFIELDS, post);
        }
        curl_multi_add_handle(multi, easy);
        started++;
    }
    while (done < n) {
        int running = 0;
        if (curl_multi_perform(multi, &running) != CURLM_OK) return 1;
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(multi, &left)) != NULL) {
            if (message->msg != CURLMSG_DONE) continue;
            CURL *easy = message->easy_handle;
            struct slot *slot;
            long status = 0;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&slot);
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            done++;
            if (message->data.result == CURLE_OK && status == 200) ok++;
            bytes += slot->bytes;
            slot->bytes = 0;
            curl_multi_remove_handle(multi, easy);
            if (started < n) {
                curl_multi_add_handle(multi, easy); /* same URL, same options: the next request */
                started++;
            }
        }
        if (done < n && curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK) return 1;
    }
    bench_report(&clock, n, ok, bytes, 1);

    for (long i = 0; i < k; i++) curl_easy_cleanup(slots[i].easy);
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
    free(slots);
    free(post);
    curl_global_cleanup();
    return ok == n ? 0 : 1;
}
