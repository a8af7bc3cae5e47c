/* gm_model_load on whole tiny Gemma 3 models built here as GGUF (tests/gguf_build.h, F32 weights): the
 * valid one loads and runs; each defect is refused at load with GM_ERR_FORMAT / GM_ERR_UNSUPPORTED and a
 * message naming the tensor or key, before anything is sized from the bad value:
 *   - absurd sizes in the metadata that the tensors do not back (d_ff = 2^29: found by fuzz_gguf, which
 *     made the loader allocate 360 GB of activations before it compared shapes; now shapes come first);
 *   - a tensor of the wrong shape, of an unknown type, or missing;
 *   - a vocabulary whose size disagrees with the embedding rows. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma.h"
#include "gguf_build.h"
#include "test_util.h"

enum { D = 32, NH = 2, NKV = 1, HD = 16, FF = 64, V = 16, T_F32 = 0 };

typedef struct defect {
    uint32_t d_ff;            /* metadata feed_forward_length */
    const char *bad_shape;    /* tensor stored with ne1 halved */
    const char *bad_type;     /* tensor whose info says type 26 (I32, not a weight type) */
    const char *missing;      /* tensor left out */
    int vocab_tokens;         /* tokenizer.ggml.tokens entries (0: none) */
} defect;

static float *rnd(size_t n, unsigned *seed) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = ((float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f) * 0.5f;
    }
    return p;
}

static void add(gguf_builder *b, const defect *d, const char *name, uint64_t ne0, uint64_t ne1, unsigned *seed) {
    if (d->missing && !strcmp(d->missing, name)) return;
    if (d->bad_shape && !strcmp(d->bad_shape, name)) ne1 = ne1 > 1 ? ne1 / 2 : 2;
    uint64_t ne[2] = {ne0, ne1};
    float *w = rnd(ne0 * ne1, seed);
    if (d->bad_type && !strcmp(d->bad_type, name)) {
        while (b->data.len % b->alignment) gguf_put(&b->data, "", 1);
        gguf_add_tensor_info(b, name, ne1 > 1 ? 2 : 1, ne, 26, b->data.len);
        gguf_put(&b->data, w, ne0 * ne1 * 4);
    } else {
        gguf_add_tensor(b, name, ne1 > 1 ? 2 : 1, ne, T_F32, w, ne0 * ne1 * 4);
    }
    free(w);
}

static gm_status load_built(const defect *d, gm_model **out) {
    gguf_builder b;
    gguf_builder_init(&b);
    gguf_kv_str(&b, "general.architecture", "gemma3");
    gguf_kv_u32(&b, "gemma3.block_count", 1);
    gguf_kv_u32(&b, "gemma3.embedding_length", D);
    gguf_kv_u32(&b, "gemma3.feed_forward_length", d->d_ff ? d->d_ff : FF);
    gguf_kv_u32(&b, "gemma3.attention.head_count", NH);
    gguf_kv_u32(&b, "gemma3.attention.head_count_kv", NKV);
    gguf_kv_u32(&b, "gemma3.attention.key_length", HD);
    gguf_kv_u32(&b, "gemma3.attention.value_length", HD);
    gguf_kv_u32(&b, "gemma3.attention.sliding_window", 4);
    if (d->vocab_tokens) {
        const char *toks[64];
        char names[64][16];
        for (int i = 0; i < d->vocab_tokens && i < 64; i++) {
            snprintf(names[i], sizeof names[i], "t%d", i);
            toks[i] = names[i];
        }
        gguf_kv_str_array(&b, "tokenizer.ggml.tokens", toks, (uint64_t)d->vocab_tokens);
    }
    unsigned seed = 7;
    add(&b, d, "token_embd.weight", D, V, &seed);
    add(&b, d, "output_norm.weight", D, 1, &seed);
    const struct { const char *n; uint64_t ne0, ne1; } L[] = {
        {"blk.0.attn_norm.weight", D, 1}, {"blk.0.attn_q.weight", D, NH * HD}, {"blk.0.attn_k.weight", D, NKV * HD},
        {"blk.0.attn_v.weight", D, NKV * HD}, {"blk.0.attn_output.weight", NH * HD, D}, {"blk.0.attn_q_norm.weight", HD, 1},
        {"blk.0.attn_k_norm.weight", HD, 1}, {"blk.0.post_attention_norm.weight", D, 1}, {"blk.0.ffn_norm.weight", D, 1},
        {"blk.0.ffn_gate.weight", D, FF}, {"blk.0.ffn_up.weight", D, FF}, {"blk.0.ffn_down.weight", FF, D},
        {"blk.0.post_ffw_norm.weight", D, 1}};
    for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) add(&b, d, L[i].n, L[i].ne0, L[i].ne1, &seed);
    size_t len;
    uint8_t *file = gguf_build(&b, &len);
    gguf_builder_free(&b);
    char path[256];
    gm_status st = GM_ERR_IO;
    if (gguf_write_temp(file, len, path, sizeof path) == 0) {
        gm_load_options o;
        gm_load_options_default(&o);
        o.cache_length = 16;
        o.use_mpi = false;
        st = gm_model_load(path, &o, out);
        remove(path);
    }
    free(file);
    return st;
}

static void expect_refused(const char *what, const defect *d, gm_status want, const char *needle) {
    gm_model *m = NULL;
    gm_status st = load_built(d, &m);
    CHECK(st == want && m == NULL, "%s: status %s, want %s (%s)", what, gm_status_name(st), gm_status_name(want),
          st == GM_OK ? "loaded" : gm_last_error());
    if (st != GM_OK) CHECK(strstr(gm_last_error(), needle) != NULL, "%s: message lacks '%s': %s", what, needle, gm_last_error());
    gm_model_free(m);
}

int main(void) {
    gm_model *m = NULL;
    defect ok = {0};
    gm_status st = load_built(&ok, &m);
    CHECK(st == GM_OK, "valid model: %s", gm_last_error());
    if (m) {
        gm_session *s = NULL;
        float logits[V];
        int32_t toks[3] = {2, 5, 9};
        CHECK(gm_session_new(m, &s) == GM_OK && gm_session_forward(s, toks, 3, logits, NULL) == GM_OK,
              "valid model forward: %s", gm_last_error());
        bool finite = true;
        for (int i = 0; i < V; i++) finite &= isfinite(logits[i]) != 0;
        CHECK(finite, "valid model: non-finite logits");
        gm_session_free(s);
        gm_model_free(m);
    }
    defect huge_ff = {.d_ff = 1u << 29};
    expect_refused("d_ff 2^29 (fuzz_gguf regression)", &huge_ff, GM_ERR_FORMAT, "blk.0.ffn_gate.weight' has shape [32, 64], expected [32, 536870912]");
    defect shape = {.bad_shape = "blk.0.attn_q.weight"};
    expect_refused("wrong shape", &shape, GM_ERR_FORMAT, "blk.0.attn_q.weight' has shape [32, 16], expected [32, 32]");
    defect emb = {.bad_shape = "token_embd.weight"};
    defect emb_tokens = {.bad_shape = "token_embd.weight", .vocab_tokens = V};
    expect_refused("vocabulary vs embedding rows", &emb_tokens, GM_ERR_FORMAT, "the vocabulary has 16 tokens but token_embd.weight has 8 rows");
    (void)emb;
    defect type = {.bad_type = "blk.0.ffn_up.weight"};
    expect_refused("unknown tensor type", &type, GM_ERR_UNSUPPORTED, "blk.0.ffn_up.weight' has type 26");
    defect missing = {.missing = "blk.0.ffn_down.weight"};
    expect_refused("missing tensor", &missing, GM_ERR_FORMAT, "blk.0.ffn_down.weight' is missing");
    defect norm = {.bad_shape = "blk.0.attn_q_norm.weight"};
    expect_refused("norm of the wrong length", &norm, GM_ERR_FORMAT, "blk.0.attn_q_norm.weight");
    return gm_test_finish();
}
