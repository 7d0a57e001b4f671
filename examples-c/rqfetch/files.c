/* rqfetch: file names from URLs, and writing bodies without overwriting. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rqfetch.h"

volatile int g_tmp_active;
char g_tmp_path[4096];

#define NAME_MAX_BYTES 200 /* leaves room for ".NNNN" under the usual 255-byte limit */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static char safe_byte(unsigned char c)
{
    if (c >= 0x80) /* keep UTF-8 names readable */
        return (char)c;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return (char)c;
    if (c != '\0' && strchr("._-=+,@~", c))
        return (char)c;
    return '_';
}

char *name_from_url(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    p += strcspn(p, "/?#"); /* skip the host */
    const char *path = p;
    size_t path_len = strcspn(path, "?#");
    const char *query = NULL;
    size_t query_len = 0;
    if (path[path_len] == '?') {
        query = path + path_len + 1;
        query_len = strcspn(query, "#");
    }
    const char *seg = path;
    for (size_t i = 0; i < path_len; i++)
        if (path[i] == '/')
            seg = path + i + 1;
    size_t seg_len = (size_t)(path + path_len - seg);

    strbuf b = {0};
    for (size_t i = 0; i < seg_len; i++) {
        unsigned char c = (unsigned char)seg[i];
        if (c == '%' && i + 2 < seg_len) {
            int hi = hex_value(seg[i + 1]), lo = hex_value(seg[i + 2]);
            if (hi >= 0 && lo >= 0) {
                c = (unsigned char)(hi * 16 + lo);
                i += 2;
            }
        }
        char s = safe_byte(c);
        sb_append(&b, &s, 1);
    }
    if (b.len == 0)
        sb_puts(&b, "index.html");
    if (query && query_len) {
        sb_puts(&b, "_");
        for (size_t i = 0; i < query_len; i++) {
            char s = safe_byte((unsigned char)query[i]);
            sb_append(&b, &s, 1);
        }
    }
    if (b.data[0] == '.' || b.data[0] == '-')
        b.data[0] = '_'; /* no hidden files, no names that look like options */
    if (b.len > NAME_MAX_BYTES) {
        size_t cut = NAME_MAX_BYTES;
        while (cut > 0 && ((unsigned char)b.data[cut] & 0xC0) == 0x80)
            cut--; /* do not split a UTF-8 sequence */
        b.len = cut;
        b.data[cut] = '\0';
    }
    return b.data;
}

int prepare_output_dir(const char *dir, char *err, size_t errlen)
{
    char *copy = xstrdup(dir);
    size_t len = strlen(copy);
    /* mkdir -p: create each missing component in turn. */
    for (size_t i = 1; i <= len; i++) {
        if (copy[i] != '/' && copy[i] != '\0')
            continue;
        char saved = copy[i];
        copy[i] = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create the output directory '%s': %s", copy,
                     strerror(errno));
            free(copy);
            return -1;
        }
        copy[i] = saved;
    }
    free(copy);
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "cannot use the output directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "the output directory '%s' is not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "cannot write in the output directory '%s': %s", dir,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the set of paths written in this run (open addressing, FNV-1a) ------------------------- */

static size_t hash_str(const char *s)
{
    size_t h = (size_t)1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * (size_t)1099511628211ULL;
    return h;
}

static int names_has(const name_set *set, const char *s)
{
    if (!set->cap)
        return 0;
    for (size_t i = hash_str(s) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
        if (!set->slots[i])
            return 0;
        if (strcmp(set->slots[i], s) == 0)
            return 1;
    }
}

static void names_add(name_set *set, const char *s)
{
    if ((set->count + 1) * 2 > set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 64;
        char **slots = calloc(cap, sizeof *slots);
        if (!slots) {
            fputs("rqfetch: out of memory\n", stderr);
            exit(EXIT_SOME_FAILED);
        }
        for (size_t i = 0; i < set->cap; i++) {
            if (!set->slots[i])
                continue;
            size_t k = hash_str(set->slots[i]) & (cap - 1);
            while (slots[k])
                k = (k + 1) & (cap - 1);
            slots[k] = set->slots[i];
        }
        free(set->slots);
        set->slots = slots;
        set->cap = cap;
    }
    size_t k = hash_str(s) & (set->cap - 1);
    while (set->slots[k])
        k = (k + 1) & (set->cap - 1);
    set->slots[k] = xstrdup(s);
    set->count++;
}

void names_free(name_set *set)
{
    for (size_t i = 0; i < set->cap; i++)
        free(set->slots[i]);
    free(set->slots);
    memset(set, 0, sizeof *set);
}

/* ---- writing ------------------------------------------------------------------------------------ */

static void drop_tmp(void)
{
    unlink(g_tmp_path);
    g_tmp_active = 0;
}

/* Moves the temporary file to `path` unless `path` exists. 0 done, 1 exists, -1 error (errno). */
static int place_no_replace(const char *path)
{
    if (link(g_tmp_path, path) == 0) {
        drop_tmp();
        return 0;
    }
    if (errno == EEXIST)
        return 1;
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != EXDEV &&
        errno != EMLINK && errno != ENOSYS)
        return -1;
    /* No hard links here (some file systems): claim the name, then rename over the claim. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return errno == EEXIST ? 1 : -1;
    close(fd);
    if (rename(g_tmp_path, path) != 0) {
        int e = errno;
        unlink(path);
        errno = e;
        return -1;
    }
    g_tmp_active = 0;
    return 0;
}

int save_body(app *a, const job *j, const uint8_t *data, size_t size, char **out_path, char *err,
              size_t errlen)
{
    const char *dir = a->opt.output_dir;
    int here = strcmp(dir, ".") == 0;
    snprintf(g_tmp_path, sizeof g_tmp_path, "%s/.rqfetch-%ld-%zu.part", dir, (long)getpid(),
             j->index);
    g_tmp_active = 1;
    int fd = open(g_tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create '%s': %s", g_tmp_path, strerror(errno));
        g_tmp_active = 0;
        return -1;
    }
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, errlen, "cannot write '%s': %s", g_tmp_path,
                     n < 0 ? strerror(errno) : "no progress");
            close(fd);
            drop_tmp();
            return -1;
        }
        off += (size_t)n;
    }
    if (close(fd) != 0) {
        snprintf(err, errlen, "cannot write '%s': %s", g_tmp_path, strerror(errno));
        drop_tmp();
        return -1;
    }

    char *name = name_from_url(j->url);
    strbuf path = {0};
    for (unsigned k = 0; k < 10000; k++) {
        path.len = 0;
        if (!here) {
            sb_puts(&path, dir);
            if (dir[strlen(dir) - 1] != '/')
                sb_puts(&path, "/");
        }
        sb_puts(&path, name);
        if (k)
            sb_printf(&path, ".%u", k);
        if (names_has(&a->names, path.data))
            continue; /* written earlier in this run: never overwrite our own files */
        int rc;
        if (a->opt.force) {
            rc = rename(g_tmp_path, path.data) == 0 ? 0 : -1;
            if (rc == 0)
                g_tmp_active = 0;
        } else {
            rc = place_no_replace(path.data);
        }
        if (rc == 1)
            continue;
        if (rc < 0) {
            snprintf(err, errlen, "cannot write '%s': %s", path.data, strerror(errno));
            drop_tmp();
            free(name);
            sb_free(&path);
            return -1;
        }
        names_add(&a->names, path.data);
        free(name);
        *out_path = path.data;
        return 0;
    }
    snprintf(err, errlen, "no free file name for '%s' in '%s'", name, dir);
    drop_tmp();
    free(name);
    sb_free(&path);
    return -1;
}
