/* The FSDP plan against the seed library's documented layout (reference/seed-library.md §3: kauldron's
 * FSDPSharding computed on Gemma 3 shapes with 8 devices, and the 3-device 4B case). */
#include <string.h>

#include "model/config.h"
#include "shard/plan.h"
#include "test_util.h"

static gm_config shape(int L, int D, int F, int N, int K, int H) {
    gm_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = L, c.d_model = D, c.d_ff = F, c.n_heads = N, c.n_kv_heads = K, c.head_dim = H, c.vocab_size = 262144;
    return c;
}

static gm_tensor_info tensor(const char *name, gm_dtype type, uint64_t ne0, uint64_t ne1) {
    gm_tensor_info t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.type = type;
    t.n_dims = ne1 > 1 ? 2 : 1;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = t.ne[3] = 1;
    return t;
}

static const char *axis_of(const gm_config *c, const gm_tensor_info *t, gm_sharding rule, int n) {
    static gm_tensor_plan p;
    if (gm_plan_tensor(c, t, rule, n, &p) != GM_OK) return "error";
    return p.split == GM_SPLIT_NONE ? "replicated" : p.jax_axis;
}

int main(void) {
    /* 27B, 8 devices: embedding -> V, q -> D, kv -> D, attn_vec -> D, gating -> F, linear -> F */
    gm_config c27 = shape(62, 5376, 21504, 32, 16, 128);
    uint64_t NH = 32 * 128, KH = 16 * 128;
    gm_tensor_info emb = tensor("token_embd.weight", GM_BF16, 5376, 262144);
    gm_tensor_info q = tensor("blk.0.attn_q.weight", GM_BF16, 5376, NH);
    gm_tensor_info k = tensor("blk.0.attn_k.weight", GM_BF16, 5376, KH);
    gm_tensor_info o = tensor("blk.0.attn_output.weight", GM_BF16, NH, 5376);
    gm_tensor_info g = tensor("blk.0.ffn_gate.weight", GM_BF16, 5376, 21504);
    gm_tensor_info d = tensor("blk.0.ffn_down.weight", GM_BF16, 21504, 5376);
    gm_tensor_info nrm = tensor("blk.0.attn_norm.weight", GM_F32, 5376, 1);
    CHECK(!strcmp(axis_of(&c27, &emb, GM_SHARDING_FSDP, 8), "V"), "embedding: %s", axis_of(&c27, &emb, GM_SHARDING_FSDP, 8));
    CHECK(!strcmp(axis_of(&c27, &q, GM_SHARDING_FSDP, 8), "D"), "q: %s", axis_of(&c27, &q, GM_SHARDING_FSDP, 8));
    CHECK(!strcmp(axis_of(&c27, &k, GM_SHARDING_FSDP, 8), "D"), "kv: %s", axis_of(&c27, &k, GM_SHARDING_FSDP, 8));
    CHECK(!strcmp(axis_of(&c27, &o, GM_SHARDING_FSDP, 8), "D"), "attn_vec: %s", axis_of(&c27, &o, GM_SHARDING_FSDP, 8));
    CHECK(!strcmp(axis_of(&c27, &g, GM_SHARDING_FSDP, 8), "F"), "gating: %s", axis_of(&c27, &g, GM_SHARDING_FSDP, 8));
    CHECK(!strcmp(axis_of(&c27, &d, GM_SHARDING_FSDP, 8), "F"), "linear: %s", axis_of(&c27, &d, GM_SHARDING_FSDP, 8));
    CHECK(!strcmp(axis_of(&c27, &nrm, GM_SHARDING_FSDP, 8), "replicated"), "norm");

    /* 270M / 1B attention weights are under 4 MiB as bf16: replicated */
    gm_config c1 = shape(26, 1152, 6912, 4, 1, 256);
    gm_tensor_info q1 = tensor("blk.0.attn_q.weight", GM_Q8_0, 1152, 1024);
    gm_tensor_info o1 = tensor("blk.0.attn_output.weight", GM_Q8_0, 1024, 1152);
    CHECK(!strcmp(axis_of(&c1, &q1, GM_SHARDING_FSDP, 8), "replicated"), "1B q");
    CHECK(!strcmp(axis_of(&c1, &o1, GM_SHARDING_FSDP, 8), "replicated"), "1B attn_vec");

    /* with 3 devices the 4B is entirely replicated (2560, 10240, 262144 are not divisible by 3) */
    gm_config c4 = shape(34, 2560, 10240, 8, 4, 256);
    gm_tensor_info e4 = tensor("token_embd.weight", GM_BF16, 2560, 262144);
    gm_tensor_info g4 = tensor("blk.0.ffn_gate.weight", GM_BF16, 2560, 10240);
    gm_tensor_info d4 = tensor("blk.0.ffn_down.weight", GM_BF16, 10240, 2560);
    CHECK(!strcmp(axis_of(&c4, &e4, GM_SHARDING_FSDP, 3), "replicated"), "4B emb /3");
    CHECK(!strcmp(axis_of(&c4, &g4, GM_SHARDING_FSDP, 3), "replicated"), "4B gate /3");
    CHECK(!strcmp(axis_of(&c4, &d4, GM_SHARDING_FSDP, 3), "replicated"), "4B down /3");

    /* never cut a quantization block: Q4_K rows of 2560 split in 8 is 320 columns, not a multiple of 256 */
    gm_tensor_info qk = tensor("blk.0.ffn_down.weight", GM_Q4_K, 10240, 2560);
    gm_tensor_plan p;
    CHECK(gm_plan_tensor(&c4, &qk, GM_SHARDING_FSDP, 8, &p) == GM_OK, "plan");
    CHECK(p.split != GM_SPLIT_COLS || (10240 / 8) % 256 == 0, "cut a block");

    /* tp: kv heads fewer than devices -> replicated; q split by heads */
    CHECK(!strcmp(axis_of(&c1, &q1, GM_SHARDING_TP, 4), "N"), "tp q");
    gm_tensor_info k1 = tensor("blk.0.attn_k.weight", GM_Q8_0, 1152, 256);
    CHECK(!strcmp(axis_of(&c1, &k1, GM_SHARDING_TP, 4), "replicated"), "tp kv with 1 kv head");

    /* ranges cover the split dim exactly, in order */
    CHECK(gm_plan_tensor(&c27, &emb, GM_SHARDING_FSDP, 8, &p) == GM_OK, "plan");
    uint64_t next = 0;
    for (int i = 0; i < 8; i++) {
        uint64_t lo, hi;
        gm_plan_range(&p, &emb, 8, i, &lo, &hi);
        CHECK(lo == next && hi - lo == 262144 / 8, "range %d: [%llu, %llu)", i, (unsigned long long)lo, (unsigned long long)hi);
        next = hi;
    }
    return gm_test_finish();
}
