#!/usr/bin/env python3
"""Exact-match accuracy of a model on the date task's held-out prompts (data/dates/test.jsonl), greedy.

usage: scripts/eval_dates.py GEMMA_BINARY MODEL [test.jsonl]
Runs `gemma chat -m MODEL` with one prompt per line (each its own conversation, answers cut at the first
newline) and prints each prompt, the answer and the accuracy; --json prints {"correct", "total", "accuracy"}.
"""
import json
import os
import subprocess
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) < 2:
        sys.exit(__doc__)
    gemma, model = args[0], args[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = args[2] if len(args) > 2 else os.path.join(root, "data", "dates", "test.jsonl")
    cases = [json.loads(line) for line in open(path) if line.strip()]
    stdin = "".join(c["prompt"] + "\n" for c in cases)
    out = subprocess.run([gemma, "chat", "-m", model, "--max-new-tokens", "24", "--stop", "\n", "--threads", "2"],
                         input=stdin, capture_output=True, text=True, check=True).stdout
    answers = out.split("\n")[:len(cases)]
    correct = 0
    for c, a in zip(cases, answers):
        ok = a.strip() == c["response"]
        correct += ok
        if "--json" not in sys.argv:
            print(f"{'ok ' if ok else 'BAD'} {c['prompt'].split(': ', 1)[1]:<22} -> {a.strip()!r}")
    result = dict(correct=correct, total=len(cases), accuracy=correct / len(cases))
    print(json.dumps(result) if "--json" in sys.argv else f"accuracy {correct}/{len(cases)}")


if __name__ == "__main__":
    main()
