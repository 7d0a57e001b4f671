/* System calls that the Glibc module does not import. */
#ifndef CCURL_SYSCALLS_H
#define CCURL_SYSCALLS_H

#include <sys/eventfd.h>

/* A non-blocking, close-on-exec eventfd, or -1. */
static inline int ccurl_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

#endif
