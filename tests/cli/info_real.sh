#!/usr/bin/env bash
# `gemma info` on the real 270M: the config values, the tensor directory (name, type, shape, bytes) and
# the totals agree with what the gguf package read from the same file
# (tests/fixtures/gguf/gemma3_270m_q4_k_m.txt, tests/reference/gen_gguf_fixture.py); the plan over 2
# devices splits the embedding by vocabulary and gate/up by F, like the seed's FSDPSharding.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$GM_CLI" info -m "$GM_TEST_MODEL" --json --devices 2 > "$T/info.json" || exit 1
"$GM_CLI" info -m "$GM_TEST_MODEL" --devices 2 > "$T/info.txt" || exit 1
python3 - "$T/info.json" "$GM_FIXTURES/gguf/gemma3_270m_q4_k_m.txt" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
kv, tensors = {}, {}
for line in open(sys.argv[2]):
    f = line.split()
    if f[0] == "kv": kv[f[1]] = f[3]
    elif f[0] == "tensor": tensors[f[1]] = f
passed = failed = 0
def check(ok, what):
    global passed, failed
    if ok: passed += 1
    else: failed += 1; print("FAIL:", what)
c = info["config"]
check(c["n_layers"] == int(kv["gemma3.block_count"]), "layers")
check(c["d_model"] == int(kv["gemma3.embedding_length"]), "d_model")
check(c["d_ff"] == int(kv["gemma3.feed_forward_length"]), "d_ff")
check(c["n_heads"] == int(kv["gemma3.attention.head_count"]), "heads")
check(c["n_kv_heads"] == int(kv["gemma3.attention.head_count_kv"]), "kv heads")
check(c["head_dim"] == int(kv["gemma3.attention.key_length"]), "head_dim")
check(c["sliding_window"] == int(kv["gemma3.attention.sliding_window"]), "window")
check(c["rope_base_global"] == float(kv["gemma3.rope.freq_base"]), "rope base")
check(c["global_layers"] == [5, 11, 17], "every 6th layer global")
check(abs(c["query_scale"] - 256 ** -0.5) < 1e-7, "query scale")
check(c["vocab_size"] == 262144, "vocab")
check(info["special_tokens"]["bos"]["id"] == int(kv["tokenizer.ggml.bos_token_id"]), "bos")
check(len(info["tensors"]) == len(tensors), "tensor count")
for t in info["tensors"]:
    ref = tensors.get(t["name"])
    check(ref is not None, "tensor %s present in the gguf package's list" % t["name"])
    if ref is None: continue
    # fixture: tensor NAME GGML_TYPE NDIMS NE0 NE1 NE2 NE3 OFFSET NBYTES (as gguf.GGUFReader reports them)
    check(t["bytes"] == int(ref[-1]), "bytes of %s" % t["name"])
    ne = [int(x) for x in ref[4:4 + int(ref[3])]]
    check(t["shape"] == ne, "shape of %s: %s vs %s" % (t["name"], t["shape"], ne))
    names = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}
    check(t["type"] == names.get(int(ref[2])), "type of %s" % t["name"])
check(info["totals"]["bytes"] == sum(t["bytes"] for t in info["tensors"]), "totals")
split = {t["name"]: t["sharding"] for t in info["tensors"]}
check(split["token_embd.weight"].get("axis") == "V", "embedding split on V")
check(split["blk.0.ffn_gate.weight"].get("axis") == "F", "gate split on F")
check(split["blk.0.attn_q.weight"]["split"] == "replicated", "q replicated (<= 4 MiB)")
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
