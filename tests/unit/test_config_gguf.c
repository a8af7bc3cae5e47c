/* gm_config from GGUF metadata: llama.cpp's keys and fallbacks (every 6th layer global, local RoPE base
 * 10000, 27B query scale from the 62-layer count), Ollama's variants (rope.local.freq_base, a boolean
 * sliding_window_pattern array), llama.cpp's integer pattern, and the errors for missing keys, another
 * architecture and a vocabulary that disagrees with the embedding. Values expected here are the
 * published conventions (shared/reference/peers-inference.md §2), not outputs of our code. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "gemma.h"
#include "gguf_build.h"
#include "io/source.h"
#include "test_util.h"

typedef struct spec {
    const char *arch;
    int layers, d_model, heads, kv_heads, head_dim;
    int vocab_tokens;      /* tokenizer.ggml.tokens entries; 0 = none */
    int emb_rows;
    bool ollama;           /* rope.local.freq_base + bool pattern */
    int int_pattern;       /* llama.cpp style integer pattern, 0 = none */
    bool drop_block_count;
    float rope_scale;      /* 0 = none */
} spec;

static gm_status build(const spec *sp, gm_source **out, char *path, size_t pathn) {
    gguf_builder b;
    gguf_builder_init(&b);
    gguf_kv_str(&b, "general.architecture", sp->arch);
    char key[96];
#define K(name) (snprintf(key, sizeof key, "%s." name, sp->arch), key)
    if (!sp->drop_block_count) gguf_kv_u32(&b, K("block_count"), (uint32_t)sp->layers);
    gguf_kv_u32(&b, K("embedding_length"), (uint32_t)sp->d_model);
    gguf_kv_u32(&b, K("feed_forward_length"), 64);
    gguf_kv_u32(&b, K("attention.head_count"), (uint32_t)sp->heads);
    gguf_kv_u32(&b, K("attention.head_count_kv"), (uint32_t)sp->kv_heads);
    gguf_kv_u32(&b, K("attention.key_length"), (uint32_t)sp->head_dim);
    gguf_kv_u32(&b, K("attention.value_length"), (uint32_t)sp->head_dim);
    gguf_kv_u32(&b, K("attention.sliding_window"), 512);
    gguf_kv_f32(&b, K("rope.freq_base"), 1000000.0f);
    if (sp->rope_scale > 0) {
        gguf_kv_str(&b, K("rope.scaling.type"), "linear");
        gguf_kv_f32(&b, K("rope.scaling.factor"), sp->rope_scale);
    }
    if (sp->ollama) {
        gguf_kv_f32(&b, K("rope.local.freq_base"), 20000.0f);
        uint8_t pat[8];
        for (int i = 0; i < sp->layers && i < 8; i++) pat[i] = i != 2; /* only layer 2 global */
        gguf_kv_array(&b, K("attention.sliding_window_pattern"), 7 /* bool */, pat, (uint64_t)sp->layers, 1);
    }
    if (sp->int_pattern) gguf_kv_u32(&b, K("attention.sliding_window_pattern"), (uint32_t)sp->int_pattern);
#undef K
    if (sp->vocab_tokens) {
        const char **toks = malloc((size_t)sp->vocab_tokens * sizeof *toks);
        for (int i = 0; i < sp->vocab_tokens; i++) toks[i] = "t";
        gguf_kv_str_array(&b, "tokenizer.ggml.tokens", toks, (uint64_t)sp->vocab_tokens);
        free(toks);
    }
    size_t emb_bytes = (size_t)sp->d_model * (size_t)sp->emb_rows * 4;
    float *emb = calloc(1, emb_bytes);
    uint64_t ne[2] = {(uint64_t)sp->d_model, (uint64_t)sp->emb_rows};
    gguf_add_tensor(&b, "token_embd.weight", 2, ne, 0, emb, emb_bytes);
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    gguf_write_temp(file, len, path, pathn);
    free(file);
    free(emb);
    gguf_builder_free(&b);
    return gm_source_open(path, out);
}

int main(void) {
    char path[256];
    gm_source *src;

    /* llama.cpp's 27B keys: 62 layers -> query scale 1/sqrt(5376/32) = 1/sqrt(168); every 6th layer global */
    spec s27 = {"gemma3", 62, 5376, 32, 16, 128, 0, 16, false, 0, false, 8.0f};
    CHECK(build(&s27, &src, path, sizeof path) == GM_OK, "27B keys: %s", gm_last_error());
    if (src) {
        const gm_config *c = gm_source_config(src);
        CHECK(fabsf(c->query_scale - 1.0f / sqrtf(168.0f)) < 1e-7f, "27B query scale %g", c->query_scale);
        CHECK(c->layer_is_global[5] && c->layer_is_global[59] && !c->layer_is_global[60] && !c->layer_is_global[0],
              "27B pattern");
        CHECK(c->rope_base_local == 10000.0f && c->rope_base_global == 1000000.0f, "rope bases");
        CHECK(c->rope_scale_global == 8.0f && c->rope_scale_local == 1.0f, "x8 scaling on global layers only");
        CHECK(c->vocab_size == 16, "vocab from the embedding rows");
        gm_source_close(src);
    }
    remove(path);

    /* 1B: query scale 1/sqrt(head_dim) */
    spec s1 = {"gemma3", 26, 1152, 4, 1, 256, 0, 8, false, 0, false, 0};
    CHECK(build(&s1, &src, path, sizeof path) == GM_OK, "1B keys");
    if (src) {
        CHECK(fabsf(gm_source_config(src)->query_scale - 1.0f / 16.0f) < 1e-7f, "1B query scale");
        gm_source_close(src);
    }
    remove(path);

    /* Ollama: local base key and boolean pattern (true = sliding) */
    spec so = {"gemma3", 4, 64, 2, 1, 32, 0, 8, true, 0, false, 0};
    CHECK(build(&so, &src, path, sizeof path) == GM_OK, "ollama keys: %s", gm_last_error());
    if (src) {
        const gm_config *c = gm_source_config(src);
        CHECK(c->rope_base_local == 20000.0f, "rope.local.freq_base read: %g", c->rope_base_local);
        CHECK(!c->layer_is_global[0] && !c->layer_is_global[1] && c->layer_is_global[2] && !c->layer_is_global[3],
              "boolean pattern");
        gm_source_close(src);
    }
    remove(path);

    /* llama.cpp generic integer pattern: period 3 -> layers 2, 5 global */
    spec si = {"gemma3", 6, 64, 2, 1, 32, 0, 8, false, 3, false, 0};
    CHECK(build(&si, &src, path, sizeof path) == GM_OK, "integer pattern");
    if (src) {
        const gm_config *c = gm_source_config(src);
        CHECK(c->layer_is_global[2] && c->layer_is_global[5] && !c->layer_is_global[3], "integer pattern layers");
        gm_source_close(src);
    }
    remove(path);

    /* errors: another architecture, a missing key, vocabulary vs embedding */
    spec sl = {"llama", 2, 64, 2, 1, 32, 0, 8, false, 0, false, 0};
    CHECK(build(&sl, &src, path, sizeof path) == GM_ERR_UNSUPPORTED && strstr(gm_last_error(), "llama"),
          "llama refused: %s", gm_last_error());
    remove(path);
    spec sm = {"gemma3", 2, 64, 2, 1, 32, 0, 8, false, 0, true, 0};
    CHECK(build(&sm, &src, path, sizeof path) == GM_ERR_FORMAT && strstr(gm_last_error(), "block_count"),
          "missing key named: %s", gm_last_error());
    remove(path);
    spec sv = {"gemma3", 2, 64, 2, 1, 32, 10, 8, false, 0, false, 0};
    CHECK(build(&sv, &src, path, sizeof path) == GM_ERR_FORMAT && strstr(gm_last_error(), "vocabulary"),
          "vocab mismatch: %s", gm_last_error());
    remove(path);
    spec sh = {"gemma3", 2, 64, 3, 2, 32, 0, 8, false, 0, false, 0};
    CHECK(build(&sh, &src, path, sizeof path) == GM_ERR_FORMAT, "3 heads over 2 kv heads refused");
    remove(path);
    return gm_test_finish();
}
