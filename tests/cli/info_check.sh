#!/usr/bin/env bash
# gemma info --check: clean models pass (exit 0); a copy of a Hugging Face folder with one NaN / +inf
# planted at a chosen element (located by parsing the safetensors header with Python's json, not by our
# reader) fails with exit 1 naming the tensor (GGUF name) and the element index.
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
command -v python3 >/dev/null || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for d in hf_tiny hf_tiny_mm_sharded; do
  out=$("$CLI" info -m "$FIX/$d" --check 2>&1) && ok "$d clean: exit 0" || bad "$d clean: exit $?: $out"
  grep -q "all finite" <<<"$out" && ok "$d clean: says all finite" || bad "$d clean: $out"
done
if [ -n "${GM_TEST_MODEL:-}" ] && [ -f "$GM_TEST_MODEL" ]; then
  out=$("$CLI" info -m "$GM_TEST_MODEL" --check 2>&1) && ok "real GGUF clean: exit 0" || bad "real GGUF: exit $?: $out"
fi

# poke FILE TENSOR INDEX VALUE: overwrite one element (bf16 or f32) of a tensor in a safetensors file
poke() {
  python3 - "$@" <<'PY'
import json, struct, sys
path, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    t = hdr[name]
    size = {"BF16": 2, "F16": 2, "F32": 4}[t["dtype"]]
    raw = {"BF16": {"nan": b"\xc0\x7f", "inf": b"\x80\x7f", "-inf": b"\x80\xff"},
           "F32": {"nan": b"\x00\x00\xc0\x7f", "inf": b"\x00\x00\x80\x7f", "-inf": b"\x00\x00\x80\xff"}}[t["dtype"]][value]
    f.seek(8 + n + t["data_offsets"][0] + index * size)
    f.write(raw)
PY
}

# hf_tiny (bf16): NaN at element 70 of layer 1's k projection (HF [32, 64]: row 1, column 6)
cp -r "$FIX/hf_tiny" "$tmp/nan"
chmod -R u+w "$tmp/nan"
poke "$tmp/nan/model.safetensors" model.layers.1.self_attn.k_proj.weight 70 nan
out=$("$CLI" info -m "$tmp/nan" --check 2>"$tmp/err"); rc=$?
[ $rc -eq 1 ] && ok "bf16 NaN: exit 1" || bad "bf16 NaN: exit $rc"
grep -q "blk.1.attn_k.weight" "$tmp/err" && ok "bf16 NaN: names the tensor" || bad "bf16 NaN: $(cat "$tmp/err")"
grep -q "NaN at element 70 (row 1, column 6)" "$tmp/err" && ok "bf16 NaN: names the element" || bad "bf16 NaN: $(cat "$tmp/err")"

# two bad values: the first tensor in file order (the embedding comes first) is reported
poke "$tmp/nan/model.safetensors" model.embed_tokens.weight 130 -inf
"$CLI" info -m "$tmp/nan" --check 2>"$tmp/err"; rc=$?
grep -q "token_embd.weight' holds -inf at element 130 (row 2, column 2)" "$tmp/err" && [ $rc -eq 1 ] \
  && ok "first bad tensor reported" || bad "first bad tensor: rc $rc: $(cat "$tmp/err")"

# sharded f32 folder: +inf in the last shard's tensor
cp -r "$FIX/hf_tiny_mm_sharded" "$tmp/inf"
chmod -R u+w "$tmp/inf"
shard=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['weight_map']['language_model.model.norm.weight'])" "$tmp/inf/model.safetensors.index.json")
poke "$tmp/inf/$shard" language_model.model.norm.weight 31 inf
"$CLI" info -m "$tmp/inf" --check 2>"$tmp/err"; rc=$?
grep -q "output_norm.weight' holds +inf at element 31" "$tmp/err" && [ $rc -eq 1 ] \
  && ok "f32 +inf in a shard" || bad "f32 +inf: rc $rc: $(cat "$tmp/err")"
exit $fail
