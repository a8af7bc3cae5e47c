#!/usr/bin/env bash
# SIGINT during generation: `gemma generate` (and a chat turn) stops at the next token, keeps what it
# printed, ends the line, says "interrupted" on stderr and exits 130; Ctrl-C at the chat prompt exits 130
# too. (A process killed by the signal would also show 130, hence the checks on the output: and bash runs
# background jobs with SIGINT ignored, so without the handler the command would not stop at all.) Uses the tiny model with
# a generation that would run for minutes (a million tokens).
set -u
CLI=${GM_CLI:?GM_CLI must name the gemma binary}
FIX=${GM_FIXTURES:-$(dirname "$0")/../fixtures}
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT

# wait_output FILE: until FILE has at least 20 bytes (max 60 s)
wait_output() {
  for _ in $(seq 600); do
    [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -ge 20 ] && return 0
    sleep 0.1
  done
  return 1
}

# interrupt NAME -- command...: start, wait for output, SIGINT, expect exit 130 within 10 s
interrupt() {
  local name=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  wait_output "$tmp/out" && ok "$name: generating" || bad "$name: no output after 60 s: $(cat "$tmp/err")"
  kill -INT $pid
  local t0=$SECONDS rc
  for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $pid 2>/dev/null; then
    bad "$name: still running 10 s after SIGINT"
    kill -9 $pid
  fi
  wait $pid
  rc=$?
  pid=
  [ $rc -eq 130 ] && ok "$name: exit 130" || bad "$name: exit $rc: $(tail -c 600 "$tmp/err")"
  [ $((SECONDS - t0)) -le 10 ] && ok "$name: stopped in $((SECONDS - t0)) s" || bad "$name: took $((SECONDS - t0)) s"
  [ "$(stat -c %s "$tmp/out")" -ge 20 ] && ok "$name: kept its output" || bad "$name: output lost"
  [ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" = '\n' ] && ok "$name: line ended" || bad "$name: no final newline"
  grep -Eq "^gemma [a-z]+: interrupted after [0-9]+ tokens$" "$tmp/err" && ok "$name: says interrupted" \
    || bad "$name: stderr: $(tail -c 600 "$tmp/err")"
  grep -q "ERROR: \|runtime error" "$tmp/err" && bad "$name: sanitizer report: $(head -c 600 "$tmp/err")" || true
}

interrupt "generate" "$CLI" generate -m "$FIX/hf_tiny_chat" --cache-length 1048576 -n 1000000 Tell me a long story
interrupt "generate --raw" "$CLI" generate -m "$FIX/hf_tiny_chat" --cache-length 1048576 -n 1000000 --raw Once upon
# chat reading standard input from a FIFO this script keeps open: one turn interrupted mid-answer, then
# Ctrl-C at the prompt with no turn running; both exit 130
mkfifo "$tmp/in"
for case in turn prompt; do
  "$CLI" chat -m "$FIX/hf_tiny_chat" --cache-length 1048576 -n 1000000 <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  exec 9>"$tmp/in"
  if [ $case = turn ]; then
    echo "Tell me a long story" >&9
    wait_output "$tmp/out" && ok "chat $case: generating" || bad "chat $case: no output: $(cat "$tmp/err")"
  else
    sleep 1
  fi
  kill -INT $pid
  for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { bad "chat $case: still running 10 s after SIGINT"; kill -9 $pid; }
  wait $pid
  rc=$?
  pid=
  exec 9>&-
  [ $rc -eq 130 ] && ok "chat $case: exit 130" || bad "chat $case: exit $rc: $(tail -c 600 "$tmp/err")"
  grep -q "^gemma chat: interrupted" "$tmp/err" && ok "chat $case: says interrupted" || bad "chat $case: $(cat "$tmp/err")"
done
exit $fail
