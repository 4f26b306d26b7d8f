/* gpu_required.h — what a GPU test program does when it cannot run: skip
 * (Automake's exit 77), or fail when TFCORE_REQUIRE_GPU=1 says a GPU is
 * expected (scripts/gpu-run.sh on a GPU machine; tests/gpu_backend.sh is the
 * shell tests' side). */
#ifndef TFCORE_TESTS_GPU_REQUIRED_H
#define TFCORE_TESTS_GPU_REQUIRED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints "SKIP: <why>" and returns 77, or with TFCORE_REQUIRE_GPU=1 prints
 * "FAIL: ..." naming the test and returns EXIT_FAILURE: main returns it. */
static inline int tf_test_gpu_unavailable(const char *test, const char *why)
{
    const char *req = getenv("TFCORE_REQUIRE_GPU");
    if (req && strcmp(req, "1") == 0) {
        printf("FAIL: TFCORE_REQUIRE_GPU=1 but %s cannot run: %s\n", test, why);
        return EXIT_FAILURE;
    }
    printf("SKIP: %s\n", why);
    return 77;
}

#endif
