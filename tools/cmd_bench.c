/* gemma bench: load time, prefill and decode speed, time to first token, peak memory and bytes
 * communicated per decoded token, on this mesh. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/clock.h"
#include "cli.h"
#include "kernels/matvec.h"
#include "kernels/ops.h"
#include "kernels/packed.h"

/* Which kernels ran: the dispatcher's instruction set, and packed int16 / exact f32 weights. */
static const char *cli_kernels_desc(void) {
    const char *e = getenv("GM_EXACT");
    bool exact = e && *e && strcmp(e, "0") != 0;
    const char *isa = gm_kernels_isa();
    if (exact) return !strcmp(isa, "avx512") ? "avx512, f32 activations (GM_EXACT)"
                      : !strcmp(isa, "avx2") ? "avx2, f32 activations (GM_EXACT)" : "scalar, f32 activations (GM_EXACT)";
    if (!strcmp(isa, "avx512")) return gm_packed_amx_matmul() ? "avx512 vnni (decode) + amx-bf16 (prefill), packed weights"
                                                           : "avx512 vnni, packed weights";
    return !strcmp(isa, "avx2") ? "avx2, packed weights" : "scalar, packed weights";
}

static const char *HELP_TAIL =
    "  --prompt-tokens P      prefill length (default 512)\n"
    "  --gen-tokens G         decoded tokens (default 64; end tokens ignored)\n"
    "  --reps R               repetitions; the best is reported (default 1)\n"
    "  --json                 one JSON object: prefill_tok_s, decode_tok_s, ttft_ms (best prefill),\n"
    "                         load_ms, first_token_ms (load + first prefill), weight_cache,\n"
    "                         tokenizer_cache, peak_rss_mb,\n"
    "                         bytes_read_per_token, comm_bytes_per_token, weight_bytes, devices, threads,\n"
    "                         sharding, kernels, precision, kv_cache, wait (spin or yield; under MPI also\n"
    "                         mpi_yield_when_idle, 0 or 1), sampling (the\n"
    "                         method and its settings), last_token (the last decoded id), logits_top,\n"
    "                         screened_steps, screen_exact_rows_per_step (the screened vocabulary product)\n"
    "Sampling: greedy (the default) picks each token by argmax; another method runs the sampler of\n"
    "generate and chat on every token, and its time counts in the decode speed. Greedy and top-k compute\n"
    "exactly only the logits they read, as generate and chat do (logits_top: 1, or k; 0 with\n"
    "--full-logits or another method: every logit exact).\n"
    "bytes_read_per_token: weight bytes one decoded token streams (every matrix of this rank once, the\n"
    "tied embedding as the output projection, a BF16 one's int8 screening copy in its place where the\n"
    "screened product ran; in the packed layout the kernels read, see docs/BENCHMARKS.md) plus the KV\n"
    "cache bytes attention reads, averaged over the decoded positions.\n";

/* Bytes of K and V that attention reads for one token at position pos, all layers (every device
 * computes every head, so each reads the whole cache); `elem` bytes per value (f32 or f16). */
static double kv_read_bytes(const gm_config *c, long pos, double elem) {
    double b = 0;
    for (int l = 0; l < c->n_layers; l++) {
        long seen = pos + 1;
        if (!c->layer_is_global[l] && c->sliding_window > 0 && seen > c->sliding_window) seen = c->sliding_window;
        b += 2.0 * (double)seen * (double)c->n_kv_heads * (double)c->head_dim * elem;
    }
    return b;
}

static const char *sampling_name(gm_sample_method m) {
    return m == GM_SAMPLE_RANDOM ? "random" : m == GM_SAMPLE_TOP_K ? "top-k" : m == GM_SAMPLE_TOP_P ? "top-p" : "greedy";
}

/* The next token: a bare argmax when greedy, else the sampler of generate and chat. */
static gm_status pick(bool greedy, gm_sampler *smp, const float *logits, int V, int32_t *tok) {
    if (!greedy) return gm_sampler_next(smp, logits, (size_t)V, tok);
    *tok = (int32_t)gm_argmax_f32(logits, (size_t)V);
    return GM_OK;
}

int cmd_bench(int argc, char **argv) {
    cli_model_flags mf;
    cli_model_flags_init(&mf);
    long P = 512, G = 64, reps = 1;
    bool json = false;
    cli_sampling sp;
    cli_sampling_init(&sp);
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = cli_model_flag("bench", argc, argv, &i, &mf);
        if (r == 0) r = cli_sampling_flag("bench", argc, argv, &i, &sp);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs("usage: gemma bench -m MODEL [options]\n", stdout);
            fputs(CLI_MODEL_FLAGS_HELP, stdout);
            fputs(CLI_SAMPLING_FLAGS_HELP, stdout);
            fputs(HELP_TAIL, stdout);
            return 0;
        } else if (cli_flag_value(argc, argv, &i, "--prompt-tokens", NULL, &v)) {
            if (!cli_parse_int(v, 1, 1 << 20, &P)) return cli_usage_error("bench", "--prompt-tokens wants an integer >= 1");
        } else if (cli_flag_value(argc, argv, &i, "--gen-tokens", NULL, &v)) {
            if (!cli_parse_int(v, 0, 1 << 20, &G)) return cli_usage_error("bench", "--gen-tokens wants an integer >= 0");
        } else if (cli_flag_value(argc, argv, &i, "--reps", NULL, &v)) {
            if (!cli_parse_int(v, 1, 1000, &reps)) return cli_usage_error("bench", "--reps wants an integer >= 1");
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            return cli_usage_error("bench", "unknown argument '%s'", argv[i]);
        }
    }
    if (cli_sampling_finish("bench", &sp) != 0) return 2;
    /* greedy: the argmax alone, as before sampling could be chosen; otherwise the chat loop's sampler
     * picks every token and its time counts in decode */
    bool greedy = sp.cfg.method == GM_SAMPLE_GREEDY || sp.cfg.temperature == 0.0f;
    int top = cli_sampling_logits_top(&sp); /* as generate and chat: the screened product unless --full-logits */
    if (P + G + 1 > mf.load.cache_length) mf.load.cache_length = (int)(P + G + 1);
    double t_start = gm_now_seconds(), t_load = t_start, t_first = 0;
    gm_model *m;
    int code = 0;
    if (cli_load_model("bench", &mf, &m, &code) != 0) return code;
    t_load = gm_now_seconds() - t_load;
    const gm_config *c = gm_model_config(m);
    int V = c->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t *prompt = malloc((size_t)P * sizeof *prompt);
    if (!logits || !prompt) {
        free(logits);
        free(prompt);
        cli_unload_model(m);
        return cli_error("bench", "out of memory");
    }
    /* a deterministic prompt of ordinary vocabulary ids (BOS first) */
    uint32_t x = 12345;
    prompt[0] = c->bos_id;
    for (long i = 1; i < P; i++) {
        x = x * 1664525u + 1013904223u;
        prompt[i] = (int32_t)(300 + (x >> 8) % 20000 % (uint32_t)(V > 400 ? V - 300 : 1));
    }
    uint64_t kv_bytes = 0;
    double best_prefill = 1e30, best_decode = 1e30, best_ttft = 1e30, comm_per_tok = 0, comm_s_per_tok = 0;
    gm_status st = GM_OK;
    int32_t tok = -1;
    for (long rep = 0; rep < reps && st == GM_OK; rep++) {
        gm_session *s;
        gm_sampler *smp = NULL;
        st = gm_sampler_create(&sp.cfg, NULL, 0, &smp);
        if (st == GM_OK) st = gm_session_new(m, &s);
        if (st != GM_OK) {
            gm_sampler_free(smp);
            break;
        }
        double t0 = gm_now_seconds();
        st = gm_session_forward_top(s, prompt, (size_t)P, top, logits);
        if (st == GM_OK) st = pick(greedy, smp, logits, V, &tok);
        double t_prefill = gm_now_seconds() - t0;
        /* what a user waits for: load, the first session and its prefill, picking the first token */
        if (rep == 0) t_first = gm_now_seconds() - t_start;
        gm_model_reset_comm_counters(m);
        t0 = gm_now_seconds();
        for (long g = 0; g < G && st == GM_OK; g++) {
            st = gm_session_forward_top(s, &tok, 1, top, logits);
            if (st == GM_OK) st = pick(greedy, smp, logits, V, &tok);
        }
        double t_decode = gm_now_seconds() - t0;
        gm_comm_counters cc = gm_model_comm_counters(m);
        kv_bytes = gm_session_kv_bytes(s);
        if (G > 0) comm_per_tok = (double)cc.bytes / (double)G, comm_s_per_tok = cc.seconds / (double)G;
        gm_session_free(s);
        gm_sampler_free(smp);
        if (t_prefill < best_prefill) best_prefill = t_prefill;
        if (t_decode < best_decode) best_decode = t_decode;
        /* time to first token: prefill plus picking the first token, for this prompt length */
        if (t_prefill < best_ttft) best_ttft = t_prefill;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (st != GM_OK) code = cli_error("bench", "%s", gm_last_error());
    else {
        double prefill_tps = (double)P / best_prefill, decode_tps = G ? (double)G / best_decode : 0;
        double rss_mb = (double)ru.ru_maxrss / 1024.0;
        gm_screen_counters sc = gm_model_screen_counters(m);
        double exact_rows_per_step = sc.steps ? (double)sc.exact_rows / (double)sc.steps : 0;
        /* weights: a replicated model's devices each compute a share of every matrix's rows */
        double wbytes = (double)gm_model_read_bytes(m, sc.steps > 0), kvb = 0;
        int ndev = gm_model_devices(m) / gm_model_ranks(m);
        bool replicated = mf.load.sharding == GM_SHARDING_REPLICATED || gm_model_devices(m) == 1;
        if (replicated && ndev > 1) wbytes /= ndev;
        double kv_elem = gm_model_kv_type(m) == GM_KV_F16 ? 2.0 : 4.0;
        for (long g = 0; g < G; g++) kvb += kv_read_bytes(c, P + g, kv_elem) / (double)G;
        double read_per_tok = wbytes + kvb * ndev;
        const char *sh = mf.load.sharding == GM_SHARDING_TP ? "tp" : mf.load.sharding == GM_SHARDING_REPLICATED ? "replicated"
                         : gm_model_devices(m) > 1 ? "fsdp" : "replicated";
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "prompt_tokens", (double)P);
            cJSON_AddNumberToObject(o, "gen_tokens", (double)G);
            cJSON_AddNumberToObject(o, "prefill_tok_s", prefill_tps);
            cJSON_AddNumberToObject(o, "decode_tok_s", decode_tps);
            cJSON_AddNumberToObject(o, "ttft_ms", best_ttft * 1000);
            cJSON_AddNumberToObject(o, "load_ms", t_load * 1000);
            cJSON_AddNumberToObject(o, "first_token_ms", t_first * 1000);
            cJSON_AddStringToObject(o, "weight_cache", gm_model_weight_cache(m));
            cJSON_AddStringToObject(o, "tokenizer_cache", gm_model_tokenizer_cache(m));
            cJSON_AddNumberToObject(o, "peak_rss_mb", rss_mb);
            cJSON_AddNumberToObject(o, "bytes_read_per_token", read_per_tok);
            cJSON_AddNumberToObject(o, "comm_bytes_per_token", comm_per_tok);
            cJSON_AddNumberToObject(o, "comm_seconds_per_token", comm_s_per_tok);
            cJSON_AddNumberToObject(o, "weight_bytes_this_rank", (double)gm_model_weight_bytes(m));
            cJSON_AddNumberToObject(o, "kv_bytes_this_rank", (double)kv_bytes);
            cJSON_AddNumberToObject(o, "activation_bytes_this_rank", (double)gm_model_activation_bytes(m));
            cJSON_AddNumberToObject(o, "devices", gm_model_devices(m));
            cJSON_AddNumberToObject(o, "ranks", gm_model_ranks(m));
            cJSON_AddNumberToObject(o, "threads", mf.load.threads_per_device);
            cJSON_AddStringToObject(o, "sharding", sh);
            cJSON_AddStringToObject(o, "kernels", cli_kernels_desc());
            cJSON_AddStringToObject(o, "precision", mf.load.precision == GM_PRECISION_FAST ? "fast" : "exact");
            /* logits computed exactly per step: "all", or the top N with the rest screened */
            cJSON_AddNumberToObject(o, "logits_top", top);
            cJSON_AddNumberToObject(o, "screened_steps", (double)sc.steps);
            cJSON_AddNumberToObject(o, "screen_exact_rows_per_step", exact_rows_per_step);
            cJSON_AddStringToObject(o, "kv_cache", gm_model_kv_type(m) == GM_KV_F16 ? "f16" : "f32");
            cJSON_AddStringToObject(o, "wait", gm_model_wait(m) == GM_WAIT_YIELD ? "yield" : "spin");
            /* what OpenMPI's ranks do while they poll (gm_wait): the environment the load left */
            const char *mpi_yield = getenv("OMPI_MCA_mpi_yield_when_idle");
            if (gm_model_ranks(m) > 1 && mpi_yield) cJSON_AddStringToObject(o, "mpi_yield_when_idle", mpi_yield);
            cJSON *so = cJSON_AddObjectToObject(o, "sampling");
            cJSON_AddStringToObject(so, "method", greedy ? "greedy" : sampling_name(sp.cfg.method));
            if (!greedy) {
                cJSON_AddNumberToObject(so, "temperature", sp.cfg.temperature);
                if (sp.cfg.method == GM_SAMPLE_TOP_K) cJSON_AddNumberToObject(so, "top_k", sp.cfg.top_k);
                if (sp.cfg.method == GM_SAMPLE_TOP_P) cJSON_AddNumberToObject(so, "top_p", sp.cfg.top_p);
                cJSON_AddNumberToObject(so, "seed", (double)sp.cfg.seed);
            }
            cJSON_AddNumberToObject(o, "last_token", tok);
            char *out = cJSON_PrintUnformatted(o);
            puts(out);
            free(out);
            cJSON_Delete(o);
        } else {
            printf("model        %s (%d devices over %d rank%s, %d thread%s each, %s)\n", mf.model, gm_model_devices(m),
                   gm_model_ranks(m), gm_model_ranks(m) > 1 ? "s" : "", mf.load.threads_per_device,
                   mf.load.threads_per_device > 1 ? "s" : "", sh);
            printf("load         %.1f ms (weight cache: %s, tokenizer cache: %s); first token %.1f ms after the "
                   "load started\n",
                   t_load * 1000, gm_model_weight_cache(m), gm_model_tokenizer_cache(m), t_first * 1000);
            printf("prefill      %ld tokens: %.1f tok/s (time to first token %.1f ms)\n", P, prefill_tps, best_ttft * 1000);
            printf("decode       %ld tokens: %.2f tok/s (%.2f ms/token)\n", G, decode_tps, G ? best_decode * 1000 / (double)G : 0);
            printf("memory       peak RSS %.1f MiB (rank 0): weights %.1f MiB, KV cache %.1f MiB, activations %.1f MiB\n",
                   rss_mb, gm_model_weight_bytes(m) / 1048576.0, kv_bytes / 1048576.0,
                   gm_model_activation_bytes(m) / 1048576.0);
            printf("reads        %.1f MB per decoded token (weights %.1f MB, KV cache %.2f MB); %.1f GB/s at this decode speed\n",
                   read_per_tok / 1e6, wbytes / 1e6, kvb * ndev / 1e6, G ? read_per_tok * decode_tps / 1e9 : 0.0);
            printf("kernels      %s, precision %s, KV cache %s, waits %s\n", cli_kernels_desc(),
                   mf.load.precision == GM_PRECISION_FAST ? "fast" : "exact", gm_model_kv_type(m) == GM_KV_F16 ? "f16" : "f32",
                   gm_model_wait(m) == GM_WAIT_YIELD ? "yield" : "spin");
            if (greedy) printf("sampling     greedy (argmax)\n");
            else if (sp.cfg.method == GM_SAMPLE_TOP_K)
                printf("sampling     top-k %d, T %g, seed %lld (in the decode time)\n", sp.cfg.top_k,
                       (double)sp.cfg.temperature, (long long)sp.cfg.seed);
            else if (sp.cfg.method == GM_SAMPLE_TOP_P)
                printf("sampling     top-p %g, T %g, seed %lld (in the decode time)\n", (double)sp.cfg.top_p,
                       (double)sp.cfg.temperature, (long long)sp.cfg.seed);
            else printf("sampling     random, T %g, seed %lld (in the decode time)\n", (double)sp.cfg.temperature,
                        (long long)sp.cfg.seed);
            printf("comm         %.0f bytes per decoded token (ring-equivalent, per device), %.3f ms of it in collectives\n",
                   comm_per_tok, comm_s_per_tok * 1000);
            if (sc.steps)
                printf("logits       top %d exact, the rest screened: %.0f of %d rows recomputed exactly per step\n", top,
                       exact_rows_per_step, V);
            else printf("logits       all exact%s\n", top ? " (no screened product on these kernels or weights)" : "");
        }
    }
    free(logits);
    free(prompt);
    cli_unload_model(m);
    return code;
}
