#!/usr/bin/env bash
# `gemma train` end to end on the tiny model with a tokenizer (tests/fixtures/hf_train_tok):
#   --json lines (eval at step 0 and at the end, one line per step), malformed lines reported with their
#   line numbers and skipped, --strict refusing them, truncation counted, memory printed per device, a
#   loss plot (PNG), a checkpoint folder that `gemma generate` loads, --resume on another device count continuing the step count,
#   an --out that cannot be a folder, and a NaN loss stopping with its step number and saving nothing.
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

{
  for i in 1 2 3 4 5 6 7 8; do
    echo "{\"prompt\": \"<h1>item $i</h1>\", \"response\": \"the answer is $i\"}"
  done
  echo 'not json at all'
  echo "{\"prompt\": \"$(printf 'long %.0s' $(seq 1 40))\", \"response\": \"x\"}"
  echo '{"text": "hello world, a plain text example"}'
  echo '{"prompt": "no response"}'
} >"$T/train.jsonl"
printf '%s\n' '{"prompt": "<h1>item 9</h1>", "response": "the answer is 9"}' \
  '{"prompt": "<h1>item 10</h1>", "response": "the answer is 10"}' >"$T/eval.jsonl"

run() { "$CLI" train -m "$FIX/hf_train_tok" --data "$T/train.jsonl" --eval "$T/eval.jsonl" --batch 4 --seq-len 24 \
  --lr 1e-2 "$@"; }

# ---- a run: 2 devices, JSON, checkpoint every 3 steps ----
run --devices 2 --steps 6 --json --out "$T/ck" --save-every 3 --plot "$T/curve.png" >"$T/out.json" 2>"$T/err.txt"
rc=$?
[ $rc -eq 0 ] && ok "train exits 0" || { bad "train exit $rc"; cat "$T/err.txt"; }
[ "$(grep -c '"eval_loss"' "$T/out.json")" -eq 2 ] && ok "eval at step 0 and at the end" || bad "eval lines: $(cat "$T/out.json")"
grep -q '^{"step":0,"eval_loss":' "$T/out.json" && ok "step 0 eval line" || bad "no step 0 eval"
[ "$(grep -c '"tok_s"' "$T/out.json")" -eq 6 ] && ok "one JSON line per step" || bad "step lines"
grep -q '^{"step":6,"loss":[0-9.]*,"tok_s":[0-9.]*}$' "$T/out.json" && ok "step line format" || bad "step 6 line"
grep -q 'train.jsonl:9: not valid JSON' "$T/err.txt" && ok "malformed line 9 reported" || bad "line 9 not reported"
grep -q 'train.jsonl:12: has "prompt" but no "response"' "$T/err.txt" && ok "line 12 reported" || bad "line 12 not reported"
grep -q '2 malformed skipped, 1 truncated to 24 tokens' "$T/err.txt" && ok "summary counts" || bad "summary: $(grep '^data' "$T/err.txt")"
[ "$(grep -c 'memory after the first step, device' "$T/err.txt")" -eq 2 ] && ok "memory per device" || bad "memory lines"
[ "$(head -c 4 "$T/curve.png" | od -An -tx1 | tr -d ' ')" = "89504e47" ] && ok "--plot wrote a PNG" || bad "--plot"
if command -v python3 >/dev/null; then
  python3 - "$T/out.json" <<'PY' && ok "JSON lines parse, losses finite" || bad "JSON lines"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r]
assert [r["step"] for r in steps] == list(range(1, 7))
assert all(math.isfinite(r["loss"]) and r["tok_s"] > 0 for r in steps)
PY
fi
for f in config.json model.safetensors tokenizer.json optimizer.safetensors trainer_state.json; do
  [ -s "$T/ck/$f" ] || bad "checkpoint lacks $f"
done
ls "$T/ck" | grep -q '\.tmp$' && bad "temporary files left" || ok "checkpoint complete, no temporaries"
grep -q '"step":	6' "$T/ck/trainer_state.json" && ok "state at step 6" || bad "trainer_state: $(cat "$T/ck/trainer_state.json")"
"$CLI" generate -m "$T/ck" --max-new-tokens 4 "<h1>item 3</h1>" >"$T/gen.txt" 2>&1 && ok "generate loads the checkpoint" ||
  bad "generate -m checkpoint: $(cat "$T/gen.txt")"

# ---- resume on 1 device up to step 8 ----
run --steps 8 --resume "$T/ck" --json --quiet >"$T/res.json" 2>"$T/res.err"
[ $? -eq 0 ] && ok "resume exits 0" || { bad "resume failed"; cat "$T/res.err"; }
[ "$(grep '"loss"' "$T/res.json" | sed 's/,"loss.*//')" = "$(printf '{"step":7\n{"step":8')" ] && ok "resumed at step 7" ||
  bad "resumed steps: $(cat "$T/res.json")"

# ---- strict refuses the malformed line ----
run --steps 1 --strict >"$T/s.out" 2>&1 && bad "--strict accepted malformed data" || {
  grep -q 'train.jsonl:9: not valid JSON.*strict' "$T/s.out" && ok "--strict names line 9" || bad "strict: $(cat "$T/s.out")"
}

# ---- an --out that cannot be a folder ----
touch "$T/afile"
run --steps 1 --out "$T/afile/ck" >"$T/u.out" 2>&1 && bad "unwritable --out accepted" || {
  grep -q "afile/ck" "$T/u.out" && ok "unwritable --out named" || bad "unwritable: $(cat "$T/u.out")"
}

# ---- NaN: a weight set to NaN (bf16 0x7fc0 over the file's last element) stops at step 1, nothing saved ----
mkdir "$T/nan" && cp "$FIX"/hf_train_tok/* "$T/nan/"
size=$(stat -c %s "$T/nan/model.safetensors")
printf '\xc0\x7f' | dd of="$T/nan/model.safetensors" bs=1 seek=$((size - 2)) conv=notrunc status=none
"$CLI" train -m "$T/nan" --data "$T/train.jsonl" --batch 4 --seq-len 24 --steps 3 --out "$T/nanck" >"$T/n.out" 2>&1 &&
  bad "NaN run exited 0" || {
  grep -q 'step 1: the loss is NaN' "$T/n.out" && ok "NaN stops at step 1" || bad "NaN: $(cat "$T/n.out")"
  [ -e "$T/nanck/model.safetensors" ] && bad "a checkpoint was written after NaN" || ok "nothing saved after NaN"
}

exit $fail
