/* Load a JSON fixture from GM_FIXTURES (tests/fixtures); exits 1 when missing or malformed. */
#ifndef GM_TESTS_JSON_FIXTURE_H
#define GM_TESTS_JSON_FIXTURE_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static inline cJSON *gm_test_load_json(const char *name) {
    char path[1024];
    gm_test_fixture(name, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open fixture %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read fixture %s\n", path);
        exit(1);
    }
    buf[n] = 0;
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    if (!j) {
        fprintf(stderr, "fixture %s is not JSON\n", path);
        exit(1);
    }
    return j;
}

/* float32 array from a JSON list of bit patterns; caller frees. */
static inline float *gm_test_json_floats(const cJSON *arr, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(arr);
    float *v = malloc((*n ? *n : 1) * sizeof *v);
    for (size_t i = 0; i < *n; i++) {
        uint32_t u = (uint32_t)cJSON_GetArrayItem(arr, (int)i)->valuedouble;
        memcpy(&v[i], &u, sizeof u);
    }
    return v;
}

#endif
