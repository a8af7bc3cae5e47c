#!/usr/bin/env python3
"""A second opinion from llama.cpp (through llama-cpp-python) on the real 270M GGUF.

Reads tests/fixtures/gemma3_270m/prompts.json (written by gen_real_refs.py), runs the same token ids through
llama.cpp with two KV-cache precisions (its default f16 cache, and f32), and writes
tests/fixtures/gemma3_270m/llamacpp.json: llama.cpp's 64-token greedy continuations, where they first leave
the transformers ones (with transformers' top1-top2 margin at that step), and how far llama.cpp's
last-position logits are from transformers' float32 ones. For the long prompt it compares the per-position
top-1 before and after position 512 (where the sliding window starts to matter).

Run it with a venv holding llama-cpp-python (it compiles llama.cpp; see tests/fixtures/README.md):
  /work/venv-llamacpp/bin/python tests/reference/gen_llamacpp_refs.py --model /work/models/gemma-3-270m-q4_k_m.gguf

With --random-dir DIR it instead runs the f32 random-weight GGUFs (written first with make_random_gguf.py as
DIR/random-{1b,4b,27b}-f32.gguf) and writes tests/fixtures/gemma3_random/llamacpp.json: how far llama.cpp is
from the transformers logits of random.json.

llama.cpp's "extra buffer types" (AMX tiles and CPU weight repacking) are switched off: on this Sapphire
Rapids-class CPU its AMX matmul crashes (SIGSEGV in ggml_backend_amx_mul_mat), and the plain path is the one
every x86 CPU runs.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gmref  # noqa: E402

import llama_cpp  # noqa: E402
import llama_cpp.llama_cpp as lc  # noqa: E402

_default_params = lc.llama_model_default_params


def _params_without_extra_bufts():
    p = _default_params()
    p.use_extra_bufts = False
    return p


lc.llama_model_default_params = _params_without_extra_bufts

GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1


def open_model(path, kv_type):
    return llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=1024, n_ubatch=1024, n_threads=2,
                           n_threads_batch=2, logits_all=True, verbose=False, type_k=kv_type, type_v=kv_type,
                           seed=0)


def run(llm, ids, n_new):
    llm.reset()
    llm.eval(ids)
    prompt_logits = np.array(llm.scores[:len(ids)], dtype=np.float32)
    out = []
    for step in range(n_new):
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(t)
        if step + 1 < n_new:
            llm.eval([t])
    return prompt_logits, out


def random_models(random_dir, fixtures):
    """llama.cpp on the random-weight GGUFs (f32 files, f32 KV cache) vs the transformers logits."""
    import hashlib

    ref = json.load(open(os.path.join(fixtures, "random.json")))
    doc = {
        "about": "llama.cpp (llama-cpp-python, f32 KV cache, no extra buffer types) on the f32 GGUFs of "
                 "make_random_gguf.py vs the transformers logits in random.json. See tests/fixtures/README.md.",
        "generator": "tests/reference/gen_llamacpp_refs.py --random-dir DIR",
        "versions": {"llama_cpp_python": llama_cpp.__version__}, "shapes": {},
    }
    for shape, info in ref["shapes"].items():
        path = os.path.join(random_dir, f"random-{shape}-f32.gguf")
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        assert h.hexdigest() == info["sha256"]["f32"], f"{path}: not the file random.json was made from"
        llm = open_model(path, GGML_TYPE_F32)
        recs = []
        for seq in info["sequences"]:
            logits, _ = run(llm, seq["ids"], 1)
            want = np.fromfile(os.path.join(fixtures, seq["logits_file"]), dtype="<f4", offset=48)
            d = np.abs(logits - want.reshape(logits.shape))
            recs.append({"n_tokens": len(seq["ids"]), "max_abs_diff": gmref.f32(d.max()),
                         "argmax_agree": int((logits.argmax(-1) == np.array(seq["argmax"])).sum())})
            print(f"random {shape} T={len(seq['ids'])}: max|d| {recs[-1]['max_abs_diff']}")
        doc["shapes"][shape] = recs
        del llm
    with open(os.path.join(fixtures, "llamacpp.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/models/gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "../fixtures/gemma3_270m"))
    ap.add_argument("--random-dir", help="instead: compare llama.cpp with the random-model references; DIR holds "
                    "random-{1b,4b,27b}-f32.gguf written by make_random_gguf.py")
    ap.add_argument("--random-fixtures",
                    default=os.path.join(os.path.dirname(__file__), "../fixtures/gemma3_random"))
    args = ap.parse_args()
    if args.random_dir:
        random_models(args.random_dir, args.random_fixtures)
        return
    ref = json.load(open(os.path.join(args.fixtures, "prompts.json"), encoding="utf-8"))
    n_new = ref["greedy_steps"]
    doc = {
        "about": "llama.cpp (llama-cpp-python) greedy continuations and logit differences vs the transformers "
                 "float32 reference in prompts.json. Layout and discussion: tests/fixtures/README.md.",
        "generator": "tests/reference/gen_llamacpp_refs.py",
        "versions": {"llama_cpp_python": llama_cpp.__version__, "numpy": np.__version__},
        "settings": {"n_threads": 2, "use_extra_bufts": False, "flash_attn": "llama.cpp default (auto)"},
        "runs": {},
    }
    for label, kv in (("kv_f16", GGML_TYPE_F16), ("kv_f32", GGML_TYPE_F32)):
        llm = open_model(args.model, kv)
        recs = []
        for p in ref["prompts"]:
            logits, gen = run(llm, p["ids"], n_new)
            last = logits[-1]
            hf_top = np.fromfile(os.path.join(args.fixtures, p["top128_ids_file"]), dtype="<i4", offset=48)
            hf_val = np.fromfile(os.path.join(args.fixtures, p["top128_logits_file"]), dtype="<f4", offset=48)
            first_div = next((i for i, (a, b) in enumerate(zip(gen, p["greedy64"])) if a != b), None)
            rec = {
                "name": p["name"], "greedy64": gen,
                "greedy64_text": llm.detokenize(gen).decode("utf-8", "replace"),
                "same_as_transformers": first_div is None,
                "first_divergence": first_div,
                "transformers_margin_at_divergence": (p["greedy64_margins"][first_div]
                                                      if first_div is not None else None),
                "argmax": int(np.argmax(last)),
                "top10_ids": [int(i) for i in np.argsort(-last, kind="stable")[:10]],
                "max_abs_diff_top128": gmref.f32(np.abs(last[hf_top] - hf_val).max()),
            }
            if "logits_f16_file" in p:
                full = np.fromfile(os.path.join(args.fixtures, p["logits_f16_file"]), dtype="<f2",
                                   offset=48).astype(np.float32)
                d = np.abs(last - full)
                rec["max_abs_diff_full_vocab_vs_f16_ref"] = gmref.f32(d.max())
                rec["mean_abs_diff_full_vocab_vs_f16_ref"] = gmref.f32(d.mean())
            recs.append(rec)
            print(f"{label} {p['name']}: diverges at {first_div} (hf margin "
                  f"{rec['transformers_margin_at_divergence']}), top128 max|d| {rec['max_abs_diff_top128']}, "
                  f"full {rec.get('max_abs_diff_full_vocab_vs_f16_ref')}")
        lp = ref["long"]
        logits, _ = run(llm, lp["ids"], 1)
        hf_ids = np.fromfile(os.path.join(args.fixtures, lp["top10_ids_file"]), dtype="<i4", offset=48)
        hf_ids = hf_ids.reshape(-1, 10)
        hf_val = np.fromfile(os.path.join(args.fixtures, lp["top10_logits_file"]), dtype="<f4", offset=48)
        hf_val = hf_val.reshape(-1, 10)
        ours = np.take_along_axis(logits, hf_ids, axis=1)
        agree = logits.argmax(-1) == hf_ids[:, 0]
        margin = np.array(lp["top1_top2_margin"], dtype=np.float32)
        dis = [int(i) for i in np.nonzero(~agree)[0]]
        long_rec = {
            "n_tokens": len(lp["ids"]),
            "argmax_agree_positions_lt_512": int(agree[:512].sum()), "positions_lt_512": 512,
            "argmax_agree_positions_ge_512": int(agree[512:].sum()), "positions_ge_512": int(len(agree) - 512),
            "disagreeing_positions": dis,
            "transformers_margin_at_disagreements": [gmref.f32(margin[i]) for i in dis],
            "max_abs_diff_top10_lt_512": gmref.f32(np.abs(ours[:512] - hf_val[:512]).max()),
            "max_abs_diff_top10_ge_512": gmref.f32(np.abs(ours[512:] - hf_val[512:]).max()),
            "argmax": [int(i) for i in logits.argmax(-1)],
        }
        print(f"{label} long: agree {long_rec['argmax_agree_positions_lt_512']}/512 before, "
              f"{long_rec['argmax_agree_positions_ge_512']}/{long_rec['positions_ge_512']} after; max|d| top10 "
              f"{long_rec['max_abs_diff_top10_lt_512']} / {long_rec['max_abs_diff_top10_ge_512']}")
        doc["runs"][label] = {"prompts": recs, "long": long_rec}
        del llm
    with open(os.path.join(args.fixtures, "llamacpp.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
