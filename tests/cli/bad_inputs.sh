#!/usr/bin/env bash
# Bad model paths and bad prompts through the CLI: each fails with a non-zero exit, nothing on stdout and
# one clear message naming the path or the limit, or (invalid UTF-8) works. File-format defects in depth
# are the unit tests' (test_gguf, test_safetensors, test_hf_source) and the fuzzers'.
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
tmp=$(mktemp -d)
trap 'chmod -R u+rwx "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
CHAT=$FIX/hf_tiny_chat

# fails NAME WANT_RC NEEDLE -- command...: exit WANT_RC, empty stdout, stderr contains NEEDLE (grep -E)
fails() {
  local name=$1 want=$2 needle=$3
  shift 3
  "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq "$want" ] && ok "$name: exit $rc" || bad "$name: exit $rc, want $want: $(head -c 400 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok "$name: no stdout" || bad "$name: stdout: $(head -c 200 "$tmp/out")"
  grep -Eq -- "$needle" "$tmp/err" && ok "$name: message" || bad "$name: message lacks '$needle': $(head -c 400 "$tmp/err")"
}

# ---- model paths
for cmd in info generate chat tokenize logits bench; do
  prompt=hello
  case $cmd in info|tokenize|bench) prompt= ;; esac
  fails "$cmd: missing path" 1 "$tmp/nope.gguf: cannot open.*No such file or directory" \
    "$CLI" $cmd -m "$tmp/nope.gguf" $prompt
done
echo "not a model" >"$tmp/file"
fails "path through a file" 1 "$tmp/file/x: cannot open.*Not a directory" "$CLI" generate -m "$tmp/file/x" hi
fails "text file as model" 1 "$tmp/file: not a GGUF file" "$CLI" generate -m "$tmp/file" hi
: >"$tmp/empty.gguf"
fails "empty file" 1 "$tmp/empty.gguf: truncated at offset 0" "$CLI" info -m "$tmp/empty.gguf"
printf 'GGUF\001\000\000\000' >"$tmp/v1.gguf"
fails "GGUF version 1" 1 "GGUF version 1 \(2 and 3 are supported\)" "$CLI" info -m "$tmp/v1.gguf"
mkdir "$tmp/folder"
fails "folder without config.json" 1 "no config.json in this folder" "$CLI" generate -m "$tmp/folder" hi
echo '{"model_type": "gemma3_text", "hidden_size": ' >"$tmp/folder/config.json"
fails "truncated config.json" 1 "config.json" "$CLI" generate -m "$tmp/folder" hi
# unreadable weights: chmod 000 (as root, run the CLI as nobody: root reads anything)
cp "$FIX/hf_tiny/config.json" "$tmp/folder/config.json"
cp "$FIX/hf_tiny/model.safetensors" "$tmp/folder/"
chmod 000 "$tmp/folder/model.safetensors"
chmod 755 "$tmp" "$tmp/folder"
as_user=()
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} -gt 0 ]; then
  fails "unreadable weights" 1 "model.safetensors: cannot open: Permission denied" \
    "${as_user[@]}" "$CLI" generate -m "$tmp/folder" hi
else
  echo "skip unreadable file: root without setpriv"
fi

# ---- tokenizer and embedding disagree: tokenizer_tiny (962 tokens) next to hf_tiny's 512-row embedding
mkdir "$tmp/mismatch"
cp "$FIX/hf_tiny/config.json" "$FIX/hf_tiny/model.safetensors" "$FIX/tokenizer_tiny/tokenizer.json" "$tmp/mismatch/"
fails "vocabulary > embedding" 1 "the tokenizer has 962 tokens but the embedding has only 512 rows" \
  "$CLI" generate -m "$tmp/mismatch" hi

# ---- prompts
long=$(printf 'word %.0s' $(seq 100))
fails "prompt longer than the cache" 1 "the prompt has [0-9]+ tokens but the cache has room for 16 \(cache length 16\)" \
  "$CLI" generate -m "$CHAT" --cache-length 16 "$long"
fails "raw prompt longer than the cache" 1 "the prompt has [0-9]+ tokens but the cache has room for 16" \
  "$CLI" generate -m "$CHAT" --cache-length 16 --raw "$long"
fails "logits: prompt longer than the cache" 1 "cache" "$CLI" logits -m "$CHAT" --cache-length 16 "$long"
fails "empty prompt" 2 "empty prompt" "$CLI" generate -m "$CHAT" ""
fails "detokenize: id past the vocabulary" 1 "id 962 .*outside the vocabulary \(size 962\)" "$CLI" detokenize -m "$CHAT" 2 962

# a conversation that outgrows the cache: the turn that does not fit is refused, earlier answers stay printed
printf 'first question\nsecond question\n%s\n' "$long" |
  "$CLI" chat -m "$CHAT" --multi-turn --cache-length 64 -n 4 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || [ $rc -eq 3 ] && ok "chat outgrows the cache: exit $rc" || bad "chat outgrows the cache: exit $rc"
grep -Eq "cache" "$tmp/err" && ok "chat outgrows the cache: message" || bad "chat: $(cat "$tmp/err")"
[ "$(grep -c . "$tmp/out")" -ge 1 ] && ok "chat outgrows the cache: earlier answers printed" || bad "chat: no answers"

# invalid UTF-8 in the prompt goes through byte fallback: it works
"$CLI" generate -m "$CHAT" -n 3 $'caf\xe9 \xff\xfe \xed\xa0\x80 end' >"$tmp/out" 2>"$tmp/err" && ok "invalid UTF-8 prompt: exit 0" \
  || bad "invalid UTF-8 prompt: $(cat "$tmp/err")"
printf 'caf\xe9 \xff\xfe' | "$CLI" tokenize -m "$CHAT" >"$tmp/out" 2>"$tmp/err" && [ -s "$tmp/out" ] \
  && ok "invalid UTF-8 tokenizes" || bad "tokenize invalid UTF-8: $(cat "$tmp/err")"
exit $fail
