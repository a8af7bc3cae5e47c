#!/usr/bin/env bash
# --precision fast on BF16 weights needs AVX512_BF16 (vdpbf16ps); Ice Lake and Cascade Lake have the
# AVX-512 VNNI kernels without it. On such a CPU (simulated with GM_NO_BF16=1) fast BF16 products must
# stay exact instead of faulting: the logits of a 16-token prompt (the batched products) on the random
# 1B-shaped BF16 model equal the exact ones byte for byte; and where the CPU has BF16 (and no AMX, whose
# matmuls stay exact), fast mode must really use it (logits differ from exact, within the fast mode's
# reference tolerance). The KV cache stays f32 throughout (fast mode's default f16 cache would move the
# logits on its own): only the products are compared.
set -u
PY=${GM_PYTHON:-python3}
"$PY" -c "import numpy, gguf" 2>/dev/null || { echo "$PY lacks numpy/gguf (scripts/setup.sh installs them)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$PY" "$GM_SOURCE/tests/reference/make_random_gguf.py" --shape 1b --dtype bf16 --out "$T/m.gguf" > "$T/gen.log" 2>&1 \
  || { echo "FAIL: make_random_gguf.py (sha256 or write)"; cat "$T/gen.log"; exit 1; }
pass=0 fail=0
check() { if [ "$2" = ok ]; then pass=$((pass+1)); echo "ok   $1"; else fail=$((fail+1)); echo "FAIL $1"; fi; }
ids=2,17,300,5,811,64,99,1000,3,450,12,700,21,5,640,128
logits() { # NAME PRECISION [VAR=VALUE...]: the logits of <ids> into $T/NAME.bin
  local name=$1 precision=$2; shift 2
  env "$@" "$GM_CLI" logits -m "$T/m.gguf" --tokens $ids --top 1 --precision "$precision" --kv-cache f32 \
    --dump-logits "$T/$name.bin" > "$T/$name.log" 2>&1 \
    || { echo "FAIL: gemma logits ($name: $*)"; cat "$T/$name.log"; fail=$((fail+1)); }
}
logits exact exact
logits fast fast
logits nobf16_fast fast GM_NO_BF16=1
logits nobf16_exact exact GM_NO_BF16=1
same() { cmp -s "$T/$1.bin" "$T/$2.bin" && [ -s "$T/$1.bin" ] && echo ok || echo no; }
check "no AVX512_BF16: fast BF16 products stay exact (logits identical)" "$(same nobf16_fast nobf16_exact)"
# (AMX matmuls stay exact in fast mode, so the next check needs AVX-512 BF16 without AMX)
if grep -qw avx512_bf16 /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo && [ "${GM_KERNELS:-}" = "" ]; then
  # fast differs from exact, by no more than 5e-2 of the largest logit (inside fast mode's reference bound)
  verdict=$("$PY" - "$T/exact.bin" "$T/fast.bin" <<'EOF'
import sys, numpy as np
a, b = (np.fromfile(p, dtype="<f4") for p in sys.argv[1:3])
d = float(np.max(np.abs(a - b))) / float(np.max(np.abs(a)))
print("ok" if a.shape == b.shape and 0 < d < 5e-2 else "no", file=sys.stdout)
print(f"fast vs exact: max |diff| / max |logit| = {d:.3g}", file=sys.stderr)
EOF
)
  check "AVX512_BF16: fast uses bf16 inputs (logits differ from exact, within 5e-2)" "$verdict"
else
  echo "skip the fast-differs check: this CPU lacks AVX512_BF16, or has AMX"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
