// header_cxx.cpp: requestqueue.h compiles as C++17 with -Wall -Wextra -Werror -pedantic (and
// -Wredundant-decls), when included twice, and declares C linkage functions with the right types.
#include <requestqueue.h>
#include <requestqueue.h>

#include <cstdio>
#include <type_traits>

static_assert(RQ_OK == 0 && RQ_ERR_SYSTEM == 17, "result codes are never renumbered");
static_assert(RQ_OUTCOME_OK == 0 && RQ_OUTCOME_TRANSPORT == 11, "outcomes are never renumbered");
static_assert(std::is_same<decltype(&rq_queue_new), rq_result (*)(rq_delivery, rq_queue **)>::value,
              "rq_queue_new's type");
static_assert(std::is_same<decltype(&rq_request_set_completion),
                           rq_result (*)(rq_request *, rq_completion_fn, void *, rq_context_free_fn)>::value,
              "rq_request_set_completion's type");
static_assert(std::is_same<decltype(&rq_response_body), const uint8_t *(*)(const rq_response *, size_t *)>::value,
              "rq_response_body's type");
static_assert(std::is_same<decltype(rq_version_number()), unsigned>::value, "rq_version_number's type");

extern "C" void on_done(void *, rq_request *, const rq_response *) {}

int main() {
    rq_completion_fn completion = on_done;
    (void)completion;
    if (rq_version_number() != RQ_VERSION_NUMBER) {
        std::fprintf(stderr, "header_cxx: library %u, header %d\n", rq_version_number(), RQ_VERSION_NUMBER);
        return 1;
    }
    std::printf("header_cxx: C++17 include of requestqueue.h %s ok\n", rq_version_string());
    return 0;
}
