#!/usr/bin/env python3
"""One llama.cpp measurement through llama-cpp-python, timed by llama.cpp's own perf counters.

Same workload as `gemma bench`: <bos> + deterministic ordinary token ids (the same ids gemma bench
uses), prefill P tokens in one batch (n_batch = P, n_ubatch = min(P, 512), llama.cpp's default
micro-batch), then G greedy decode steps (argmax of the last logits); --flash-attn 1 turns on llama.cpp's
flash attention (llama-cpp-python leaves it off unless asked; llama.cpp's own tools default to "auto").
Prints one JSON object:
  prefill_tok_s, decode_tok_s    from llama_perf_context (t_p_eval_ms / n_p_eval, t_eval_ms / n_eval)
  load_ms                        Llama(...) construction, wall clock
  ttft_ms                        wall clock from before the load to the first token of a --ttft-tokens
                                 prompt (a second, separate model instance; 0 = skipped)
Run by bench/compare_llamacpp.py with the peer's Python; usable alone:
  python bench/peer_llamacpp.py -m MODEL -t 2 --mmap 0 [--flash-attn 1] -p 512 -n 64
"""
import argparse
import ctypes
import json
import sys
import time

import numpy as np


def prompt_ids(P, V, bos):
    ids, x = [bos], 12345
    for _ in range(1, P):
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        ids.append(300 + (x >> 8) % 20000 % (V - 300 if V > 400 else 1))
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--mmap", type=int, default=0)
    ap.add_argument("-p", "--prompt-tokens", type=int, default=512)
    ap.add_argument("-n", "--gen-tokens", type=int, default=64)
    ap.add_argument("--ttft-tokens", type=int, default=0)
    ap.add_argument("--flash-attn", type=int, choices=(0, 1), default=0)
    a = ap.parse_args()
    import llama_cpp

    def load(n_ctx, n_batch):
        return llama_cpp.Llama(model_path=a.model, n_threads=a.threads, n_threads_batch=a.threads, n_ctx=n_ctx,
                               n_batch=n_batch, n_ubatch=min(n_batch, 512), use_mmap=bool(a.mmap),
                               flash_attn=bool(a.flash_attn), logits_all=False, verbose=False)

    out = {"threads": a.threads, "mmap": a.mmap, "flash_attn": a.flash_attn}
    if a.ttft_tokens > 0:
        t0 = time.perf_counter()
        llm = load(max(256, a.ttft_tokens + 8), max(32, a.ttft_tokens))
        ids = prompt_ids(a.ttft_tokens, llm.n_vocab(), llm.token_bos())
        llm.eval(ids)
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
        int(np.argmax(logits))
        out["ttft_ms"] = (time.perf_counter() - t0) * 1000
        del llm
    t0 = time.perf_counter()
    llm = load(a.prompt_tokens + a.gen_tokens + 16, a.prompt_tokens)
    out["load_ms"] = (time.perf_counter() - t0) * 1000
    V = llm.n_vocab()
    ids = prompt_ids(a.prompt_tokens, V, llm.token_bos())
    llama_cpp.llama_perf_context_reset(llm.ctx)
    llm.eval(ids)
    tok = int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(V,))))
    for _ in range(a.gen_tokens):
        llm.eval([tok])
        tok = int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(V,))))
    perf = llama_cpp.llama_perf_context(llm.ctx)
    out["prefill_tok_s"] = perf.n_p_eval / (perf.t_p_eval_ms / 1000) if perf.t_p_eval_ms > 0 else 0
    out["decode_tok_s"] = perf.n_eval / (perf.t_eval_ms / 1000) if perf.t_eval_ms > 0 else 0
    out["n_p_eval"], out["n_eval"] = perf.n_p_eval, perf.n_eval
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
