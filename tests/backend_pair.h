/* tests/backend_pair.h — the start of the GPU op suites (test_backend_cuda*.c):
 * backend-cuda and backend-cpu (the reference) from the build tree through
 * the registry, opened side by side, on a seeded run.
 *
 *   not found or rejected        backend-cuda was built: a failure, the
 *                                registry's line on stderr
 *   found but its probe says no  SKIP (exit 77; FAIL under TFCORE_REQUIRE_GPU=1)
 *                                after the suite's no-device checks, if any
 *   backend-cpu missing          the same skip: nothing to compare against
 *
 * Include tests/common.h first. */
#ifndef TFCORE_TESTS_BACKEND_PAIR_H
#define TFCORE_TESTS_BACKEND_PAIR_H

#include "common.h"
#include "gpu_required.h"

typedef struct tf_test_pair {
    tf_registry *reg;
    const tf_backend_vtable *gv, *cv; /* cuda, cpu */
    tf_backend *gb, *cb;
    uint64_t seed; /* the run's TF_TEST_SEED */
} tf_test_pair;

typedef struct tf_test_pair_opts {
    /* What can be checked without a device, given the unusable plugin's
     * vtable and the probe's reason; returns the number of failures (each
     * printed). NULL: nothing. */
    int (*no_device)(const tf_backend_vtable *vt, const char *probe_why);
    /* With TF_CUDA_TEST_PROBE set, stop after finding a usable GPU (exit 0). */
    bool answer_probe;
} tf_test_pair_opts;

static inline void tf_test_pair_close(tf_test_pair *p)
{
    if (p->gb) p->gv->close(p->gb);
    if (p->cb) p->cv->close(p->cb);
    p->gb = p->cb = NULL;
    tf_registry_free(p->reg);
    p->reg = NULL;
}

/* Fills *p and returns -1 when both backends are open; otherwise closes what
 * it opened and returns main's exit status (0, 77 or EXIT_FAILURE). */
static inline int tf_test_pair_open(tf_test_pair *p, const char *test, const tf_test_pair_opts *o)
{
    *p = (tf_test_pair){0};
    tf_error err = {0};
    const char *rel[] = {"plugins/backend-cuda", "plugins/backend-cpu"};
    if (tf_test_registry(&p->reg, rel, 2, &err) != TF_OK) {
        fprintf(stderr, "%s: indexing the plugin folders: %s\n", test, err.msg);
        return EXIT_FAILURE;
    }
    const tf_loaded_plugin *pc = tf_test_plugin(p->reg, TF_KIND_BACKEND, "cuda", &err);
    if (!pc) pc = tf_registry_find(p->reg, TF_KIND_BACKEND, "cuda"); /* found, probe said no */
    if (!pc) { /* it was built: not finding it is a failure, not a skip */
        fprintf(stderr, "%s: %s\n", test, err.msg);
        tf_test_pair_close(p);
        return EXIT_FAILURE;
    }
    if (!pc->usable) {
        const char *why = pc->why, *prefix = "no CUDA device: ";
        if (strncmp(why, prefix, strlen(prefix)) == 0) why += strlen(prefix);
        /* what can be checked without a GPU */
        if (o && o->no_device && o->no_device(pc->desc->vtable, pc->why)) {
            tf_test_pair_close(p);
            return EXIT_FAILURE;
        }
        char line[1200];
        snprintf(line, sizeof line, "no CUDA device (%s)", why);
        tf_test_pair_close(p);
        return tf_test_gpu_unavailable(test, line);
    }
    if (o && o->answer_probe && getenv("TF_CUDA_TEST_PROBE")) {
        tf_test_pair_close(p);
        return EXIT_SUCCESS;
    }
    const tf_loaded_plugin *pp = tf_test_plugin(p->reg, TF_KIND_BACKEND, "cpu", &err);
    if (!pp) {
        char line[4200];
        snprintf(line, sizeof line, "backend-cpu (the reference) is not usable: %s", err.msg);
        tf_test_pair_close(p);
        return tf_test_gpu_unavailable(test, line);
    }
    p->gv = pc->desc->vtable;
    p->cv = pp->desc->vtable;
    p->seed = tf_test_seed_run(test);
    tf_backend_open_args ga = {sizeof ga, 0, 0, 1234, NULL, 1}, ca = {sizeof ca, 0, 0, 1234, NULL, 1};
    if (p->gv->open(&ga, &p->gb, &err) != TF_OK) {
        fprintf(stderr, "%s: opening backend-cuda: %s\n", test, err.msg);
        p->gb = NULL;
        tf_test_pair_close(p);
        return EXIT_FAILURE;
    }
    if (p->cv->open(&ca, &p->cb, &err) != TF_OK) {
        fprintf(stderr, "%s: opening backend-cpu: %s\n", test, err.msg);
        p->cb = NULL;
        tf_test_pair_close(p);
        return EXIT_FAILURE;
    }
    printf("%s: %s against %s\n", test, p->gv->device_name(p->gb), p->cv->device_name(p->cb));
    return -1;
}

#endif
