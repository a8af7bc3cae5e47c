/* gemma info: config, every tensor (type, shape, bytes), special tokens, totals. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/source.h"
#include "model/check.h"
#include "model/config.h"
#include "shard/plan_report.h"

static const char *HELP =
    "usage: gemma info -m MODEL [--devices N] [--sharding fsdp|tp|replicated] [--json] [--check]\n"
    "  -m, --model PATH   GGUF file or Hugging Face model folder\n"
    "  --devices N        show the sharding plan over N devices (all ranks x devices per rank)\n"
    "  --sharding RULE    fsdp (default for N > 1), tp or replicated\n"
    "  --json             one JSON document on stdout\n"
    "  --check            instead: read every tensor, dequantized, and report the first NaN or infinity\n"
    "                     (tensor name and element index); exit 1 if there is one\n";

/* --check: exit 0 when every weight is finite, 1 (naming tensor and element) when one is not. */
static int check_weights(const char *model, gm_source *src) {
    gm_nonfinite hit;
    gm_status st = gm_source_check_finite(src, &hit);
    gm_source_close(src);
    if (st != GM_OK) return cli_error("info", "%s", gm_last_error());
    if (hit.found)
        return cli_error("info", "%s: tensor '%s' holds %s at element %llu (row %llu, column %llu); the weights are "
                         "corrupt (checked %llu tensors before it)",
                         model, hit.tensor, isnan(hit.value) ? "NaN" : hit.value > 0 ? "+inf" : "-inf",
                         (unsigned long long)hit.index, (unsigned long long)hit.row, (unsigned long long)hit.col,
                         (unsigned long long)hit.tensors_scanned);
    printf("check      %llu tensors, %llu values: all finite\n", (unsigned long long)hit.tensors_scanned,
           (unsigned long long)hit.values_scanned);
    return 0;
}

static void shape_str(const gm_tensor_info *t, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, n - used, "[");
    for (int d = 0; d < t->n_dims && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, d ? ", %llu" : "%llu", (unsigned long long)t->ne[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

static cJSON *config_json(const gm_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "architecture", c->architecture);
    cJSON_AddStringToObject(o, "size", gm_config_size_label(c));
    cJSON_AddNumberToObject(o, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "d_model", c->d_model);
    cJSON_AddNumberToObject(o, "d_ff", c->d_ff);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "n_kv_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    cJSON_AddNumberToObject(o, "context_length", c->context_length);
    cJSON_AddNumberToObject(o, "rms_eps", c->rms_eps);
    cJSON_AddNumberToObject(o, "rope_base_global", c->rope_base_global);
    cJSON_AddNumberToObject(o, "rope_base_local", c->rope_base_local);
    cJSON_AddNumberToObject(o, "rope_scale_global", c->rope_scale_global);
    cJSON_AddNumberToObject(o, "rope_scale_local", c->rope_scale_local);
    cJSON_AddNumberToObject(o, "query_scale", c->query_scale);
    cJSON_AddNumberToObject(o, "embed_scale", c->embed_scale);
    cJSON_AddNumberToObject(o, "attn_softcap", c->attn_softcap);
    cJSON_AddNumberToObject(o, "final_softcap", c->final_softcap);
    cJSON_AddBoolToObject(o, "norms_add_one", c->norms_add_one);
    cJSON *g = cJSON_AddArrayToObject(o, "global_layers");
    for (int i = 0; i < c->n_layers; i++)
        if (c->layer_is_global[i]) cJSON_AddItemToArray(g, cJSON_CreateNumber(i));
    return o;
}

int cmd_info(int argc, char **argv) {
    const char *model = NULL;
    bool json = false, check = false;
    long devices = 1;
    gm_sharding rule = GM_SHARDING_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(HELP, stdout);
            return 0;
        } else if (cli_flag_value(argc, argv, &i, "--model", "-m", &v)) {
            if (!v) return cli_usage_error("info", "%s needs a value", argv[i]);
            model = v;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--check")) {
            check = true;
        } else if (cli_flag_value(argc, argv, &i, "--devices", NULL, &v)) {
            if (!cli_parse_int(v, 1, 256, &devices)) return cli_usage_error("info", "--devices wants an integer 1..256");
        } else if (cli_flag_value(argc, argv, &i, "--sharding", NULL, &v)) {
            if (!v || gm_sharding_parse(v, &rule) != GM_OK) return cli_usage_error("info", "--sharding wants fsdp, tp or replicated");
        } else {
            return cli_usage_error("info", "unknown argument '%s'", argv[i]);
        }
    }
    if (!model) return cli_usage_error("info", "no model given (-m PATH)");
    gm_source *src;
    if (gm_source_open(model, &src) != GM_OK) return cli_error("info", "%s", gm_last_error());
    if (check) return check_weights(model, src);
    const gm_config *c = gm_source_config(src);
    size_t n = gm_source_tensor_count(src);
    uint64_t total_bytes = 0, total_params = 0;
    for (size_t i = 0; i < n; i++) {
        const gm_tensor_info *t = gm_source_tensor_at(src, i);
        total_bytes += t->nbytes;
        total_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    const int special[][2] = {{c->bos_id, 0}, {c->eos_id, 0}, {c->pad_id, 0}, {c->unk_id, 0},
                              {c->start_of_turn_id, 0}, {c->end_of_turn_id, 0}};
    const char *special_names[] = {"bos", "eos", "pad", "unk", "start_of_turn", "end_of_turn"};
    int nd = (int)devices;
    gm_sharding resolved = rule == GM_SHARDING_AUTO ? (nd > 1 ? GM_SHARDING_FSDP : GM_SHARDING_REPLICATED) : rule;
    uint64_t per_device[256] = {0};
    gm_tensor_plan *plans = calloc(n ? n : 1, sizeof *plans);
    if (!plans) {
        gm_source_close(src);
        return cli_error("info", "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const gm_tensor_info *t = gm_source_tensor_at(src, i);
        for (int d = 0; d < nd; d++) {
            uint64_t b;
            if (gm_plan_slice_bytes(c, t, resolved, nd, d, &plans[i], &b) != GM_OK) {
                free(plans);
                gm_source_close(src);
                return cli_error("info", "%s", gm_last_error());
            }
            per_device[d] += b;
        }
    }
    gm_tokenizer *tok = NULL;
    if (gm_tokenizer_load(model, &tok) != GM_OK) tok = NULL; /* info still works without a tokenizer */

    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "path", model);
        cJSON_AddStringToObject(root, "format", gm_source_format(src));
        cJSON_AddItemToObject(root, "config", config_json(c));
        cJSON *sp = cJSON_AddObjectToObject(root, "special_tokens");
        for (size_t i = 0; i < 6; i++) {
            cJSON *o = cJSON_AddObjectToObject(sp, special_names[i]);
            cJSON_AddNumberToObject(o, "id", special[i][0]);
            const char *piece = tok ? gm_tokenizer_piece(tok, special[i][0]) : NULL;
            if (piece) cJSON_AddStringToObject(o, "piece", piece);
        }
        cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
        for (size_t i = 0; i < n; i++) {
            const gm_tensor_info *t = gm_source_tensor_at(src, i);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", t->name);
            cJSON_AddStringToObject(o, "type", gm_dtype_get(t->type)->name);
            cJSON *sh = cJSON_AddArrayToObject(o, "shape");
            for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
            cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
            cJSON *pl = cJSON_AddObjectToObject(o, "sharding");
            cJSON_AddStringToObject(pl, "split", plans[i].split == GM_SPLIT_NONE ? "replicated"
                                                 : plans[i].split == GM_SPLIT_ROWS ? "rows" : "cols");
            if (plans[i].jax_axis[0]) cJSON_AddStringToObject(pl, "axis", plans[i].jax_axis);
            cJSON_AddStringToObject(pl, "note", plans[i].reason);
            cJSON_AddItemToArray(ts, o);
        }
        cJSON *tot = cJSON_AddObjectToObject(root, "totals");
        cJSON_AddNumberToObject(tot, "tensors", (double)n);
        cJSON_AddNumberToObject(tot, "parameters", (double)total_params);
        cJSON_AddNumberToObject(tot, "bytes", (double)total_bytes);
        cJSON *sh = cJSON_AddObjectToObject(root, "sharding");
        cJSON_AddStringToObject(sh, "rule", gm_sharding_name(resolved));
        cJSON_AddNumberToObject(sh, "devices", nd);
        cJSON *bpd = cJSON_AddArrayToObject(sh, "bytes_per_device");
        for (int d = 0; d < nd; d++) cJSON_AddItemToArray(bpd, cJSON_CreateNumber((double)per_device[d]));
        char *text = cJSON_Print(root);
        puts(text);
        free(text);
        cJSON_Delete(root);
    } else {
        printf("model      %s (%s)\n", model, gm_source_format(src));
        printf("arch       %s %s\n", c->architecture, gm_config_size_label(c));
        printf("layers     %d (global: ", c->n_layers);
        for (int i = 0, first = 1; i < c->n_layers; i++)
            if (c->layer_is_global[i]) printf(first ? "%d" : ",%d", i), first = 0;
        printf(")\n");
        printf("d_model    %d\nd_ff       %d\nheads      %d (kv heads %d, head_dim %d)\n", c->d_model, c->d_ff,
               c->n_heads, c->n_kv_heads, c->head_dim);
        printf("vocab      %d\nwindow     %d\ncontext    %d\n", c->vocab_size, c->sliding_window, c->context_length);
        printf("rope       global base %g scale %g, local base %g scale %g\n", c->rope_base_global,
               c->rope_scale_global, c->rope_base_local, c->rope_scale_local);
        printf("q scale    %.6g\nemb scale  %.6g\nrms eps    %g\nsoftcaps   attn %g final %g\n", c->query_scale,
               c->embed_scale, c->rms_eps, c->attn_softcap, c->final_softcap);
        printf("norms      %s\n", c->norms_add_one ? "stored as w, applied as (1 + w)" : "stored as (1 + w)");
        printf("special   ");
        for (size_t i = 0; i < 6; i++) {
            const char *piece = tok ? gm_tokenizer_piece(tok, special[i][0]) : NULL;
            printf(" %s=%d%s%s%s", special_names[i], special[i][0], piece ? " '" : "", piece ? piece : "",
                   piece ? "'" : "");
        }
        printf("\n\nsharding   %s over %d device%s\n", gm_sharding_name(resolved), nd, nd > 1 ? "s" : "");
        printf("\n%-36s %-5s %-16s %12s  %s\n", "tensor", "type", "shape", "bytes", "placement");
        for (size_t i = 0; i < n; i++) {
            const gm_tensor_info *t = gm_source_tensor_at(src, i);
            char shape[96];
            shape_str(t, shape, sizeof shape);
            printf("%-36s %-5s %-16s %12llu  %s\n", t->name, gm_dtype_get(t->type)->name, shape,
                   (unsigned long long)t->nbytes, plans[i].reason);
        }
        printf("\ntotal      %zu tensors, %llu parameters, %llu bytes (%.1f MiB)\n", n,
               (unsigned long long)total_params, (unsigned long long)total_bytes, total_bytes / 1048576.0);
        for (int d = 0; d < nd; d++)
            printf("device %-3d %llu bytes of weights (%.1f MiB, %.1f%% of the model)\n", d,
                   (unsigned long long)per_device[d], per_device[d] / 1048576.0, 100.0 * per_device[d] / (double)total_bytes);
    }
    free(plans);
    gm_tokenizer_free(tok);
    gm_source_close(src);
    return 0;
}
