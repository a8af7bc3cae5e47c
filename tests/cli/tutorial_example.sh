#!/usr/bin/env bash
# examples/tutorial.c runs the seed tutorial's steps end to end on the real 270M over 2 devices: load
# sharded, chat, tokenize 'My name is' with BOS (HF's ids: 2 4754 1463 563), last-position logits, a
# sampled token, a readable PNG.
set -u
[ -f "${GM_TEST_MODEL:-}" ] || { [ "${GM_REQUIRE_MODEL:-0}" = 1 ] && exit 1; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$GM_BUILD/example_tutorial" "$GM_TEST_MODEL" 2 "$T/plot.png" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; exit 1; }
pass=0 fail=0
for want in "1. loaded, sharded (fsdp) over 2 devices" "2. chat:" "3. tokens: 2 4754 1463 563" \
            "4. logits of the last position: 262144" "5. sampled with key(1):" "6. top of the distribution"; do
  if grep -qF "$want" "$T/out.txt"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: missing '$want'"; fi
done
if [ "$(head -c 8 "$T/plot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: no PNG"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
