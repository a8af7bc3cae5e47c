/*
 * gemma.c — the public C API.
 *
 * Conventions:
 *   - every fallible call returns gm_status; on failure gm_last_error() holds a readable message
 *     for the calling thread (naming the file, offset or argument at fault);
 *   - handles are opaque; each *_free accepts NULL;
 *   - arrays the library allocates for the caller are released with gm_free().
 */
#ifndef GEMMA_H
#define GEMMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum gm_status {
    GM_OK = 0,
    GM_ERR_IO,          /* a file could not be opened, read or written */
    GM_ERR_FORMAT,      /* a file is malformed, truncated or inconsistent */
    GM_ERR_UNSUPPORTED, /* valid input this build does not handle (architecture, type) */
    GM_ERR_NOMEM,       /* an allocation failed */
    GM_ERR_ARG,         /* a caller-supplied argument is invalid */
    GM_ERR_RANGE,       /* a value is out of range (prompt longer than the cache, id >= vocab) */
    GM_ERR_COMM,        /* a collective failed or a peer device/rank was lost */
    GM_ERR_STATE,       /* the call does not fit the object's state */
    GM_ERR_INTERRUPTED  /* the caller asked to stop (e.g. SIGINT) */
} gm_status;

const char *gm_last_error(void);
/* Where a call reports something that is not a failure (a skipped line, a cache it could not write). */
typedef void (*gm_warn_fn)(void *user, const char *message);
const char *gm_status_name(gm_status status);
void gm_free(void *p);

/* ---------------------------------------------------------------- model configuration */

#define GM_MAX_LAYERS 128

typedef struct gm_config {
    char architecture[32];   /* "gemma3" */
    int n_layers;            /* 18 (270M) .. 62 (27B) */
    int d_model;             /* embedding width D */
    int d_ff;                /* MLP hidden width F */
    int n_heads;             /* query heads N */
    int n_kv_heads;          /* key/value heads K (N % K == 0) */
    int head_dim;            /* H */
    int vocab_size;          /* V, rows of the (tied) embedding */
    int sliding_window;      /* keys a local layer sees, the current one included */
    int context_length;      /* trained context from the file (informative) */
    float rms_eps;
    float rope_base_global;  /* 1e6 */
    float rope_base_local;   /* 1e4 */
    float rope_scale_global; /* positions are divided by this on global layers (8 for 4B+) */
    float rope_scale_local;
    float query_scale;       /* multiplier applied to q after RoPE: 1/sqrt(H) or 1/sqrt(D/N) */
    float embed_scale;       /* sqrt(D) */
    float attn_softcap;      /* 0 = none (Gemma 3) */
    float final_softcap;     /* 0 = none (Gemma 3) */
    bool norms_add_one;      /* true when the file stores w and the norm uses (1 + w) (HF layout) */
    bool layer_is_global[GM_MAX_LAYERS];
    int bos_id, eos_id, pad_id, unk_id, start_of_turn_id, end_of_turn_id;
} gm_config;

/* ---------------------------------------------------------------- tokenizer */

typedef struct gm_tokenizer gm_tokenizer;

/* Load only the tokenizer of a model (GGUF file or Hugging Face folder): no weights are read. */
gm_status gm_tokenizer_load(const char *model_path, gm_tokenizer **out);
void gm_tokenizer_free(gm_tokenizer *tok);
int gm_tokenizer_vocab_size(const gm_tokenizer *tok);
/* The piece text of one id as stored (U+2581 for spaces, "<0x0A>" for byte pieces); NULL if out of range. */
const char *gm_tokenizer_piece(const gm_tokenizer *tok, int32_t id);
/* Look up an exact piece; -1 if absent. */
int32_t gm_tokenizer_find(const gm_tokenizer *tok, const char *piece);
/* UTF-8 text (any bytes: invalid UTF-8 goes through byte fallback) -> ids; *ids is freed with gm_free. */
gm_status gm_tokenizer_encode(const gm_tokenizer *tok, const char *text, size_t len, bool add_bos,
                              int32_t **ids, size_t *n_ids);
/* ids -> text, NUL-terminated; control tokens (bos, eos, pad) decode to nothing. As Hugging Face
 * `tokenizers` decodes: U+2581 -> ' '; a run of byte pieces (<0xE4><0xB8><0xAD>) becomes its bytes if the
 * run is valid UTF-8, else one U+FFFD per byte. An id outside the vocabulary is GM_ERR_RANGE. */
gm_status gm_tokenizer_decode(const gm_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text);
/* The same, also giving the length (the text may hold NUL bytes from <0x00>). */
gm_status gm_tokenizer_decode_len(const gm_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text,
                                  size_t *text_len);
/* Raw bytes one id stands for, for streaming output: U+2581 -> ' ', a byte piece -> its single byte
 * (concatenate and validate UTF-8 yourself), control tokens -> "" (len 0). NULL if id is out of range. */
const char *gm_tokenizer_token_bytes(const gm_tokenizer *tok, int32_t id, size_t *len);
/* True for control tokens (<bos>, <eos>, <pad>, <start_of_turn>, <end_of_turn>, <unusedN> in a GGUF). */
bool gm_tokenizer_is_control(const gm_tokenizer *tok, int32_t id);
/* <bos> / <eos> ids (from the GGUF metadata, else the pieces "<bos>" / "<eos>"); -1 if none. */
int32_t gm_tokenizer_bos_id(const gm_tokenizer *tok);
int32_t gm_tokenizer_eos_id(const gm_tokenizer *tok);


/* ---------------------------------------------------------------- model: load, sharded over devices */

typedef enum gm_sharding {
    GM_SHARDING_AUTO = 0,     /* fsdp when there is more than one device, else replicated */
    GM_SHARDING_FSDP,         /* kauldron's FSDPSharding rule (the seed tutorial's) */
    GM_SHARDING_TP,           /* Megatron tensor parallelism: heads, FFN hidden and vocabulary split */
    GM_SHARDING_REPLICATED
} gm_sharding;

/* How the products round their inputs. EXACT (default): as accurate as f32 arithmetic (the packed
 * kernels split activations into integer terms that carry 24 bits; logits within ~1e-6 of transformers'
 * f32 on the real 270M). FAST: as llama.cpp rounds them: 8 bits per 32 values for quantized weights
 * (batched products, and single tokens where the kernels have int8 products), bf16 for BF16 weights
 * (batched products): prefill ~1.5x faster on AVX-512 VNNI, logits within a few % of the largest
 * (docs/CORRECTNESS.md). Kernels without int8 / bf16 products (AVX2, scalar, AMX) stay exact. */
typedef enum gm_precision { GM_PRECISION_EXACT = 0, GM_PRECISION_FAST } gm_precision;

/* The KV cache's values. AUTO (default): f32 with EXACT precision, f16 with FAST (llama.cpp's default
 * cache type). F16 halves the cache's memory and what attention reads per token; on its own it moves
 * the real 270M's logits by up to 6e-4 of the largest (within the 1e-3 reference tolerance, but some
 * near-tied top-10 ids swap), so exact mode keeps f32 unless asked. */
typedef enum gm_kv_type { GM_KV_AUTO = 0, GM_KV_F32, GM_KV_F16 } gm_kv_type;

/* How threads wait for each other (in products, attention and the collectives between devices).
 * SPIN: briefly spin, then yield, then sleep: the fastest wake-up when every thread has its own core;
 * where the waits keep running long (another process holds a core), spin a few microseconds and sleep.
 * YIELD: sleep at once: for more busy threads than cores (devices x threads x local MPI ranks above
 * the CPUs this process may use), where a spinning waiter keeps the thread it waits for off the core
 * (and a yielding one hands a core shared with another process to that process until its next tick).
 * AUTO (default): YIELD when this process can see it is oversubscribed (its affinity mask, and the
 * ranks mpirun starts on this host), else SPIN. Under mpirun, the load that starts MPI also sets
 * OpenMPI's mpi_yield_when_idle unless the environment sets it: 1 with YIELD, 0 with SPIN, and with
 * AUTO 1 only when this host's ranks outnumber its CPUs (one thread of each rank waits in MPI). */
typedef enum gm_wait { GM_WAIT_AUTO = 0, GM_WAIT_SPIN, GM_WAIT_YIELD } gm_wait;

typedef struct gm_load_options {
    int devices;              /* in-process devices of this process (threads that own shards); default 1 */
    int threads_per_device;   /* worker threads inside each device; default 1 */
    gm_sharding sharding;
    int cache_length;         /* KV cache positions per session; default 4096 */
    bool use_mpi;             /* join the MPI world when launched under mpirun (default true) */
    gm_precision precision;   /* default GM_PRECISION_EXACT */
    gm_kv_type kv_type;       /* default GM_KV_AUTO */
    gm_wait wait;             /* default GM_WAIT_AUTO */
    /* A directory for the weight cache (NULL: none): each device's packed matrices are written there
     * once (one file per model, sharding and device), and so is the built tokenizer (one file per
     * model); later loads map them from the page cache instead of reading and packing the model file
     * and building the tokenizer again: the 270M loads in 9-14 ms instead of ~300. A stale or damaged
     * file is ignored and rewritten; one that cannot be written is reported through warn and the load
     * goes on. */
    const char *weight_cache;
    gm_warn_fn warn;          /* NULL: warnings are dropped */
    void *warn_user;
} gm_load_options;

typedef struct gm_model gm_model;

void gm_load_options_default(gm_load_options *opt);
/* Each device reads only its own slices of each tensor from the file. Under MPI every rank calls this;
 * ranks check that they opened the same file with the same options and refuse otherwise. */
gm_status gm_model_load(const char *path, const gm_load_options *opt, gm_model **out);
void gm_model_free(gm_model *m);
const gm_config *gm_model_config(const gm_model *m);
const gm_tokenizer *gm_model_tokenizer(const gm_model *m);
int gm_model_devices(const gm_model *m);      /* devices in the whole mesh */
int gm_model_rank(const gm_model *m);         /* MPI rank (0 when not under MPI) */
int gm_model_ranks(const gm_model *m);
/* Bytes of weights this process holds (all its devices) and the plan, for `gemma info`/`bench`. */
uint64_t gm_model_weight_bytes(const gm_model *m);
/* Bytes of weights one decoded token reads on this process: every matrix once, where a BF16 vocabulary
 * matrix has a screening copy (an int8 one, half its bytes) the copy with `screened` (the screened product,
 * gm_session_forward_top, read it) and the matrix without. */
uint64_t gm_model_read_bytes(const gm_model *m, bool screened);
/* Bytes of activation scratch this process holds (all its devices). */
uint64_t gm_model_activation_bytes(const gm_model *m);
typedef struct gm_comm_counters { uint64_t calls, bytes; double seconds; } gm_comm_counters;
gm_comm_counters gm_model_comm_counters(const gm_model *m);
/* Screened vocabulary products this process's devices ran (gm_session_forward_top) and the rows they
 * computed exactly, since the model was loaded. */
typedef struct gm_screen_counters { uint64_t steps, exact_rows; } gm_screen_counters;
gm_screen_counters gm_model_screen_counters(const gm_model *m);
/* What the weight cache did for this process's devices: "off", "mapped" (every packed matrix came
 * from the cache), "written" (packed from the model and saved) or "unwritten" (packed, not saved). */
const char *gm_model_weight_cache(const gm_model *m);
/* What the weight cache directory did for this process's tokenizer (rank 0 builds it; other ranks say
 * "off"): "off", "mapped" (from DIR/<model>-<key>.gmtok), "written" (built from the model and saved)
 * or "unwritten" (built, not saved). */
const char *gm_model_tokenizer_cache(const gm_model *m);
void gm_model_reset_comm_counters(gm_model *m);
/* The KV cache type sessions of this model use (GM_KV_F32 or GM_KV_F16: AUTO resolved). */
gm_kv_type gm_model_kv_type(const gm_model *m);
/* The wait policy in force: GM_WAIT_SPIN or GM_WAIT_YIELD (AUTO resolved at load). */
gm_wait gm_model_wait(const gm_model *m);

/* ---------------------------------------------------------------- sessions: KV cache + forward */

typedef struct gm_session gm_session;

gm_status gm_session_new(gm_model *m, gm_session **out);
void gm_session_free(gm_session *s);
void gm_session_reset(gm_session *s);
int gm_session_position(const gm_session *s);   /* tokens in the cache */
int gm_session_capacity(const gm_session *s);   /* cache_length */
gm_model *gm_session_model(const gm_session *s);
uint64_t gm_session_kv_bytes(const gm_session *s);   /* KV cache bytes this process holds for the session */
/* Append n tokens at the current position. logits_last [V] (may be NULL) receives the last position's
 * logits; logits_all [n][V] (may be NULL) every position's. GM_ERR_RANGE (nothing appended) when the
 * tokens do not fit the cache. Under MPI only rank 0 calls this; other ranks run gm_model_serve. */
gm_status gm_session_forward(gm_session *s, const int32_t *tokens, size_t n, float *logits_last, float *logits_all);
/* The same when only the `top` largest of the last position's logits need be exact: what greedy (top 1)
 * and top-k sampling (top k) read. Those, and every logit tying with the top-th largest, are bit for bit
 * what gm_session_forward gives; every other value is an approximation below the top-th largest. The
 * vocabulary product first runs with the input rounded to 8 bits per 32 values, each row with a bound on
 * its error, and then exactly for the rows whose bound reaches the top (docs/DESIGN.md, "The screened
 * vocabulary product"): on AVX2 and AVX-512 VNNI with a Q8_0, Q5_0 or Q4_0 vocabulary matrix; elsewhere,
 * and for top <= 0 or top > 1024, every logit is exact. */
gm_status gm_session_forward_top(gm_session *s, const int32_t *tokens, size_t n, int top, float *logits_last);
/* Ranks other than 0 call this after loading: it follows rank 0's calls until rank 0 frees the model. */
gm_status gm_model_serve(gm_model *m);
/* Call once before the process exits if it ran under MPI (finalizes MPI; harmless otherwise). */
void gm_shutdown(void);


/* ---------------------------------------------------------------- generation and chat */

/* Picks the next token from logits [V] (which it may modify); a sampler (gm_sampler_pick) or your own. */
typedef int32_t (*gm_pick_fn)(void *ctx, float *logits, int vocab_size);
/* Streaming text: called with each newly final piece of UTF-8 text; return false to stop. */
typedef bool (*gm_text_fn)(void *user, const char *text, size_t len);

typedef enum gm_stop_reason {
    GM_STOP_NONE = 0,
    GM_STOP_EOS,          /* <eos> */
    GM_STOP_END_OF_TURN,  /* <end_of_turn> */
    GM_STOP_TOKEN,        /* one of the caller's stop ids */
    GM_STOP_STRING,       /* one of the caller's stop strings (not included in the text) */
    GM_STOP_MAX_TOKENS,
    GM_STOP_CACHE_FULL,   /* the KV cache has no room for another token */
    GM_STOP_INTERRUPTED,  /* *interrupt became non-zero */
    GM_STOP_CALLBACK      /* on_text returned false */
} gm_stop_reason;

typedef struct gm_generate_options {
    int max_new_tokens;                 /* default 2048 when 0 */
    gm_pick_fn pick;                    /* NULL = greedy */
    void *pick_ctx;
    const int32_t *stop_ids;            /* in addition to <eos> and <end_of_turn> */
    int n_stop_ids;
    const char *const *stop_strings;
    int n_stop_strings;
    gm_text_fn on_text;                 /* streaming, may be NULL */
    void *user;
    const volatile int *interrupt;      /* e.g. set from a SIGINT handler */
    int logits_top;                     /* > 0: pick reads only the logits_top largest logits (greedy: 1,
                                         * top-k: k; gm_sampler_logits_top; count in any ids your pick
                                         * refuses), so only those are computed exactly
                                         * (gm_session_forward_top); 0: every logit exact */
} gm_generate_options;

typedef struct gm_generate_result {
    int n_prompt, n_generated;
    gm_stop_reason stop;
    double prefill_seconds, decode_seconds;
} gm_generate_result;

const char *gm_stop_reason_name(gm_stop_reason r);

/* Run prompt ids through the session, then sample until a stop. *text (may be NULL) receives the whole
 * generated text (gm_free). The forbidden tokens <start_of_image>, <end_of_image> are never produced. */
gm_status gm_generate(gm_session *s, const int32_t *prompt, size_t n_prompt, const gm_generate_options *opt,
                      char **text, gm_generate_result *res);

/* Gemma 3 chat: <bos><start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n, the KV cache kept
 * between turns; each later turn first closes the previous answer with "<end_of_turn>\n". */
typedef struct gm_chat gm_chat;
gm_status gm_chat_new(gm_model *m, gm_chat **out);
void gm_chat_free(gm_chat *c);
void gm_chat_reset(gm_chat *c);
gm_session *gm_chat_session(gm_chat *c);
gm_status gm_chat_turn(gm_chat *c, const char *user_text, const gm_generate_options *opt, char **reply,
                       gm_generate_result *res);
/* The exact prompt text a turn would add (for display and tests). */
gm_status gm_chat_format_turn(const gm_chat *c, const char *user_text, char **out);
/* The Gemma 3 template for one user turn: first turn "<bos><start_of_turn>user\n{text}<end_of_turn>\n
 * <start_of_turn>model\n"; later turns start with "<end_of_turn>\n" (closing the previous answer) instead
 * of "<bos>". *out is freed with gm_free. */
gm_status gm_chat_template(const char *user_text, bool first_turn, char **out);
/* ================================================================ sampling and logits display
 * (src/text/sampler.c, src/text/topk.c, src/plot/; JAX PRNG in src/base/threefry.c) */

typedef enum gm_sample_method {
    GM_SAMPLE_GREEDY = 0, /* argmax */
    GM_SAMPLE_RANDOM,     /* categorical(logits / T) */
    GM_SAMPLE_TOP_K,      /* categorical over the k largest logits / T */
    GM_SAMPLE_TOP_P       /* nucleus: categorical over the smallest top set reaching mass p */
} gm_sample_method;

/* The seed library's sampling methods (gm.text.Greedy / RandomSampling / TopkSampling /
 * TopPSampling), drawing with JAX's threefry PRNG so that a seed gives JAX's tokens. */
typedef struct gm_sampler_config {
    gm_sample_method method;
    float temperature;         /* >= 0; 0 means greedy whatever the method */
    int top_k;                 /* >= 1 (used by GM_SAMPLE_TOP_K) */
    float top_p;               /* in (0, 1] (used by GM_SAMPLE_TOP_P; 1 keeps every token) */
    int64_t seed;              /* jax.random.key(seed): only the low 32 bits count, as in JAX */
    bool prng_original_layout; /* false: jax_threefry_partitionable=True, JAX's default since 0.5 */
} gm_sampler_config;

/* greedy, temperature 1, top_k 1, top_p 0.9 (the seed's defaults), seed 0. */
gm_sampler_config gm_sampler_config_default(void);
/* GM_ERR_ARG naming the field when temperature < 0 (or NaN), top_k < 1, top_p outside (0, 1]. */
gm_status gm_sampler_config_check(const gm_sampler_config *cfg);
/* How many of the largest logits the method reads: 1 for greedy (or temperature 0), top_k for top-k,
 * 0 (all of them) for random and top-p sampling: gm_generate_options.logits_top. */
int gm_sampler_logits_top(const gm_sampler_config *cfg);

typedef struct gm_sampler gm_sampler;
/* forbidden_ids (may be NULL when n_forbidden is 0) are never sampled: their logits count as
 * -inf, as the seed's sampler loop sets them (Gemma 3 passes 255999 and 256000). */
gm_status gm_sampler_create(const gm_sampler_config *cfg, const int32_t *forbidden_ids, size_t n_forbidden,
                            gm_sampler **out);
void gm_sampler_free(gm_sampler *s);
/* Restart the key stream from jax.random.key(seed) (the seed's sampler does this on every call). */
void gm_sampler_reseed(gm_sampler *s, int64_t seed);
/* Pick the next token from logits[vocab] (not modified). Like one step of the seed's sampler loop:
 * (rng, cur) = jax.random.split(rng), then the method draws with cur; greedy splits too.
 * GM_ERR_ARG on NaN or +inf logits, GM_ERR_RANGE when top_k > vocab, a forbidden id >= vocab or
 * when nothing can be sampled (every allowed logit is -inf). */
gm_status gm_sampler_next(gm_sampler *s, const float *logits, size_t vocab, int32_t *id);
/* jax.random.categorical(jax.random.key(seed), logits[vocab]): one draw, no split. */
gm_status gm_sample_categorical(int64_t seed, const float *logits, size_t vocab, int32_t *id);

typedef struct gm_token_prob {
    int32_t id;
    float logit;
    double prob; /* softmax over the whole vocabulary */
} gm_token_prob;
/* The k most probable tokens, sorted by probability (ties: lower id first). Probabilities come from
 * a numerically stable softmax in double over all `vocab` logits; -inf logits get 0. Writes
 * min(k, vocab) entries to out and their count to *n_out. GM_ERR_ARG on NaN / +inf logits. */
gm_status gm_logits_top_k(const float *logits, size_t vocab, size_t k, gm_token_prob *out, size_t *n_out);

/* Python's repr() of a token piece after U+2581 -> ' ' (how the seed labels tokens: ' Mary', '\n'),
 * NUL-terminated in buf (truncated to cap - 1 bytes on a UTF-8 boundary). Returns the length written. */
size_t gm_token_repr(const char *piece, char *buf, size_t cap);

/* The seed's tokenizer.plot_logits: a bar chart of the top 30 probabilities, descending, labelled with
 * gm_token_repr(labels[i]) (or "#id" where labels or labels[i] is NULL), axes "Tokens" and
 * "Probability", title (NULL: "Probability Distribution of Tokens"); written as a PNG to path.
 * The entries need not be sorted. */
gm_status gm_plot_logits_png(const char *path, const int32_t *ids, const char *const *labels, const double *probs,
                             size_t n, const char *title);
/* The same for a terminal: one line per token, "  ' Mary'  0.1234 ██████", bars of unicode blocks
 * scaled so the largest probability spans bar_width columns; top 30, descending; *text is freed
 * with gm_free. */
gm_status gm_plot_logits_text(const int32_t *ids, const char *const *labels, const double *probs, size_t n,
                              int bar_width, char **text);

/* ---------------------------------------------------------------- batched prompts over devices (FIRST_DIM) */

typedef struct gm_batch_options {
    int max_new_tokens;            /* default 256 when 0 */
    gm_sampler_config sampling;    /* row r draws with seed + r (greedy ignores it) */
} gm_batch_options;

typedef struct gm_batch_row {
    int32_t *ids;                  /* generated ids (gm_free), the stop token included */
    size_t n_ids;
    gm_stop_reason stop;
} gm_batch_row;

/* Generate for n prompts at once, the batch split by rows over the mesh's devices as the seed's
 * FIRST_DIM sharding does: each device keeps the KV caches of its rows and samples them; the projections
 * are computed together over the sharded weights. A batch that does not divide by the device count is
 * padded. Each row stops at <eos>, <end_of_turn>, max_new_tokens or a full cache. Rank 0 only (MPI). */
gm_status gm_generate_batch(gm_model *m, const int32_t *const *prompts, const size_t *lens, size_t n,
                            const gm_batch_options *opt, gm_batch_row *rows);

/* ================================================================ training (src/train/)
 *
 * Fine-tuning in f32 (master weights dequantized from any source type) with a hand-written backward,
 * FSDP (ZeRO-3) over the in-process devices and MPI ranks of the mesh: each device holds 1/N of the
 * weights, gradients and optimizer state; a layer's weights are all-gathered before its forward and
 * again before its backward, its gradients reduce-scattered after; the batch is split by examples.
 * Under mpirun EVERY rank makes the same calls with the same batches (SPMD); only rank 0 writes files. */

typedef enum gm_optimizer { GM_OPT_ADAMW = 0, GM_OPT_ADAFACTOR } gm_optimizer;

typedef struct gm_train_options {
    int devices;              /* in-process devices (each a thread with its share of the state); default 1 */
    int threads_per_device;   /* default 1 */
    bool use_mpi;             /* join the MPI world when launched by mpirun (default true) */
    gm_wait wait;             /* how threads wait for each other (gm_load_options.wait); default AUTO */
    int lora_rank;            /* 0: full fine-tuning; r > 0: adapters on q,k,v,o,gate,up,down, base frozen */
    double lora_alpha;        /* adapters are scaled by alpha / rank; default 2 * rank (when 0) */
    gm_optimizer optimizer;   /* default AdamW */
    double lr;                /* default 1e-4 */
    double beta1, beta2, eps; /* AdamW: 0.9, 0.999, 1e-8 (torch.optim.AdamW's defaults) */
    double weight_decay;      /* AdamW, decoupled: default 0; norms decay towards 1 + 0 (their HF value w -> 0) */
    double clip_norm;         /* clip the global gradient norm to this; 0 = off (default) */
    uint64_t seed;            /* LoRA A initialisation */
} gm_train_options;

/* One training sequence: predicting tokens[i + 1] from tokens[0..i] counts where loss_mask[i] != 0. */
typedef struct gm_train_example {
    const int32_t *tokens;    /* [n], n >= 2 */
    const uint8_t *loss_mask; /* [n - 1], NULL = every position */
    int n;
} gm_train_example;

typedef struct gm_train_stats {
    double loss;              /* masked mean cross-entropy of the batch, before the update */
    double grad_norm;         /* global L2 norm of the gradient, before clipping */
    int64_t tokens;           /* input positions of the batch */
    int64_t loss_tokens;      /* positions that counted */
    double seconds;
} gm_train_stats;

typedef struct gm_train_memory {
    uint64_t params, grads, optimizer; /* this device's shards */
    uint64_t gathered;                 /* full-size buffers for gathered weights and unreduced gradients */
    uint64_t activations;              /* saved activations and scratch */
    uint64_t total;
} gm_train_memory;

typedef struct gm_trainer gm_trainer;

void gm_train_options_default(gm_train_options *o);
/* Reads only this device's shards of each tensor (a GGUF file or a Hugging Face folder). */
gm_status gm_trainer_create(const char *model_path, const gm_train_options *o, gm_trainer **out);
void gm_trainer_free(gm_trainer *t);
const gm_config *gm_trainer_config(const gm_trainer *t);
const gm_tokenizer *gm_trainer_tokenizer(const gm_trainer *t); /* NULL when the model has none */
int gm_trainer_devices(const gm_trainer *t);   /* the whole mesh */
int gm_trainer_rank(const gm_trainer *t);
int gm_trainer_ranks(const gm_trainer *t);
int64_t gm_trainer_steps_done(const gm_trainer *t);
int64_t gm_trainer_examples_seen(const gm_trainer *t); /* examples of the steps done (restored by resume) */
/* Learning rate of the next steps (schedules); GM_ERR_ARG unless finite and >= 0. */
gm_status gm_trainer_set_lr(gm_trainer *t, double lr);
uint64_t gm_trainer_param_count(const gm_trainer *t, bool trainable_only);
gm_train_memory gm_trainer_memory(const gm_trainer *t, int local_device);
/* One optimizer step on a batch of n examples (split over the devices). GM_ERR_RANGE naming the step
 * when the loss or the gradient is NaN/Inf: the weights and optimizer state are then left unchanged. */
gm_status gm_trainer_step(gm_trainer *t, const gm_train_example *batch, int n, gm_train_stats *stats);
/* Forward only: sum of -log p over the counted positions, and their number. */
gm_status gm_trainer_eval(gm_trainer *t, const gm_train_example *batch, int n, double *loss_sum, int64_t *count);
/* Checkpoint into dir (created if needed): config.json + model.safetensors in Hugging Face layout (norms
 * stored as w, LoRA merged into the weights, f32) that gm_model_load reads, the tokenizer, and
 * trainer_state.json + optimizer.safetensors (+ adapter.safetensors with LoRA) to resume from, on any
 * device count. Each file is written to a temporary name and renamed; on error the previous checkpoint
 * in dir is left as it was. */
gm_status gm_trainer_save(gm_trainer *t, const char *dir);
/* Continue from a checkpoint written by gm_trainer_save for the same model and options. */
gm_status gm_trainer_resume(gm_trainer *t, const char *dir);

/* ---- training data: JSONL, one example per line ----
 *   {"prompt": "...", "response": "..."}  formatted like the seed's Seq2SeqTask:
 *       <bos><start_of_turn>user\n{prompt}<end_of_turn>\n<start_of_turn>model\n  (no loss) then
 *       {response}<end_of_turn>                                                 (loss)
 *   {"text": "..."}                       <bos>{text}, loss on every token
 * Blank lines are ignored. A malformed line (not JSON, not an object, missing or non-string fields, nothing to
 * learn) is reported as "FILE:LINE: why" through warn and skipped, or with strict makes the load fail with that
 * message. Examples longer than seq_len tokens are cut to seq_len and counted; one left with no response token
 * after the cut is reported and skipped (even with strict). */
typedef struct gm_dataset gm_dataset;
typedef struct gm_dataset_options {
    int seq_len;              /* default 512 */
    bool strict;
    gm_warn_fn warn;          /* NULL: messages are only counted */
    void *user;
} gm_dataset_options;
typedef struct gm_dataset_summary {
    int64_t lines, examples, blank, malformed, truncated, no_loss, tokens, loss_tokens;
} gm_dataset_summary;

gm_status gm_dataset_load(const char *path, const gm_tokenizer *tok, const gm_dataset_options *o, gm_dataset **out);
void gm_dataset_free(gm_dataset *d);
size_t gm_dataset_size(const gm_dataset *d);
const gm_train_example *gm_dataset_get(const gm_dataset *d, size_t i);
gm_dataset_summary gm_dataset_summary_of(const gm_dataset *d);
/* PNG line chart of a run (src/plot/loss_plot.c): training loss at steps[i], evaluation loss at eval_steps[i]. */
gm_status gm_plot_loss_png(const char *path, const int64_t *steps, const double *loss, size_t n,
                           const int64_t *eval_steps, const double *eval_loss, size_t n_eval, const char *title);

#ifdef __cplusplus
}
#endif
#endif
