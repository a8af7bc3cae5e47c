#!/usr/bin/env python3
"""Reference logits and greedy continuations for the real Gemma 3 270M Q4_K_M GGUF.

Builds a float32, eager-attention Hugging Face Gemma3ForCausalLM holding exactly the GGUF's weights
(each tensor dequantized with the gguf package's gguf.quants.dequantize; norm weights minus 1, see
gmref.py), runs the prompts of prompts_270m.py and writes tests/fixtures/gemma3_270m/ (layout in
tests/fixtures/README.md).

  /work/venv/bin/python tests/reference/gen_real_refs.py \
      --model /work/models/gemma-3-270m-q4_k_m.gguf \
      --tokenizer ../shared/data/gemma3-tokenizer.json.gz [--out tests/fixtures/gemma3_270m] [--check-hf-gguf]

--check-hf-gguf also loads the GGUF through transformers' own GGUF path (from_pretrained(gguf_file=...)) and
reports the largest difference between its weights and ours (a check of our name mapping and +1 handling).
Takes a few minutes on 2 cores.
"""
import argparse
import gzip
import hashlib
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gmref  # noqa: E402
import prompts_270m  # noqa: E402

N_GREEDY = 64
TOPK = 128


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_gguf(path):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    r = GGUFReader(path)

    def kv(key):
        return r.fields[key].contents()

    assert kv("general.architecture") == "gemma3"
    meta = {
        "n_layers": int(kv("gemma3.block_count")), "d_model": int(kv("gemma3.embedding_length")),
        "d_ff": int(kv("gemma3.feed_forward_length")), "n_heads": int(kv("gemma3.attention.head_count")),
        "n_kv_heads": int(kv("gemma3.attention.head_count_kv")),
        "head_dim": int(kv("gemma3.attention.key_length")),
        "sliding_window": int(kv("gemma3.attention.sliding_window")),
        "rope_global": float(kv("gemma3.rope.freq_base")),
        "eps": float(np.float32(kv("gemma3.attention.layer_norm_rms_epsilon"))),
    }
    tensors, types = {}, {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type)
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))  # GGUF ne[] is innermost first
        tensors[t.name] = np.asarray(a, dtype=np.float32).reshape(shape)
        types[t.name] = t.tensor_type.name
    meta["vocab"] = tensors["token_embd.weight"].shape[0]
    return meta, tensors, types


def expected_config_check(meta):
    want = dict(n_layers=18, d_model=640, d_ff=2048, n_heads=4, n_kv_heads=1, head_dim=256, vocab=262144,
                sliding_window=512, rope_global=1e6)
    for k, v in want.items():
        assert meta[k] == v, (k, meta[k], v)
    assert abs(meta["eps"] - 1e-6) < 1e-12


def check_hf_gguf(gguf_path, model):
    """Compares our state dict with transformers' own GGUF loader (if it supports gemma3)."""
    import torch
    from transformers import AutoModelForCausalLM

    d, f = os.path.split(os.path.abspath(gguf_path))
    theirs = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    sd_t = theirs.state_dict()
    worst = 0.0
    for k, v in model.state_dict().items():
        if k not in sd_t:
            print(f"  transformers GGUF model lacks {k}")
            continue
        diff = float((sd_t[k].float() - v).abs().max())
        worst = max(worst, diff)
        if diff > 1e-6:
            print(f"  {k}: max |diff| {diff:g}")
    print(f"transformers GGUF loader vs ours: worst max|diff| = {worst:g}")
    return worst


def window_sensitivity(model, ids, ref_idx, ref_vals):
    """How much a wrong sliding window would move the long prompt's logits: for each variant, the largest
    |logit - reference| over the reference top-10 ids and the number of top-1 agreements at positions >= the
    real window (512). Tells a test which tolerance still catches a window bug."""
    import torch

    real = model.config.sliding_window
    attns = [layer.self_attn for layer in model.model.layers]
    out = {}
    for label, w in (("no_window", 10 ** 6), ("window_511", real - 1), ("window_513", real + 1)):
        model.config.sliding_window = w
        for a in attns:
            if a.sliding_window is not None:
                a.sliding_window = w
        with torch.no_grad():
            lg = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
        got = torch.gather(lg, 1, ref_idx)
        d = (got - ref_vals).abs()[real:]
        agree = int((lg.argmax(-1) == ref_idx[:, 0])[real:].sum())
        out[label] = {"max_abs_diff_top10_ge_512": gmref.f32(d.max()), "top1_agree_ge_512": agree,
                      "positions_ge_512": len(ids) - real,
                      "max_abs_diff_top10_lt_512": gmref.f32((got - ref_vals).abs()[:real].max())}
        print(f"window variant {label}: {out[label]}")
    model.config.sliding_window = real
    for a in attns:
        if a.sliding_window is not None:
            a.sliding_window = real
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/models/gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(__file__),
                                                        "../../../shared/data/gemma3-tokenizer.json.gz"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../fixtures/gemma3_270m"))
    ap.add_argument("--check-hf-gguf", action="store_true")
    args = ap.parse_args()

    import tokenizers
    import torch
    import transformers
    import gguf

    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    tok = tokenizers.Tokenizer.from_str(gzip.open(args.tokenizer).read().decode("utf-8"))

    t0 = time.time()
    meta, tensors, types = load_gguf(args.model)
    expected_config_check(meta)
    n = meta["n_layers"]
    layer_types = ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(n)]
    cfg = gmref.hf_text_config(layer_types=layer_types, **meta)
    model = gmref.build_hf_model(cfg, tensors)
    del tensors
    print(f"model built in {time.time() - t0:.1f}s")
    if args.check_hf_gguf:
        check_hf_gguf(args.model, model)

    def encode(text):
        return [2] + tok.encode(text, add_special_tokens=False).ids

    records = []
    for name, text, full in prompts_270m.PROMPTS:
        ids = encode(text)
        t1 = time.time()
        with torch.no_grad():
            logits_all = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]  # [T, V] f32
        last = logits_all[-1].numpy().astype(np.float32)
        order = np.argsort(-last, kind="stable")
        top = order[:TOPK]
        rec = {
            "name": name, "text": text, "n_tokens": len(ids), "ids": ids,
            "argmax": int(order[0]),
            "top10_ids": [int(i) for i in order[:10]],
            "top10_logits": [gmref.f32(last[i]) for i in order[:10]],
            "max_abs_logit": gmref.f32(np.abs(last).max()),
            "top128_ids_file": f"{name}.top128_ids.bin", "top128_logits_file": f"{name}.top128_logits.bin",
        }
        gmref.write_gmrf(os.path.join(args.out, rec["top128_ids_file"]), top.astype(np.int32))
        gmref.write_gmrf(os.path.join(args.out, rec["top128_logits_file"]), last[top])
        if full:
            rec["logits_f16_file"] = f"{name}.logits_f16.bin"
            gmref.write_gmrf(os.path.join(args.out, rec["logits_f16_file"]), last.astype(np.float16))
        gen, margins = gmref.greedy(model, ids, N_GREEDY)
        assert gen[0] == rec["argmax"], "cached greedy disagrees with the full forward"
        rec["greedy64"] = gen
        rec["greedy64_margins"] = [gmref.f32(m) for m in margins]
        rec["greedy64_text"] = tok.decode(gen, skip_special_tokens=False)
        # The cached decode must agree with an uncached forward over prompt + continuation.
        with torch.no_grad():
            re_all = model(input_ids=torch.tensor([ids + gen[:-1]]), use_cache=False).logits[0]
        re_arg = re_all[len(ids) - 1:].argmax(-1).tolist()
        bad = [i for i, (a, b) in enumerate(zip(re_arg, gen)) if a != b and margins[i] > 1e-3]
        assert not bad, f"{name}: uncached argmax differs from cached greedy at steps {bad}"
        records.append(rec)
        print(f"{name}: {len(ids)} tokens, top1 {rec['argmax']} ({rec['top10_logits'][0]}), "
              f"min margin {min(margins):.4f}, {time.time() - t1:.1f}s: {rec['greedy64_text'][:100]!r}")

    # Long prompt: top-10 at every position (the 512-token window is exceeded from position 512 on).
    ids = encode(prompts_270m.LONG_TEXT)
    with torch.no_grad():
        logits_all = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    vals, idx = torch.topk(logits_all, 10, dim=-1, sorted=True)
    gmref.write_gmrf(os.path.join(args.out, "long.top10_ids.bin"), idx.numpy().astype(np.int32))
    gmref.write_gmrf(os.path.join(args.out, "long.top10_logits.bin"), vals.numpy().astype(np.float32))
    long_rec = {"name": prompts_270m.LONG_NAME, "text": prompts_270m.LONG_TEXT, "n_tokens": len(ids), "ids": ids,
                "top10_ids_file": "long.top10_ids.bin", "top10_logits_file": "long.top10_logits.bin",
                "top1_top2_margin": [gmref.f32(v) for v in (vals[:, 0] - vals[:, 1]).numpy()]}
    print(f"long: {len(ids)} tokens")
    long_rec["window_sensitivity"] = window_sensitivity(model, ids, idx, vals)

    doc = {
        "about": "Reference outputs of a float32 eager Hugging Face Gemma3ForCausalLM holding exactly the "
                 "dequantized weights of the GGUF below. Layout: tests/fixtures/README.md.",
        "generator": "tests/reference/gen_real_refs.py",
        "model_file": os.path.basename(args.model), "model_sha256": sha256(args.model),
        "tokenizer": "Google gemma3 tokenizer.json (sha256 of uncompressed "
                     + hashlib.sha256(gzip.open(args.tokenizer).read()).hexdigest() + "), BOS id 2 prepended",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__,
                     "gguf": getattr(gguf, "__version__", "0.19.0")},
        "config": {**meta, "rope_local": 1e4, "query_pre_attn_scalar": meta["head_dim"],
                   "global_layers": [i for i, t in enumerate(layer_types) if t == "full_attention"],
                   "tensor_types": sorted(set(types.values()))},
        "greedy_steps": N_GREEDY, "topk": TOPK,
        "prompts": records, "long": long_rec,
    }
    with open(os.path.join(args.out, "prompts.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
