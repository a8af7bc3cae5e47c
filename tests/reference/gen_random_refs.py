#!/usr/bin/env python3
"""Reference logits for the random-weight GGUFs of make_random_gguf.py (1B, 4B and 27B layer shapes).

For each shape: writes the f32 and bf16 GGUFs to a scratch folder, checks their sha256 against
make_random_gguf.EXPECTED_SHA256, reads the f32 file back with the gguf package's GGUFReader (so the
reference is built from exactly the file the C engine reads, metadata included), checks the bf16 file holds
the same values, builds a float32 eager HF Gemma3ForCausalLM from it and stores the logits at every position
of three token sequences (lengths 3, 12, 20; the 8-token sliding window is exceeded in the last two).

  /work/venv/bin/python tests/reference/gen_random_refs.py [--shapes 1b,4b,27b] [--scratch /tmp/gm-random]
      [--out tests/fixtures/gemma3_random]

Needs about 4x the largest file in memory (27B shape f32: 3.3 GB file) and a few minutes on 2 cores.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gmref  # noqa: E402
import make_random_gguf as mrg  # noqa: E402

SEQ_LENGTHS = (3, 12, 20)


def sequences():
    rng = np.random.default_rng([mrg.SEED, 99])
    return [[2] + [int(x) for x in rng.integers(4, mrg.VOCAB, size=n - 1)] for n in SEQ_LENGTHS]


def read_gguf(path):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    r = GGUFReader(path)
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.ggml.t")
         and not k.startswith("tokenizer.ggml.s")}
    tensors = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        tensors[t.name] = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
    return f, tensors


def compare_bf16_file(path, tensors):
    """Checks, one tensor at a time, that the bf16 file holds the same values as the f32 one."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    r = GGUFReader(path)
    assert [t.name for t in r.tensors] == list(tensors)
    for t in r.tensors:
        v = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(tensors[t.name].shape)
        assert np.array_equal(v, tensors[t.name]), f"{t.name} differs between the f32 and bf16 files"
    return {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.ggml.t")
            and not k.startswith("tokenizer.ggml.s")}


def config_from_meta(f):
    pattern = f["gemma3.attention.sliding_window_pattern"]
    n = int(f["gemma3.block_count"])
    assert len(pattern) == n
    layer_types = ["sliding_attention" if p else "full_attention" for p in pattern]
    scale = None
    if "gemma3.rope.scaling.type" in f:
        assert f["gemma3.rope.scaling.type"] == "linear"
        scale = float(f["gemma3.rope.scaling.factor"])
    qpas = f.get("gemma3.attention.query_pre_attn_scalar")
    kw = dict(
        n_layers=n, d_model=int(f["gemma3.embedding_length"]), d_ff=int(f["gemma3.feed_forward_length"]),
        n_heads=int(f["gemma3.attention.head_count"]), n_kv_heads=int(f["gemma3.attention.head_count_kv"]),
        head_dim=int(f["gemma3.attention.key_length"]), vocab=mrg.VOCAB,
        sliding_window=int(f["gemma3.attention.sliding_window"]), layer_types=layer_types,
        rope_global=float(f["gemma3.rope.freq_base"]), rope_local=1e4, rope_scale=scale,
        query_pre_attn_scalar=(int(qpas) if qpas is not None else None),
        eps=float(np.float32(f["gemma3.attention.layer_norm_rms_epsilon"])),
    )
    if qpas is not None:
        assert float(int(qpas)) == float(qpas)
    return kw


def sensitivity(kw, tensors, ids, model):
    """Largest |logit change| over all positions of `ids` when one detail of the model is wrong: shows which
    test tolerance still catches each bug (and that the fixture exercises the detail at all)."""
    import torch

    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    variants = {
        "window_minus_1": dict(sliding_window=kw["sliding_window"] - 1),
        "window_plus_1": dict(sliding_window=kw["sliding_window"] + 1),
        "no_window": dict(sliding_window=10 ** 6),
        "local_rope_base_1e6": dict(rope_local=1e6),
        "global_rope_base_1e4": dict(rope_global=1e4),
        "all_layers_sliding": dict(layer_types=["sliding_attention"] * kw["n_layers"]),
        "eps_1e-5": dict(eps=1e-5),
    }
    if kw["rope_scale"]:
        variants["no_rope_scaling"] = dict(rope_scale=None)
    else:
        variants["rope_scaling_8"] = dict(rope_scale=8.0)
    if kw["query_pre_attn_scalar"]:
        variants["query_scalar_head_dim"] = dict(query_pre_attn_scalar=kw["head_dim"])
    else:
        variants["query_scalar_d_over_heads"] = dict(query_pre_attn_scalar=kw["d_model"] // kw["n_heads"])
    out = {}
    for label, change in variants.items():
        m = gmref.build_hf_model(gmref.hf_text_config(**{**kw, **change}), tensors)
        with torch.no_grad():
            lg = m(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
        out[label] = gmref.f32((lg - ref).abs().max())
        del m
    # GELU exact (erf) instead of the tanh approximation.
    cfg = gmref.hf_text_config(**kw)
    cfg.hidden_activation = "gelu"
    m = gmref.build_hf_model(cfg, tensors)
    with torch.no_grad():
        out["gelu_erf_instead_of_tanh"] = gmref.f32(
            (m(input_ids=torch.tensor([ids]), use_cache=False).logits[0] - ref).abs().max())
    return {"sequence_length": len(ids), "max_abs_logit_change": out}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1b,4b,27b")
    ap.add_argument("--scratch", default="/tmp/gm-random")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../fixtures/gemma3_random"))
    ap.add_argument("--keep", action="store_true", help="keep the scratch GGUFs")
    args = ap.parse_args()

    import torch
    import transformers
    import gguf

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.scratch, exist_ok=True)
    json_path = os.path.join(args.out, "random.json")
    doc = json.load(open(json_path)) if os.path.exists(json_path) else {}
    doc.update({
        "about": "Logits at every position of a float32 eager HF Gemma3ForCausalLM built from the GGUFs that "
                 "tests/reference/make_random_gguf.py writes. Layout: tests/fixtures/README.md.",
        "generator": "tests/reference/gen_random_refs.py",
        "gguf_writer": "tests/reference/make_random_gguf.py --shape S --dtype f32|bf16 --out FILE",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "gguf": "0.19.0"},
        "vocab": mrg.VOCAB, "n_layers": mrg.N_LAYERS, "sliding_window": mrg.SLIDING_WINDOW,
        "sliding_window_pattern": mrg.SWA_PATTERN,
    })
    doc.setdefault("shapes", {})
    seqs = sequences()
    for shape in args.shapes.split(","):
        t0 = time.time()
        files, shas = {}, {}
        for dt in ("f32", "bf16"):
            files[dt] = os.path.join(args.scratch, f"random-{shape}-{dt}.gguf")
            mrg.write_gguf(shape, dt, files[dt])
            shas[dt] = mrg.sha256(files[dt])
            want = mrg.EXPECTED_SHA256.get((shape, dt))
            if want != shas[dt]:
                print(f"WARNING {shape}/{dt}: sha256 {shas[dt]} != table {want}: update EXPECTED_SHA256")
        meta, tensors = read_gguf(files["f32"])
        meta_bf16 = compare_bf16_file(files["bf16"], tensors)
        assert meta_bf16 == {**meta, "general.file_type": 32}, f"{shape}: metadata differs between the files"
        # The values are the generator's (guards against a reader/writer mix-up).
        for name, arr in mrg.iter_tensors(shape):
            assert np.array_equal(arr, tensors[name]), name
        kw = config_from_meta(meta)
        cfg = gmref.hf_text_config(**kw)
        model = gmref.build_hf_model(cfg, tensors)
        recs = []
        for ids in seqs:
            with torch.no_grad():
                lg = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy().astype(np.float32)
            fn = f"{shape}.seq{len(ids)}.logits.bin"
            gmref.write_gmrf(os.path.join(args.out, fn), lg)
            recs.append({"ids": ids, "logits_file": fn, "argmax": [int(i) for i in lg.argmax(-1)],
                         "max_abs_logit": gmref.f32(np.abs(lg).max()),
                         "logit_std": gmref.f32(lg.std())})
        doc["shapes"][shape] = {
            "config": {k: v for k, v in kw.items() if k != "layer_types"},
            "layer_types": kw["layer_types"],
            "attention_scale": gmref.f32(1.0 / np.sqrt(cfg.query_pre_attn_scalar)),
            "sha256": shas, "file_bytes": {dt: os.path.getsize(p) for dt, p in files.items()},
            "sequences": recs,
        }
        doc["shapes"][shape]["sensitivity"] = sensitivity(kw, tensors, seqs[-1], model)
        del model, tensors
        if not args.keep:
            for p in files.values():
                os.remove(p)
        print(f"{shape}: sha256 f32 {shas['f32']} bf16 {shas['bf16']}; logits std "
              f"{[r['logit_std'] for r in recs]}; {time.time() - t0:.1f}s")
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
