/* Tokenizer vocabulary from a Hugging Face tokenizer.json: model.vocab, model.merges (ranks = list
 * order) and added_tokens. Only the configuration Gemma uses is accepted (BPE with byte fallback,
 * normalizer Replace(' ' -> U+2581) or none, pre-tokenizer none or Split(' ') after that Replace);
 * anything else is refused with GM_ERR_UNSUPPORTED naming the setting, never encoded differently. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"
#include "text/tokenizer_internal.h"

#define MAX_JSON_BYTES ((uint64_t)1 << 30)

static bool is_null(const cJSON *j) { return !j || cJSON_IsNull(j); }

static const char *str_of(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool is_true(const cJSON *obj, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* Replace(String " " -> "\u2581"), alone or as the only member of a Sequence. */
static bool is_space_replace(const cJSON *n) {
    const char *ty = str_of(n, "type");
    if (ty && !strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        return cJSON_GetArraySize(list) == 1 && is_space_replace(cJSON_GetArrayItem(list, 0));
    }
    if (!ty || strcmp(ty, "Replace")) return false;
    const char *pat = str_of(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String");
    const char *content = str_of(n, "content");
    return pat && content && !strcmp(pat, " ") && !strcmp(content, "\xE2\x96\x81");
}

static gm_status check_config(const cJSON *root, const cJSON *model, const char *path) {
    const char *ty = str_of(model, "type");
    if (ty && strcmp(ty, "BPE"))
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: model.type is '%s'; only BPE is supported", path, ty);
    if (!is_true(model, "byte_fallback"))
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: model.byte_fallback is not true (only byte-fallback BPE is supported)",
                       path);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!is_null(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0.0))
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: model.dropout is set (BPE dropout is not supported)", path);
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *v = str_of(model, keys[i]);
        if (v && *v) return gm_fail(GM_ERR_UNSUPPORTED, "%s: model.%s is not supported", path, keys[i]);
    }
    if (is_true(model, "ignore_merges"))
        return gm_fail(GM_ERR_UNSUPPORTED, "%s: model.ignore_merges = true is not supported", path);
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (is_null(norm) || !is_space_replace(norm))
        return gm_fail(GM_ERR_UNSUPPORTED,
                       "%s: the normalizer must be Replace(' ' -> U+2581) as in Gemma's tokenizer.json (found %s)", path,
                       is_null(norm) ? "none" : (str_of(norm, "type") ? str_of(norm, "type") : "?"));
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!is_null(pre)) {
        /* after the Replace no ' ' is left, so Split(' ') is a no-op; anything else is refused */
        const char *pty = str_of(pre, "type");
        const char *pat = str_of(cJSON_GetObjectItemCaseSensitive(pre, "pattern"), "String");
        if (!pty || strcmp(pty, "Split") || !pat || strcmp(pat, " ") || is_true(pre, "invert"))
            return gm_fail(GM_ERR_UNSUPPORTED, "%s: pre_tokenizer '%s' is not supported (only Split(' ') or none)", path,
                           pty ? pty : "?");
    }
    return GM_OK;
}

static gm_status load(gm_tokenizer *t, const cJSON *root, const char *path) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return gm_fail(GM_ERR_FORMAT, "%s: no \"model\" object", path);
    GM_TRY(check_config(root, model, path));
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return gm_fail(GM_ERR_FORMAT, "%s: model.vocab is not an object", path);
    if (!cJSON_IsArray(merges)) return gm_fail(GM_ERR_FORMAT, "%s: model.merges is not an array", path);
    if (!is_null(added) && !cJSON_IsArray(added)) return gm_fail(GM_ERR_FORMAT, "%s: added_tokens is not an array", path);
    /* vocabulary size: the largest id + 1 over model.vocab and added_tokens */
    int64_t max_id = -1;
    uint64_t bytes = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= GM_TOK_MAX_VOCAB ||
            it->valuedouble != (double)(int64_t)it->valuedouble)
            return gm_fail(GM_ERR_FORMAT, "%s: model.vocab[\"%s\"] is not an id in 0 .. %d", path, it->string,
                           GM_TOK_MAX_VOCAB - 1);
        if ((int64_t)it->valuedouble > max_id) max_id = (int64_t)it->valuedouble;
        bytes += strlen(it->string);
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const char *content = str_of(it, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= GM_TOK_MAX_VOCAB || !content)
            return gm_fail(GM_ERR_FORMAT, "%s: an added_tokens entry lacks a valid id or content", path);
        if ((int64_t)id->valuedouble > max_id) max_id = (int64_t)id->valuedouble;
        bytes += strlen(content);
        const char *flags[] = {"lstrip", "rstrip", "single_word", "normalized"};
        for (int k = 0; k < 4; k++)
            if (is_true(it, flags[k]))
                return gm_fail(GM_ERR_UNSUPPORTED, "%s: added token '%s' has %s = true (not supported)", path, content,
                               flags[k]);
    }
    if (max_id < 0) return gm_fail(GM_ERR_FORMAT, "%s: empty vocabulary", path);
    GM_TRY(gm_tok_alloc(t, (int32_t)(max_id + 1), bytes, path));
    cJSON_ArrayForEach(it, vocab) {
        int32_t id = (int32_t)it->valuedouble;
        GM_TRY(gm_tok_set_piece(t, id, it->string, strlen(it->string), path));
        t->type[id] = GM_PIECE_NORMAL;
        t->flags[id] = GM_PF_IN_MODEL;
    }
    cJSON_ArrayForEach(it, added) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
        const char *content = str_of(it, "content");
        size_t len = strlen(content);
        if (t->off[id] != UINT32_MAX) {
            if (t->len[id] != len || memcmp(gm_tok_text(t, id), content, len))
                return gm_fail(GM_ERR_FORMAT, "%s: added token %d '%s' differs from model.vocab's '%s'", path, id,
                               content, gm_tok_text(t, id));
        } else {
            GM_TRY(gm_tok_set_piece(t, id, content, len, path));
        }
        bool special = is_true(it, "special");
        t->type[id] = special ? GM_PIECE_CONTROL : GM_PIECE_USER_DEFINED;
        t->flags[id] |= GM_PF_ADDED | (special ? GM_PF_SKIP_DECODE : 0);
    }
    const char *unk = str_of(model, "unk_token");
    t->has_merges = true;
    snprintf(t->source, sizeof t->source, "tokenizer.json");
    GM_TRY(gm_tok_finish(t, path));
    if (unk) t->unk_id = gm_piece_map_find(&t->map, unk, strlen(unk));
    /* merges: "left right" strings (split at the one space) or [left, right] pairs; rank = position */
    int n_merges = cJSON_GetArraySize(merges);
    GM_TRY(gm_pair_map_init(&t->pairs, (size_t)n_merges));
    uint32_t rank = 0;
    char *buf = NULL;
    size_t buf_cap = 0;
    gm_status st = GM_OK;
    cJSON_ArrayForEach(it, merges) {
        const char *l = NULL, *r = NULL;
        size_t ll = 0, rl = 0;
        if (cJSON_IsString(it)) {
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                l = it->valuestring;
                ll = (size_t)(sp - l);
                r = sp + 1;
                rl = strlen(r);
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            l = cJSON_GetArrayItem(it, 0)->valuestring;
            r = cJSON_GetArrayItem(it, 1)->valuestring;
            ll = strlen(l);
            rl = strlen(r);
        }
        if (!l) {
            st = gm_fail(GM_ERR_FORMAT, "%s: model.merges[%u] is not \"a b\" or [\"a\", \"b\"]", path, rank);
            break;
        }
        if (ll + rl > buf_cap) {
            buf_cap = (ll + rl) * 2 + 64;
            char *nb = realloc(buf, buf_cap);
            if (!nb) {
                st = gm_fail(GM_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            buf = nb;
        }
        memcpy(buf, l, ll);
        memcpy(buf + ll, r, rl);
        int32_t a = gm_piece_map_find(&t->map, l, ll), b = gm_piece_map_find(&t->map, r, rl);
        int32_t m = gm_piece_map_find(&t->map, buf, ll + rl);
        if (a < 0 || b < 0 || m < 0 || !(t->flags[a] & t->flags[b] & t->flags[m] & GM_PF_IN_MODEL)) {
            st = gm_fail(GM_ERR_FORMAT, "%s: model.merges[%u] (\"%.*s\", \"%.*s\"): a piece is not in model.vocab", path,
                         rank, (int)ll, l, (int)rl, r);
            break;
        }
        if (ll + rl > GM_TOK_MAX_MERGED_BYTES) {
            st = gm_fail(GM_ERR_UNSUPPORTED, "%s: model.merges[%u] makes a %zu-byte piece (limit %d)", path, rank,
                         ll + rl, GM_TOK_MAX_MERGED_BYTES);
            break;
        }
        if (ll + rl > t->max_piece_len) t->max_piece_len = (uint32_t)(ll + rl);
        st = gm_pair_map_put(&t->pairs, a, b, rank, m);
        if (st != GM_OK) break;
        rank++;
    }
    free(buf);
    return st;
}

gm_status gm_vocab_load_hf_json(gm_tokenizer *t, const char *path) {
    char *text;
    uint64_t len;
    GM_TRY(gm_file_slurp(path, MAX_JSON_BYTES, &text, &len));
    cJSON *root = cJSON_ParseWithLength(text, (size_t)len);
    free(text);
    if (!root) return gm_fail(GM_ERR_FORMAT, "%s: not valid JSON", path);
    gm_status st = load(t, root, path);
    cJSON_Delete(root);
    return st;
}
