#!/usr/bin/env python3
"""Rewrites a GGUF in another weight type with llama.cpp's own quantizer, for speed measurements only.

Runs under the peer's venv (the llama-cpp-python that bench/compare_llamacpp.py builds), so the file is
exactly what llama.cpp's `llama-quantize` would write: its per-tensor type choices for the Q4_K_M mix
(Q6_K for some tensors, Q5_0 / Q8_0 where a row is not a multiple of 256, as in Gemma 3's d_model), its
rounding. Gives the files of issue 6's peer table that no public package carries:

  /work/peer/venv/bin/python bench/requantize_gguf.py --in /work/models/random-1b-bf16.gguf \
      --out /work/models/random-1b-q4_k_m.gguf --type q4_k_m
  /work/peer/venv/bin/python bench/requantize_gguf.py --in /work/models/gemma-3-270m-q4_k_m.gguf \
      --out /work/models/gemma-3-270m-q8_0.gguf --type q8_0

Requantizing a quantized file (the 270M's Q4_K_M into Q8_0 or BF16) keeps its values as they dequantize,
with llama.cpp's `allow_requantize`: the weights are then not Google's originals, which a speed
measurement does not need (the bytes read per token and the kernels are those of the type).
"""
import argparse
import os
import sys

FTYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
          "bf16": "LLAMA_FTYPE_MOSTLY_BF16"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="src", required=True, help="input GGUF")
    ap.add_argument("--out", required=True, help="output GGUF (written, then renamed into place)")
    ap.add_argument("--type", choices=sorted(FTYPES), required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        sys.exit("requantize_gguf: llama_cpp not importable: run this with the peer's python "
                 "(bench/compare_llamacpp.py --build-peer DIR makes DIR/venv/bin/python)")
    if not os.path.isfile(args.src):
        sys.exit(f"requantize_gguf: {args.src}: no such file")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, FTYPES[args.type])
    params.allow_requantize = True
    params.nthread = args.threads
    tmp = args.out + ".part"
    rc = llama_cpp.llama_model_quantize(args.src.encode(), tmp.encode(), params)
    if rc != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        sys.exit(f"requantize_gguf: llama_model_quantize({args.src} -> {args.type}) failed: {rc}")
    os.replace(tmp, args.out)
    print(f"{args.out}: {os.path.getsize(args.out)} bytes ({args.type}, from {args.src})")


if __name__ == "__main__":
    main()
