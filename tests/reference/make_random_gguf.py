#!/usr/bin/env python3
"""Writes a small random-weight Gemma 3 GGUF with the layer shapes of the 1B, 4B or 27B model.

Full widths (d_model, d_ff, heads, kv heads, head_dim) but 2 layers (layer 0 sliding, layer 1 global via
the boolean array gemma3.attention.sliding_window_pattern), a 1024-token vocabulary and an 8-token sliding
window. The bytes are a pure function of (shape, dtype) and the pinned numpy + gguf versions, and the script
checks the sha256 of what it wrote against the table below, so a test that uses the file knows it is the
one that tests/fixtures/gemma3_random/ was computed from. Usage (the CI tests run this at test time):

  python tests/reference/make_random_gguf.py --shape 1b --dtype f32 --out /tmp/random-1b-f32.gguf
  python tests/reference/make_random_gguf.py --list        # shapes, sizes, expected sha256

Exit status 0 = file written and its sha256 is the expected one; 1 = written but sha256 differs (different
numpy/gguf version?); 2 = bad arguments or write error.

Weights (identical values in the f32 and bf16 files, so one set of reference logits serves both):
  matrices and the embedding: normal(0, 0.02) rounded to the nearest bfloat16;
  norm weights: 1 + normal(0, 0.1) rounded to bfloat16 (llama.cpp stores Gemma norm weights as 1 + w);
  norm weights are F32 in both files (like llama.cpp's converter, which keeps 1-D tensors F32).
Tensor i (in the fixed order of tensor_specs()) draws from numpy.random.default_rng([SEED, SHAPE_ID, i]).
"""
import argparse
import hashlib
import os
import sys

import numpy as np

SEED = 20250312
VOCAB = 1024
N_LAYERS = 2
SLIDING_WINDOW = 8
SWA_PATTERN = [True, False]  # true = sliding; layer 1 is global
CONTEXT_LENGTH = 4096

# d_model, d_ff, heads, kv heads, head_dim, linear rope factor on global layers, query_pre_attn_scalar key
SHAPES = {
    "1b": dict(shape_id=1, d_model=1152, d_ff=6912, n_heads=4, n_kv_heads=1, head_dim=256,
               rope_scale=None, query_pre_attn_scalar=None),
    "4b": dict(shape_id=4, d_model=2560, d_ff=10240, n_heads=8, n_kv_heads=4, head_dim=256,
               rope_scale=8.0, query_pre_attn_scalar=None),
    "27b": dict(shape_id=27, d_model=5376, d_ff=21504, n_heads=32, n_kv_heads=16, head_dim=128,
                rope_scale=8.0, query_pre_attn_scalar=168.0),
}

# sha256 of the files this script writes (numpy 2.4.6, gguf 0.19.0); also in tests/fixtures/gemma3_random/random.json.
EXPECTED_SHA256 = {
    ("1b", "f32"): "442529391cf42684060e37383fc902674f8a9317d4434b620e3e1644357b8858",
    ("1b", "bf16"): "0938643923c845e6cd39ba52fc042e7ac40f85a2b2280ed53d824dedcc8a4fec",
    ("4b", "f32"): "85dd2a325639027ada205badbb0b8875e9dffea10d56308afb69ba5a2ce582f8",
    ("4b", "bf16"): "523b14408da69120d4fca9710dfb6bd7da03d1a0df73d030e3c69a43aac4683b",
    ("27b", "f32"): "f260e8e166cb1f99030f60788f39397024023e80e2380de323ff98d1a04a3239",
    ("27b", "bf16"): "107e2fc22c131112437c74401b2dfcc90b422211d0a593979f6f18408cb916f9",
}


def tensor_specs(s):
    """[(name, numpy shape (outermost first), kind)] in file order; kind 'mat' or 'norm'."""
    d, f, hd = s["d_model"], s["d_ff"], s["head_dim"]
    q, kv = s["n_heads"] * hd, s["n_kv_heads"] * hd
    specs = [("token_embd.weight", (VOCAB, d), "mat")]
    for i in range(N_LAYERS):
        b = f"blk.{i}."
        specs += [
            (b + "attn_norm.weight", (d,), "norm"),
            (b + "attn_q.weight", (q, d), "mat"),
            (b + "attn_k.weight", (kv, d), "mat"),
            (b + "attn_v.weight", (kv, d), "mat"),
            (b + "attn_q_norm.weight", (hd,), "norm"),
            (b + "attn_k_norm.weight", (hd,), "norm"),
            (b + "attn_output.weight", (d, q), "mat"),
            (b + "post_attention_norm.weight", (d,), "norm"),
            (b + "ffn_norm.weight", (d,), "norm"),
            (b + "ffn_gate.weight", (f, d), "mat"),
            (b + "ffn_up.weight", (f, d), "mat"),
            (b + "ffn_down.weight", (d, f), "mat"),
            (b + "post_ffw_norm.weight", (d,), "norm"),
        ]
    specs.append(("output_norm.weight", (d,), "norm"))
    return specs


def round_to_bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, round to nearest even (values here are finite)."""
    u = a.view(np.uint32)
    u = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (u >> np.uint32(16)).astype(np.uint16)


def bf16_bits_to_f32(b):
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)


def make_tensor(s, index, shape, kind):
    """Returns the tensor as bfloat16 bits (uint16) with the given numpy shape."""
    rng = np.random.default_rng([SEED, s["shape_id"], index])
    x = rng.standard_normal(size=shape, dtype=np.float32)
    if kind == "mat":
        x *= np.float32(0.02)
    else:
        x *= np.float32(0.1)
        x += np.float32(1.0)
    return round_to_bf16_bits(x)


def iter_tensors(shape_name):
    """Yields (name, float32 array) for every tensor: the exact values stored in the GGUF."""
    s = SHAPES[shape_name]
    for i, (name, shape, kind) in enumerate(tensor_specs(s)):
        yield name, bf16_bits_to_f32(make_tensor(s, i, shape, kind))


def write_gguf(shape_name, dtype, path):
    import gguf

    s = SHAPES[shape_name]
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_string("general.name", f"gemma.c random test model, {shape_name} layer shapes")
    w.add_uint32("gemma3.context_length", CONTEXT_LENGTH)
    w.add_uint32("gemma3.block_count", N_LAYERS)
    w.add_uint32("gemma3.embedding_length", s["d_model"])
    w.add_uint32("gemma3.feed_forward_length", s["d_ff"])
    w.add_uint32("gemma3.attention.head_count", s["n_heads"])
    w.add_uint32("gemma3.attention.head_count_kv", s["n_kv_heads"])
    w.add_uint32("gemma3.attention.key_length", s["head_dim"])
    w.add_uint32("gemma3.attention.value_length", s["head_dim"])
    w.add_float32("gemma3.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32("gemma3.rope.freq_base", 1e6)
    w.add_uint32("gemma3.attention.sliding_window", SLIDING_WINDOW)
    w.add_array("gemma3.attention.sliding_window_pattern", SWA_PATTERN)
    if s["rope_scale"] is not None:
        w.add_string("gemma3.rope.scaling.type", "linear")
        w.add_float32("gemma3.rope.scaling.factor", s["rope_scale"])
    if s["query_pre_attn_scalar"] is not None:
        w.add_float32("gemma3.attention.query_pre_attn_scalar", s["query_pre_attn_scalar"])
    w.add_uint32("general.file_type", 0 if dtype == "f32" else 32)  # LLAMA_FTYPE_ALL_F32 / MOSTLY_BF16
    # Minimal self-contained tokenizer: 4 specials then "tok4".."tok1023".
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"tok{i}" for i in range(4, VOCAB)]
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", [0.0] * 4 + [-float(i) for i in range(4, VOCAB)])
    w.add_array("tokenizer.ggml.token_type", [3, 3, 3, 2] + [1] * (VOCAB - 4))  # control, unknown, normal
    w.add_uint32("tokenizer.ggml.bos_token_id", 2)
    w.add_uint32("tokenizer.ggml.eos_token_id", 1)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 3)
    w.add_uint32("tokenizer.ggml.padding_token_id", 0)
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)

    specs = tensor_specs(s)
    for name, shape, kind in specs:
        n = int(np.prod(shape))
        if dtype == "bf16" and kind == "mat":
            w.add_tensor_info(name, shape, np.dtype(np.uint16), n * 2, raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), n * 4)
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, (name, shape, kind) in enumerate(specs):  # one tensor in memory at a time
        bits = make_tensor(s, i, shape, kind)
        w.write_tensor_data(bits if (dtype == "bf16" and kind == "mat") else bf16_bits_to_f32(bits))
        del bits
    w.close()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def file_size(shape_name, dtype):
    s = SHAPES[shape_name]
    return sum(int(np.prod(sh)) * (2 if (dtype == "bf16" and k == "mat") else 4)
               for _, sh, k in tensor_specs(s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES))
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true", help="print shapes, tensor-data sizes and expected sha256")
    ap.add_argument("--no-check", action="store_true", help="do not compare the sha256")
    args = ap.parse_args()
    if args.list:
        for k in sorted(SHAPES, key=lambda k: SHAPES[k]["shape_id"]):
            for dt in ("f32", "bf16"):
                print(f"{k:4s} {dt:5s} {file_size(k, dt) / 2**20:8.1f} MiB tensor data  "
                      f"sha256 {EXPECTED_SHA256.get((k, dt), '?')}")
        return 0
    if not args.shape or not args.out:
        ap.error("--shape and --out are required")
    try:
        write_gguf(args.shape, args.dtype, args.out)
    except OSError as e:
        print(f"make_random_gguf: cannot write {args.out}: {e}", file=sys.stderr)
        return 2
    got = sha256(args.out)
    want = EXPECTED_SHA256.get((args.shape, args.dtype))
    print(f"{args.out}: {os.path.getsize(args.out)} bytes, sha256 {got}")
    if args.no_check:
        return 0
    if want != got:
        print(f"make_random_gguf: sha256 mismatch for {args.shape}/{args.dtype}: expected {want}, got {got} "
              f"(numpy {np.__version__}; the references assume numpy 2.4.6 and gguf 0.19.0)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
