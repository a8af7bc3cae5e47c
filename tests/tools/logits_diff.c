/* logits_diff A.bin B.bin [TOL]: two float32 logit dumps (gemma logits --dump-logits) agree when
 * max|a-b| / max|a| <= TOL (default 1e-4) and their argmax is the same. Exit 0 if so, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *load(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)bytes);
    if (!v || fread(v, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(v);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    double tol = argc > 3 ? atof(argv[3]) : 1e-4;
    long na, nb;
    float *a = load(argv[1], &na), *b = load(argv[2], &nb);
    if (!a || !b || na != nb || na == 0) {
        free(a);
        free(b);
        fprintf(stderr, "logits_diff: cannot read %s / %s or sizes differ\n", argv[1], argv[2]);
        return 1;
    }
    double maxabs = 0, diff = 0;
    long ia = 0, ib = 0;
    for (long i = 0; i < na; i++) {
        maxabs = fmax(maxabs, fabs(a[i]));
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        if (a[i] > a[ia]) ia = i;
        if (b[i] > b[ib]) ib = i;
    }
    double rel = diff / maxabs;
    printf("max |diff| %.3g, max |logit| %.3g, relative %.3g, argmax %ld vs %ld\n", diff, maxabs, rel, ia, ib);
    free(a);
    free(b);
    return rel <= tol && ia == ib ? 0 : 1;
}
