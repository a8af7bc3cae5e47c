#!/usr/bin/env python3
"""HF `tokenizers` throughput on the same text as bench/bench_tokenizer.c (the fixture corpus joined with '\n',
repeated to --mb MiB), one thread. Usage: python bench/bench_tokenizer_hf.py [--mb 8] [--tokenizer PATH.json[.gz]]"""
import argparse
import gzip
import json
import os
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(ROOT), "shared", "data", "gemma3-tokenizer.json.gz"))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures"))
    a = ap.parse_args()
    path = a.tokenizer if os.path.exists(a.tokenizer) else "/work/shared/data/gemma3-tokenizer.json.gz"
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    t0 = time.perf_counter()
    tok = Tokenizer.from_str(raw.decode())
    t_load = time.perf_counter() - t0
    texts = []
    with open(os.path.join(a.fixtures, "tokenizer_parity.jsonl"), encoding="utf-8") as f:
        next(f)
        for line in f:
            r = json.loads(line)
            if "text" in r and not r.get("no_gguf"):  # <image_soft_token> is not in the GGUF
                texts.append(r["text"])
    unit = "\n".join(texts).encode()
    want = int(a.mb * 1048576)
    buf = bytearray()
    while len(buf) < want:
        if buf:
            buf += b"\n"
        buf += unit
    text = buf.decode()
    best, n = 1e30, 0
    for _ in range(a.reps):
        t0 = time.perf_counter()
        n = len(tok.encode(text, add_special_tokens=False).ids)
        best = min(best, time.perf_counter() - t0)
    print(f"HF tokenizers: load {t_load:.3f} s; text {len(buf)} bytes -> {n} tokens; best of {a.reps}: {best:.3f} s = "
          f"{n / best / 1e6:.2f} M tokens/s, {len(buf) / best / 1e6:.1f} MB/s")


if __name__ == "__main__":
    main()
