/* Typed wrappers around libcurl's variadic functions, which Swift cannot call directly. */
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>
#include <stdint.h>

typedef size_t (*ccurl_data_fn)(char *data, size_t size, size_t count, void *userdata);
typedef int (*ccurl_xferinfo_fn)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                 curl_off_t ultotal, curl_off_t ulnow);

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
/* CURLAUTH_* are macros with casts, which Swift does not import. */
static const unsigned long ccurl_auth_basic = CURLAUTH_BASIC;
static const unsigned long ccurl_auth_digest = CURLAUTH_DIGEST;
static const unsigned long ccurl_auth_any = CURLAUTH_ANY;

/* CURLMsg's payload is a union; read it in C. */
static inline CURLcode ccurl_msg_result(const CURLMsg *m) { return m->data.result; }

/* Streaming: pausing a transfer from its write callback, resuming it later (macros with casts or
 * expressions, which Swift does not import). */
static const size_t ccurl_writefunc_pause = CURL_WRITEFUNC_PAUSE;
static inline CURLcode ccurl_easy_unpause(CURL *h) { return curl_easy_pause(h, CURLPAUSE_CONT); }

/* A cookie share usable from several threads: libcurl locks it through these callbacks. */
#include <pthread.h>
#include <stdlib.h>
static inline void ccurl_share_lock_cb(CURL *h, curl_lock_data d, curl_lock_access a, void *m) {
    (void)h; (void)d; (void)a;
    pthread_mutex_lock((pthread_mutex_t *)m);
}
static inline void ccurl_share_unlock_cb(CURL *h, curl_lock_data d, void *m) {
    (void)h; (void)d;
    pthread_mutex_unlock((pthread_mutex_t *)m);
}
/* The mutex is allocated just before the share's handle, in one block. */
typedef struct ccurl_cookie_share { pthread_mutex_t mutex; CURLSH *share; } ccurl_cookie_share;
static inline void *ccurl_cookie_share_new(void) {
    ccurl_cookie_share *s = (ccurl_cookie_share *)calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mutex, NULL);
    s->share = curl_share_init();
    if (!s->share || curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, ccurl_share_lock_cb) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, ccurl_share_unlock_cb) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_USERDATA, &s->mutex) != CURLSHE_OK) {
        if (s->share) curl_share_cleanup(s->share);
        pthread_mutex_destroy(&s->mutex);
        free(s);
        return NULL;
    }
    return s;
}
/* The CURLSH * to give CURLOPT_SHARE. */
static inline void *ccurl_cookie_share_handle(void *s) { return ((ccurl_cookie_share *)s)->share; }
static inline void ccurl_cookie_share_free(void *s) {
    ccurl_cookie_share *c = (ccurl_cookie_share *)s;
    curl_share_cleanup(c->share);
    pthread_mutex_destroy(&c->mutex);
    free(c);
}
static inline CURLcode ccurl_easy_getinfo_slist(CURL *h, CURLINFO i, struct curl_slist **v) {
    return curl_easy_getinfo(h, i, v);
}

#endif
