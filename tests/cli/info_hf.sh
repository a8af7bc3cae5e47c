#!/usr/bin/env bash
# `gemma info` on Hugging Face folders: the tiny transformers checkpoints in tests/fixtures, checked against
# the expectations the generator wrote (hf_tiny_expected.json), and clear errors for broken folders.
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

for d in hf_tiny hf_tiny_mm_sharded hf_tiny_mm_v4; do
  out=$("$CLI" info -m "$FIX/$d" 2>&1) && ok "$d: exit 0" || bad "$d: exit $?: $out"
  grep -q "(safetensors)" <<<"$out" && ok "$d: format" || bad "$d: format not reported"
  grep -q "stored as w, applied as (1 + w)" <<<"$out" && ok "$d: norms" || bad "$d: norms line"
  grep -q "^blk.1.ffn_down.weight" <<<"$out" && ok "$d: GGUF names" || bad "$d: no blk.1.ffn_down.weight"
  grep -q "vision\|lm_head\|language_model" <<<"$out" && bad "$d: HF or vision names leaked" || ok "$d: only text tensors"

  # --json against the generator's expectations (python3 only to compare JSON; skipped where absent)
  if command -v python3 >/dev/null; then
    "$CLI" info -m "$FIX/$d" --json >"${TMPDIR:-/tmp}/gm_info_hf.json" 2>&1 || bad "$d: --json exit $?"
    python3 - "$FIX/hf_tiny_expected.json" "$d" "${TMPDIR:-/tmp}/gm_info_hf.json" <<'PY' && ok "$d: --json matches" || bad "$d: --json differs"
import json, sys
exp = json.load(open(sys.argv[1]))[sys.argv[2]]
got = json.load(open(sys.argv[3]))
c, e = got["config"], exp["config"]
for k in ("n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "sliding_window",
          "context_length"):
    assert c[k] == e[k], (k, c[k], e[k])
for k in ("rope_base_global", "rope_base_local", "rope_scale_global", "query_scale", "embed_scale"):
    assert abs(c[k] - e[k]) <= 1e-6 * abs(e[k]), (k, c[k], e[k])
assert c["global_layers"] == e["global_layers"], c["global_layers"]
assert c["norms_add_one"] is True
assert got["format"] == "safetensors"
names = {t["name"]: t for t in got["tensors"]}
assert set(names) == {t["name"] for t in exp["tensors"]}, set(names) ^ {t["name"] for t in exp["tensors"]}
for t in exp["tensors"]:
    assert names[t["name"]]["shape"] == t["ne"] and names[t["name"]]["type"] == t["type"], t
PY
  fi
done

# broken folders: non-zero exit, one clear line on stderr, nothing on stdout
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty" "$tmp/llama"
printf '{"model_type": "llama", "hidden_size": 64}' >"$tmp/llama/config.json"
ln -s "$(cd "$FIX/hf_tiny" && pwd)/model.safetensors" "$tmp/llama/model.safetensors"
for case in "empty:config.json" "llama:llama"; do
  dir=${case%%:*} needle=${case#*:}
  out=$("$CLI" info -m "$tmp/$dir" 2>"$tmp/err"); rc=$?
  [ $rc -ne 0 ] && ok "$dir: exit $rc" || bad "$dir: exit 0"
  [ -z "$out" ] && ok "$dir: no stdout" || bad "$dir: stdout: $out"
  grep -q "$needle" "$tmp/err" && ok "$dir: message names $needle" || bad "$dir: message: $(cat "$tmp/err")"
done
exit $fail
