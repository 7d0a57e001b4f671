/*
 * test_version.c: the version is one number everywhere.
 *
 * The header's RQ_VERSION_MAJOR/MINOR/PATCH, its packed RQ_VERSION_NUMBER (checked against the
 * documented formula MAJOR * 10000 + MINOR * 100 + PATCH, and 0.1.0 == 100) and RQ_VERSION_STRING,
 * the loaded library's rq_version_number() and rq_version_string(), CMake's project version and
 * SOVERSION (passed in as RQ_EXPECT_PROJECT_VERSION / RQ_EXPECT_SOVERSION), and the SONAME the
 * dynamic loader actually loaded (librequestqueue.so.<MAJOR>) must all agree.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "rqtest.h"

#include <link.h>

#ifndef RQ_EXPECT_PROJECT_VERSION
#error "compile with -DRQ_EXPECT_PROJECT_VERSION=\"<CMake PROJECT_VERSION>\""
#endif
#ifndef RQ_EXPECT_SOVERSION
#error "compile with -DRQ_EXPECT_SOVERSION=<CMake SOVERSION>"
#endif

/* The documented packing. */
static unsigned pack(unsigned major, unsigned minor, unsigned patch) {
    return major * 10000u + minor * 100u + patch;
}

_Static_assert(RQ_VERSION_NUMBER == RQ_VERSION_MAJOR * 10000 + RQ_VERSION_MINOR * 100 + RQ_VERSION_PATCH,
               "RQ_VERSION_NUMBER is not the packed MAJOR/MINOR/PATCH");
_Static_assert(RQ_VERSION_MINOR < 100 && RQ_VERSION_PATCH < 100, "minor and patch must be below 100");

static char loaded_soname[256];
static int loaded_count;

static int find_library(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *name = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(name, "librequestqueue.so", strlen("librequestqueue.so")) == 0) {
        snprintf(loaded_soname, sizeof loaded_soname, "%s", name);
        loaded_count++;
    }
    return 0;
}

int main(void) {
    char text[64];

    /* The header with itself. */
    CHECK(pack(0, 1, 0) == 100, "the documented example: 0.1.0 packs to %u, not 100", pack(0, 1, 0));
    CHECK(pack(1, 2, 3) == 10203, "1.2.3 packs to %u", pack(1, 2, 3));
    CHECK(RQ_VERSION_NUMBER == pack(RQ_VERSION_MAJOR, RQ_VERSION_MINOR, RQ_VERSION_PATCH),
          "RQ_VERSION_NUMBER %d", RQ_VERSION_NUMBER);
    CHECK(RQ_VERSION_NUMBER / 10000 == RQ_VERSION_MAJOR && RQ_VERSION_NUMBER / 100 % 100 == RQ_VERSION_MINOR &&
              RQ_VERSION_NUMBER % 100 == RQ_VERSION_PATCH,
          "RQ_VERSION_NUMBER %d does not unpack to %d.%d.%d", RQ_VERSION_NUMBER, RQ_VERSION_MAJOR,
          RQ_VERSION_MINOR, RQ_VERSION_PATCH);
    snprintf(text, sizeof text, "%d.%d.%d", RQ_VERSION_MAJOR, RQ_VERSION_MINOR, RQ_VERSION_PATCH);
    CHECK(strcmp(text, RQ_VERSION_STRING) == 0, "RQ_VERSION_STRING \"%s\" but the parts say %s",
          RQ_VERSION_STRING, text);

    /* The loaded library with the header. */
    CHECK(rq_version_number() == RQ_VERSION_NUMBER, "rq_version_number() is %u, the header says %d",
          rq_version_number(), RQ_VERSION_NUMBER);
    CHECK(rq_version_string() != NULL && strcmp(rq_version_string(), RQ_VERSION_STRING) == 0,
          "rq_version_string() is \"%s\", the header says \"%s\"",
          rq_version_string() ? rq_version_string() : "(null)", RQ_VERSION_STRING);
    CHECK(rq_version_string() == rq_version_string(), "rq_version_string() is not one static string");

    /* CMake with the header. */
    CHECK(strcmp(RQ_EXPECT_PROJECT_VERSION, RQ_VERSION_STRING) == 0,
          "CMake's project version %s, the header says %s", RQ_EXPECT_PROJECT_VERSION, RQ_VERSION_STRING);
    CHECK(RQ_EXPECT_SOVERSION == RQ_VERSION_MAJOR, "CMake's SOVERSION %d, the header's major %d",
          RQ_EXPECT_SOVERSION, RQ_VERSION_MAJOR);

    /* The loader found the library by its SONAME (the name recorded in our DT_NEEDED). */
    dl_iterate_phdr(find_library, NULL);
    snprintf(text, sizeof text, "librequestqueue.so.%d", RQ_VERSION_MAJOR);
    CHECK(loaded_count == 1, "%d librequestqueue objects loaded", loaded_count);
    CHECK(strcmp(loaded_soname, text) == 0, "loaded %s, expected %s", loaded_soname, text);

    printf("version %s (%u), library %s, CMake %s, %s: %d checks passed\n", rq_version_string(),
           rq_version_number(), loaded_soname, RQ_EXPECT_PROJECT_VERSION, text,
           atomic_load(&rqt_checks));
    return 0;
}
