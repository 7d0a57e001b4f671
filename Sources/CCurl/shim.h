/* Typed wrappers around libcurl's variadic functions, which Swift cannot call directly. */
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>
#include <dlfcn.h>
#include <stdint.h>
#include "share.h"

/* Before libcurl initialises OpenSSL (curl_global_init): asks OpenSSL not to register its exit
 * handler (OPENSSL_INIT_NO_ATEXIT), which frees its state at exit() while the queues' engine
 * threads, which a program need not stop before it ends, may be using it (a TLS transfer in flight
 * then crashed the process). Nothing when libcurl's TLS is not OpenSSL 1.1.1 or later, or when
 * OpenSSL was already initialised (by the host: its handler then stays). */
static inline void ccurl_openssl_keep_at_exit(void) {
    int (*init)(uint64_t, const void *);
    /* NULL is RTLD_DEFAULT: glibc looks in the scope of the calling library, which holds the
     * libcrypto that libcurl loaded, also when this library was opened with RTLD_LOCAL (as Python
     * and Ruby open it). */
    *(void **)&init = dlsym(NULL, "OPENSSL_init_crypto");
    if (init)
        init(0x00080000L /* OPENSSL_INIT_NO_ATEXIT */, NULL);
}

typedef size_t (*ccurl_data_fn)(char *data, size_t size, size_t count, void *userdata);
typedef int (*ccurl_xferinfo_fn)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                 curl_off_t ultotal, curl_off_t ulnow);

/* The schemes a handle may use, for its URL and for redirects: http and https. The bitmask
 * options, which libcurl 7.85 deprecated for string ones that it parses anew on every handle (about
 * 550 instructions each, and with libcurl < 8.1.0 a handle serves one attempt), work the same. */
static inline void ccurl_easy_http_only(CURL *h) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#pragma GCC diagnostic pop
}

static inline CURLcode ccurl_easy_setopt_long(CURL *h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode ccurl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode ccurl_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode ccurl_easy_setopt_data_fn(CURL *h, CURLoption o, ccurl_data_fn v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode ccurl_easy_setopt_xferinfo_fn(CURL *h, ccurl_xferinfo_fn v) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, v);
}
static inline CURLcode ccurl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode ccurl_easy_getinfo_str(CURL *h, CURLINFO i, char **v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode ccurl_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode ccurl_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}
/* Socket tracking (Transfer.stall counts the bytes of the transfer's TCP connection). */
typedef int (*ccurl_sockopt_fn)(void *clientp, curl_socket_t fd, curlsocktype purpose);
typedef int (*ccurl_closesocket_fn)(void *clientp, curl_socket_t fd);
typedef int (*ccurl_prereq_fn)(void *clientp, char *primary_ip, char *local_ip, int primary_port, int local_port);
static inline CURLcode ccurl_easy_setopt_sockopt_fn(CURL *h, ccurl_sockopt_fn v) {
    return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, v);
}
static inline CURLcode ccurl_easy_setopt_closesocket_fn(CURL *h, ccurl_closesocket_fn v) {
    return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v);
}
static inline CURLcode ccurl_easy_setopt_prereq_fn(CURL *h, ccurl_prereq_fn v) {
    return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, v);
}

/* CURLAUTH_* are macros with casts, which Swift does not import. */
static const unsigned long ccurl_auth_basic = CURLAUTH_BASIC;
static const unsigned long ccurl_auth_digest = CURLAUTH_DIGEST;
/* A challenge of another scheme is answered with these two only (libcurl takes the one the server
 * offers): CURLAUTH_ANY would let libcurl answer NTLM (through its winbind helper, NTLM_WB, a
 * program it runs) or Negotiate (with the host's Kerberos tickets, not the password given). */
static const unsigned long ccurl_auth_password = CURLAUTH_BASIC | CURLAUTH_DIGEST;

/* CURLMsg's payload is a union; read it in C. */
static inline CURLcode ccurl_msg_result(const CURLMsg *m) { return m->data.result; }

/* Streaming: pausing a transfer from its write callback, resuming it later (macros with casts or
 * expressions, which Swift does not import). */
static const size_t ccurl_writefunc_pause = CURL_WRITEFUNC_PAUSE;
static inline CURLcode ccurl_easy_unpause(CURL *h) { return curl_easy_pause(h, CURLPAUSE_CONT); }

/* URL API flags (macros with shifts). CURLOPT_URL parses with exactly these flags (lib/url.c,
 * parseurlandfillconn, since 7.62), so the request's URL is checked as libcurl will read it. */
static const unsigned int ccurl_url_set_flags = CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME;

#endif
