#!/usr/bin/env bash
# A prefill whose attention span passes GM_ATTN_WIDE_SPAN (16384 positions): a kernel call then holds fewer
# rows, so that rows x positions fit the scores' scratch (src/model/device.c, attn_chunk). The tiny model's
# next-token logits after 17500 tokens must be the very same bits whether the scratch forces that split
# (--cache-length 17600: 32 rows x 17500 positions pass it) or holds every call whole (--cache-length
# 140000: 4 x 140000 floats per thread): each row's result does not depend on the rows beside it
# (kernels/ops.h). A split that dropped or misplaced rows changes them; writing past the scratch corrupts
# the other thread's scores or, under AddressSanitizer, stops the run.
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# 17500 token ids of the tiny vocabulary (512 pieces), fixed by the seed
ids=$(awk 'BEGIN { srand(5); for (i = 0; i < 17500; i++) printf "%s%d", (i ? "," : ""), 3 + int(rand() * 500) }')
pass=0 fail=0
for cl in 17600 140000; do
  if "$CLI" logits -m "$FIX/hf_tiny" --threads 2 --cache-length $cl --tokens "$ids" --dump-logits "$T/$cl.bin" \
       --top 1 > "$T/$cl.log" 2>&1; then
    pass=$((pass+1))
  else
    fail=$((fail+1)); echo "FAIL: logits --cache-length $cl"; cat "$T/$cl.log"
  fi
done
if [ -s "$T/17600.bin" ] && cmp -s "$T/17600.bin" "$T/140000.bin"; then
  pass=$((pass+1)); echo "ok   the split calls give the same bits as whole ones"
else
  fail=$((fail+1)); echo "FAIL: the logits differ between --cache-length 17600 and 140000"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
