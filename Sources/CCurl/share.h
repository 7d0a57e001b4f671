/* libcurl shares (a queue's cookie jar, an engine's TLS sessions), usable from several threads (libcurl
 * locks them through these callbacks), and the getinfo wrapper that reads the jar. */
#ifndef CCURL_SHARE_H
#define CCURL_SHARE_H

#include <curl/curl.h>
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
/* The mutex and the share's handle, in one block. */
typedef struct ccurl_share { pthread_mutex_t mutex; CURLSH *share; } ccurl_share;
/* A share of TLS sessions, and of cookies when `cookies` is non-zero (a handle has one share). */
static inline void *ccurl_share_new(int cookies) {
    ccurl_share *s = (ccurl_share *)calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mutex, NULL);
    s->share = curl_share_init();
    if (!s->share || (cookies && curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE) != CURLSHE_OK) ||
        curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
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
static inline void *ccurl_share_handle(void *s) { return ((ccurl_share *)s)->share; }
/* Frees the share, unless a handle still uses it (then it is left, never freed under that handle). */
static inline void ccurl_share_free(void *s) {
    ccurl_share *c = (ccurl_share *)s;
    if (curl_share_cleanup(c->share) != CURLSHE_OK) return;
    pthread_mutex_destroy(&c->mutex);
    free(c);
}
static inline CURLcode ccurl_easy_getinfo_slist(CURL *h, CURLINFO i, struct curl_slist **v) {
    return curl_easy_getinfo(h, i, v);
}

#endif
