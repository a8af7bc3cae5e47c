#!/usr/bin/env python3
"""Writes a Gemma 3 1B-shaped GGUF with random weights, for speed measurements (never for accuracy).

Exact Gemma 3 1B shapes: 26 layers (global attention on layers 5, 11, 17, 23: llama.cpp's default
period 6), d_model 1152, d_ff 6912, 4 heads, 1 kv head, head_dim 256, sliding window 512, rope bases
1e6 / 1e4, the 262,144-piece vocabulary. Matrices ~ normal(0, 0.02), norm weights 1 + normal(0, 0.1)
(stored as 1 + w, like llama.cpp's converter), norms F32. The tokenizer arrays are copied from
--vocab-from (the real Gemma 3 270M GGUF shares the 1B vocabulary), so llama.cpp and gemma.c both
tokenize with it. Tensors are generated and written one at a time (peak memory ~ one tensor).

  /work/venv/bin/python bench/make_1b_gguf.py --dtype q8_0 --out /work/models/random-1b-q8_0.gguf
  /work/venv/bin/python bench/make_1b_gguf.py --dtype bf16 --out /work/models/random-1b-bf16.gguf

--layers N writes fewer layers (quick tests); the files are ~1.06 GB (Q8_0) and ~2.0 GB (BF16).

--shape 4b writes Gemma 3 4B's text shapes instead (34 layers, d_model 2560, d_ff 10240, 8 heads, 4 kv
heads, window 1024, global RoPE scaled by 8; ~4.1 GB Q8_0, ~7.8 GB BF16): every width a multiple of 256,
so llama.cpp's Q4_K_M (bench/requantize_gguf.py) is K-quants throughout, as in the 4B-27B releases.
"""
import argparse
import sys

import numpy as np

V, HD = 262144, 256
# name: d_model, d_ff, heads, kv heads, layers, sliding window, global RoPE scale (seed-library.md)
SHAPES = {"1b": (1152, 6912, 4, 1, 26, 512, 1.0), "4b": (2560, 10240, 8, 4, 34, 1024, 8.0)}
D, F, NH, NKV, LAYERS, WINDOW, ROPE_SCALE = SHAPES["1b"]


def tensor_specs(layers):
    q, kv = NH * HD, NKV * HD
    specs = [("token_embd.weight", (V, D), "mat")]
    for i in range(layers):
        b = f"blk.{i}."
        specs += [
            (b + "attn_norm.weight", (D,), "norm"),
            (b + "attn_q.weight", (q, D), "mat"),
            (b + "attn_k.weight", (kv, D), "mat"),
            (b + "attn_v.weight", (kv, D), "mat"),
            (b + "attn_q_norm.weight", (HD,), "norm"),
            (b + "attn_k_norm.weight", (HD,), "norm"),
            (b + "attn_output.weight", (D, q), "mat"),
            (b + "post_attention_norm.weight", (D,), "norm"),
            (b + "ffn_norm.weight", (D,), "norm"),
            (b + "ffn_gate.weight", (F, D), "mat"),
            (b + "ffn_up.weight", (F, D), "mat"),
            (b + "ffn_down.weight", (D, F), "mat"),
            (b + "post_ffw_norm.weight", (D,), "norm"),
        ]
    specs.append(("output_norm.weight", (D,), "norm"))
    return specs


def to_bf16_bits(a):
    u = a.view(np.uint32)
    u = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (u >> np.uint32(16)).astype(np.uint16)


def encode(x, dtype, gguf):
    """float32 matrix -> (bytes as uint8 [rows, row_bytes], ggml type)."""
    if dtype == "f32":
        return x.view(np.uint8).reshape(x.shape[0], -1), gguf.GGMLQuantizationType.F32
    if dtype == "bf16":
        return to_bf16_bits(x).view(np.uint8).reshape(x.shape[0], -1), gguf.GGMLQuantizationType.BF16
    q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    return q.reshape(x.shape[0], -1), gguf.GGMLQuantizationType.Q8_0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=["q8_0", "bf16", "f32"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="1b")
    ap.add_argument("--layers", type=int, help="default: the shape's")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab-from", default="/work/models/gemma-3-270m-q4_k_m.gguf")
    args = ap.parse_args()
    global D, F, NH, NKV, LAYERS, WINDOW, ROPE_SCALE
    D, F, NH, NKV, LAYERS, WINDOW, ROPE_SCALE = SHAPES[args.shape]
    if args.layers is None:
        args.layers = LAYERS
    import gguf

    src = gguf.GGUFReader(args.vocab_from)
    w = gguf.GGUFWriter(args.out, "gemma3")
    w.add_string("general.name", f"gemma.c random-weight benchmark model, Gemma 3 {args.shape.upper()} shapes")
    w.add_uint32("gemma3.context_length", 32768)
    w.add_uint32("gemma3.block_count", args.layers)
    w.add_uint32("gemma3.embedding_length", D)
    w.add_uint32("gemma3.feed_forward_length", F)
    w.add_uint32("gemma3.attention.head_count", NH)
    w.add_uint32("gemma3.attention.head_count_kv", NKV)
    w.add_uint32("gemma3.attention.key_length", HD)
    w.add_uint32("gemma3.attention.value_length", HD)
    w.add_float32("gemma3.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32("gemma3.rope.freq_base", 1e6)
    w.add_uint32("gemma3.attention.sliding_window", WINDOW)
    if ROPE_SCALE != 1.0:
        w.add_string("gemma3.rope.scaling.type", "linear")
        w.add_float32("gemma3.rope.scaling.factor", ROPE_SCALE)
    w.add_uint32("general.file_type", {"f32": 0, "bf16": 32, "q8_0": 7}[args.dtype])
    for field in src.fields.values():  # the real tokenizer (and its special ids)
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
            else:
                vals = [field.parts[i].tolist()[0] for i in field.data]
            w.add_array(field.name, vals)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_string(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"))
        else:
            w.add_key_value(field.name, field.parts[field.data[0]].tolist()[0], vtype)

    specs = tensor_specs(args.layers)
    rng = np.random.default_rng(args.seed)

    def make(shape, kind):
        x = rng.standard_normal(size=shape, dtype=np.float32)
        if kind == "mat":
            return x * np.float32(0.02)
        return x * np.float32(0.1) + np.float32(1.0)

    # pass 1: tensor infos (sizes only), pass 2: data generated again from the same seed
    for name, shape, kind in specs:
        if kind == "norm":
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
            continue
        rows, cols = shape
        if args.dtype == "f32":
            nb, t = rows * cols * 4, gguf.GGMLQuantizationType.F32
        elif args.dtype == "bf16":
            nb, t = rows * cols * 2, gguf.GGMLQuantizationType.BF16
        else:
            nb, t = rows * cols // 32 * 34, gguf.GGMLQuantizationType.Q8_0
        bshape = (rows, nb // rows)
        w.add_tensor_info(name, bshape, np.dtype(np.uint8), nb, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, kind in specs:
        x = make(shape, kind)
        if kind == "norm":
            w.write_tensor_data(x)
        else:
            chunk = 16384  # rows at a time: bounded memory for the 262144-row embedding
            parts = [encode(np.ascontiguousarray(x[r:r + chunk]), args.dtype, gguf)[0] for r in range(0, shape[0], chunk)]
            w.write_tensor_data(np.concatenate(parts, axis=0))
        print(f"{name} {shape}", file=sys.stderr, flush=True)
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
