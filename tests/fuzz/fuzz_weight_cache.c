/* libFuzzer harness: any bytes as a weight cache file (model/weight_cache.h) for a tiny Q8_0 model, then
 * the load with --weight-cache and one forward step. So that inputs get past the header, the harness
 * writes the right key, file size and table hash into them (a file for another model, cut short or with
 * a damaged table is refused on those, which the CLI test shows); the table entries and the packed bytes
 * stay the fuzzer's. Properties: the load succeeds (a cache it cannot use is rebuilt), the state is
 * "mapped" or "written", nothing crashes or reads out of bounds whatever the table says.
 * Seeds: tests/fuzz/corpus/fuzz_weight_cache (the cache the model writes, as this harness found it). */
#include "fuzz/fuzz_util.h"

#include "base/hash.h"
#include "gemma.h"

static const char *MODEL = "../fuzz/corpus/fuzz_gguf/seed_vocab640_q8.gguf"; /* under tests/fixtures */

static gm_model *load(const char *model, const char *dir) {
    gm_load_options o;
    gm_load_options_default(&o);
    o.cache_length = 8;
    o.use_mpi = false;
    o.weight_cache = dir;
    gm_model *m = NULL;
    return gm_model_load(model, &o, &m) == GM_OK ? m : NULL;
}

/* The cache file the model writes: its path and header key, found once. */
static char cache_file[1024];
static uint64_t cache_key;

static void setup(const char *model, const char *dir) {
    if (cache_file[0]) return;
    gm_model *m = load(model, dir);
    FZ_ASSERT(m != NULL, "the tiny model does not load: %s", gm_last_error());
    gm_model_free(m);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".gmpack")) snprintf(cache_file, sizeof cache_file, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    FZ_ASSERT(cache_file[0], "no cache file written in %s", dir);
    FILE *f = fopen(cache_file, "rb");
    FZ_ASSERT(f && fseek(f, 16, SEEK_SET) == 0 && fread(&cache_key, 8, 1, f) == 1, "cannot read %s", cache_file);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char model[1024];
    fz_fixture(MODEL, model, sizeof model);
    const char *dir = fz_dir(); /* the cache files live in the harness's flat private folder */
    setup(model, dir);

    /* header: magic[8] version u32 count u32 key u64 file_bytes u64 table_hash u64 ...; table at 64 */
    uint8_t *buf = malloc(size > 64 ? size : 64);
    if (!buf) abort();
    memset(buf, 0, 64);
    memcpy(buf, data, size);
    size_t n = size > 64 ? size : 64;
    uint64_t file_bytes = n;
    uint32_t count;
    memcpy(buf + 16, &cache_key, 8);
    memcpy(buf + 24, &file_bytes, 8);
    memcpy(&count, buf + 12, 4);
    if (64 + (uint64_t)count * 48 <= n) {
        uint64_t h = gm_fnv1a(GM_FNV_SEED, buf + 64, (size_t)count * 48);
        memcpy(buf + 32, &h, 8);
    }
    char tmp[1100];
    fz_write("cache.in", buf, n, tmp, sizeof tmp);
    FZ_ASSERT(rename(tmp, cache_file) == 0, "cannot place the input at %s", cache_file);
    free(buf);

    gm_model *m = load(model, dir);
    FZ_ASSERT(m != NULL, "the load failed with a cache file present: %s", gm_last_error());
    const char *state = gm_model_weight_cache(m);
    FZ_ASSERT(!strcmp(state, "mapped") || !strcmp(state, "written"), "weight cache state %s", state);
    fz_forward_step(m, 2);
    gm_model_free(m);
    return 0;
}
