/* params_diff.c — how far apart two models' parameters are, for the
 * equivalence tests of the parallel strategies (tests/test_parallel.sh).
 *
 *   params_diff A.safetensors B.safetensors [TOL]
 *
 * B must have A's tensors (same names and shapes). Prints one line: the
 * relative difference of the whole parameter vector, max|a-b| / max|b| over
 * every element of every tensor, and the tensor where |a-b| is largest.
 * (Per tensor it would be ill-posed: a tensor whose gradient is zero in exact
 * arithmetic, such as attention key biases, holds only rounding noise.)
 * Exit 0 when it is <= TOL (default 1e-5), 1 when larger, 2 on a bad command
 * line or file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfcore/safetensors.h"

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: params_diff A.safetensors B.safetensors [TOL]\n");
        return 2;
    }
    double tol = argc == 4 ? atof(argv[3]) : 1e-5;
    tf_error err = {0};
    tf_safetensors *a = NULL, *b = NULL;
    if (tf_safetensors_open(argv[1], &a, &err) || tf_safetensors_open(argv[2], &b, &err)) {
        fprintf(stderr, "params_diff: %s\n", err.msg);
        tf_safetensors_close(a);
        return 2;
    }
    double worst = 0, bmax = 0; /* largest |a-b| (and where), largest |b| */
    const char *worst_name = "(none)";
    size_t n = tf_safetensors_count(a), compared = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const tf_st_tensor *ta = tf_safetensors_at(a, i);
        const tf_st_tensor *tb = tf_safetensors_find(b, ta->name);
        if (!tb || tb->numel != ta->numel) {
            fprintf(stderr, "params_diff: %s: tensor %s %s\n", argv[2], ta->name, tb ? "has another shape" : "is missing");
            rc = 2;
            break;
        }
        float *x = malloc(ta->numel * sizeof *x + 1), *y = malloc(tb->numel * sizeof *y + 1);
        if (!x || !y || tf_safetensors_copy_f32(a, ta, x, ta->numel, &err) ||
            tf_safetensors_copy_f32(b, tb, y, tb->numel, &err)) {
            fprintf(stderr, "params_diff: %s\n", x && y ? err.msg : "out of memory");
            rc = 2;
        } else {
            double dmax = 0, ymax = 0;
            for (size_t k = 0; k < ta->numel; k++) {
                double d = fabs((double)x[k] - (double)y[k]);
                if (!(d <= dmax)) dmax = d; /* NaN wins */
                if (fabs((double)y[k]) > ymax) ymax = fabs((double)y[k]);
            }
            if (!(dmax <= worst)) {
                worst = dmax;
                worst_name = ta->name;
            }
            if (ymax > bmax) bmax = ymax;
            compared++;
        }
        free(x);
        free(y);
    }
    if (rc == 0) {
        double rel = bmax > 0 ? worst / bmax : worst;
        printf("params_diff: %zu tensors, max|a-b| / max|b| = %.3g (largest |a-b| %.3g in %s)\n", compared, rel, worst,
               worst_name);
        rc = rel <= tol ? 0 : 1;
    }
    tf_safetensors_close(a);
    tf_safetensors_close(b);
    return rc;
}
