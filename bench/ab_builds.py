#!/usr/bin/env python3
"""Two or more gemma.c builds (or environment settings) on one file, alternating, one weight cache.

    python3 bench/ab_builds.py MODEL THREADS PROMPT_TOKENS GEN_TOKENS ROUNDS LABEL=SPEC [LABEL=SPEC ...]

SPEC is a comma-separated list of `bin:PATH` (the gemma binary; default build/gemma) and `NAME=VALUE`
environment settings, e.g. `before=bin:/tmp/gemma_before after=bin:build/gemma` or `off=GM_HUGEPAGES=0 on=`.
Each round runs every variant once, in order, as
    BIN bench -m MODEL --threads T --prompt-tokens P --gen-tokens G --weight-cache DIR --json [--gemma-args]
(DIR: --weight-cache, default models/weight-cache; each build writes its own cache file on its first round, so
give the first round up or run one round before). Prints the median and best prefill and decode tok/s of each
variant and its decode figures per round. Runs drift with the host (docs/BENCHMARKS.md, "How the numbers are
taken"): compare variants of one run only. Not a test: it asserts nothing."""
import argparse
import json
import os
import statistics
import subprocess
import sys


def parse_variant(text):
    label, _, spec = text.partition("=")
    if not label:
        sys.exit(f"ab_builds.py: variant '{text}' has no label (LABEL=SPEC)")
    env, binary = dict(os.environ), "build/gemma"
    for item in filter(None, spec.split(",")):
        if item.startswith("bin:"):
            binary = item[4:]
        elif "=" in item:
            name, _, value = item.partition("=")
            env[name] = value
        else:
            sys.exit(f"ab_builds.py: '{item}' in variant '{label}' is neither bin:PATH nor NAME=VALUE")
    return label, binary, env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("threads")
    ap.add_argument("prompt_tokens")
    ap.add_argument("gen_tokens")
    ap.add_argument("rounds", type=int)
    ap.add_argument("variants", nargs="+", metavar="LABEL=SPEC")
    ap.add_argument("--weight-cache", default="models/weight-cache")
    ap.add_argument("--gemma-args", default="", help="more `gemma bench` options for every variant, e.g. "
                                                     "'--precision fast'")
    a = ap.parse_args()
    variants = [parse_variant(v) for v in a.variants]
    results = {label: ([], []) for label, _, _ in variants}
    for _ in range(a.rounds):
        for label, binary, env in variants:
            cmd = [binary, "bench", "-m", a.model, "--threads", a.threads, "--prompt-tokens", a.prompt_tokens,
                   "--gen-tokens", a.gen_tokens, "--weight-cache", a.weight_cache, "--json"] + a.gemma_args.split()
            run = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"ab_builds.py: {' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
            j = json.loads(run.stdout.strip().splitlines()[-1])
            results[label][0].append(j["prefill_tok_s"])
            results[label][1].append(j["decode_tok_s"])
    for label, (pf, dc) in results.items():
        print(f"{label:12s} prefill med {statistics.median(pf):7.1f} best {max(pf):7.1f} | decode med "
              f"{statistics.median(dc):6.2f} best {max(dc):6.2f}  {[round(x, 1) for x in dc]}")


if __name__ == "__main__":
    main()
