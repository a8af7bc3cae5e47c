#!/usr/bin/env bash
# Out of memory on load: under `ulimit -v` the commands fail with exit 1 and one clear message that says
# "out of memory" and how many bytes the load needs (weights of the real model; the KV cache of the tiny
# one at a huge --cache-length), never a crash. Skipped under AddressSanitizer (its shadow memory needs
# terabytes of address space, so ulimit -v cannot apply).
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
[ "${GM_SANITIZED:-0}" = 1 ] && { echo "sanitizer build: ulimit -v does not apply; skipped"; exit 77; }
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME NEEDLE-REGEX -- command...: exit 1, stderr matches, no signal
expect_oom() {
  local name=$1 needle=$2
  shift 2
  # one malloc arena: glibc reserves 64 MiB of address space per thread arena, which under ulimit -v makes
  # *which* allocation fails first depend on thread timing
  (ulimit -v 100000; MALLOC_ARENA_MAX=1 "$@") >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 1 ] && ok "$name: exit 1" || bad "$name: exit $rc: $(head -c 600 "$tmp/err")"
  grep -Eq "$needle" "$tmp/err" && ok "$name: message" || bad "$name: message: $(head -c 600 "$tmp/err")"
  [ "$(grep -c . "$tmp/err")" -eq 1 ] && ok "$name: one line" || bad "$name: $(grep -c . "$tmp/err") lines on stderr"
}

# the tiny model's KV cache at 2^20 positions: its global layer alone needs 128 MiB
expect_oom "KV cache" "out of memory: cannot allocate the KV cache .*[0-9]+ bytes .* for all 2 layers at --cache-length 1048576\): lower --cache-length" \
  "$CLI" generate -m "$FIX/hf_tiny_chat" --cache-length 1048576 -n 2 hello
if [ -n "${GM_TEST_MODEL:-}" ] && [ -f "$GM_TEST_MODEL" ]; then
  # the real 270M model: 235 MiB of weights (the sum of tensor sizes the gguf package lists) in 100 MB of address space
  expect_oom "weights" "out of memory: .*cannot allocate [0-9]+ bytes for '[a-z_.0-9]+' \(device 0\); device 0 needs 246587904 bytes \(235\.2 MiB\) of weights in all" \
    "$CLI" generate -m "$GM_TEST_MODEL" -n 2 hello
  # with room to spare it works
  (ulimit -v 1200000; "$CLI" generate -m "$GM_TEST_MODEL" -n 2 hello >/dev/null 2>"$tmp/err") && ok "weights fit in 1.2 GB" \
    || bad "1.2 GB: $(cat "$tmp/err")"
fi
exit $fail
