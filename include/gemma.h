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

#ifdef __cplusplus
}
#endif
#endif
