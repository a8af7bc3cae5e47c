#!/usr/bin/env python3
"""Dequantization fixtures for tests/unit/test_kernels_dequant.c, computed by the gguf package's
numpy (de)quantizers (an implementation independent of ours).

Writes tests/fixtures/quant/<TYPE>.bin, each:
    char magic[4] = "GMQF"; u32 ggml_type; u32 n_values; u32 n_bytes;
    u8 blocks[n_bytes];            raw ggml blocks, as stored in a GGUF file
    f32 values[n_values];          gguf.quants.dequantize(blocks)
<TYPE>_matvec.bin, a small matrix of such blocks times a random x, computed in float64:
    char magic[4] = "GMMV"; u32 ggml_type; u32 rows; u32 cols; u32 n_bytes;
    u8 W[n_bytes]; f32 x[cols]; f64 y[rows]; f64 abs_dot[rows] (sum |w| |x|, for tolerances)
and fp16.bin (f32 -> f16 / bf16 rounding, as numpy and gguf.quants.BF16 do it):
    char magic[4] = "GMHF"; u32 n;  f32 in[n]; u16 f16[n]; u16 bf16[n]

Blocks come from three sources: gguf.quants.quantize() of random floats (types it can quantize),
random bytes with sane f16 scale fields (every bit pattern of the codes), and, when the real model
is given, blocks copied from its tensors.

usage: gen_quant_fixtures.py [--model gemma-3-270m-q4_k_m.gguf] [--out tests/fixtures/quant]
"""
import argparse
import os
import struct

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, quants
from gguf.constants import GGML_QUANT_SIZES

# (type, offsets of f16 scale fields within a block)
TYPES = {
    Q.F32: [], Q.F16: [], Q.BF16: [],
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
    Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}
QUANTIZABLE = {Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0}


def sane_f16(rng, n):
    """Scale values as real files have them: |d| in [2^-14, 2^-2], either sign, as f16 bytes."""
    mag = 2.0 ** rng.uniform(-14, -2, n)
    sign = np.where(rng.random(n) < 0.25, -1.0, 1.0)
    return (mag * sign).astype(np.float16).view(np.uint8).reshape(n, 2)


def random_blocks(rng, qtype, n_blocks):
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in TYPES[qtype]:
        raw[:, off:off + 2] = sane_f16(rng, n_blocks)
    return raw


def float_values(rng, qtype, n):
    x = rng.standard_normal(n).astype(np.float32) * np.float32(0.1)
    specials = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, -65504.0, 1e-6, -3e-7, 6.1e-5, 2.0 ** -24, np.inf, -np.inf],
                        dtype=np.float32)
    x[:len(specials)] = specials
    if qtype == Q.F32:
        return x.view(np.uint8).reshape(n, 4)
    if qtype == Q.F16:
        h = x.astype(np.float16).view(np.uint16)
        h[len(specials)] = 0x7e01  # a NaN with a payload
        h[len(specials) + 1] = 0x0001  # smallest subnormal
        h[len(specials) + 2] = 0x83ff  # largest negative subnormal
        return h.view(np.uint8).reshape(n, 2)
    return quants.quantize(x, Q.BF16).reshape(n, 2)


def model_blocks(reader, qtype, n_blocks):
    block, size = GGML_QUANT_SIZES[qtype]
    for t in reader.tensors:
        if t.tensor_type == qtype:
            raw = np.asarray(t.data).view(np.uint8).reshape(-1)
            # blocks from the middle of the tensor, not just the first row
            start = (raw.size // size // 2) * size
            return raw[start:start + n_blocks * size].reshape(n_blocks, size).copy()
    return None


def write_quant(path, qtype, raw):
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    values = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
    with open(path, "wb") as f:
        f.write(b"GMQF")
        f.write(struct.pack("<III", int(qtype), values.size, raw.size))
        f.write(raw.tobytes())
        f.write(values.astype("<f4").tobytes())
    return values.size


def write_matvec(path, qtype, raw, rng):
    """W (raw rows) times a random x, in float64 from gguf.quants' dequantization."""
    block, size = GGML_QUANT_SIZES[qtype]
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    n = raw.size // size * block
    cols = 256 if block == 256 else 128 if block == 32 else 32
    rows = n // cols
    raw = raw[:rows * cols // block * size]
    w = quants.dequantize(raw, qtype).astype(np.float64).reshape(rows, cols)
    x = rng.standard_normal(cols).astype(np.float32)
    y = w @ x.astype(np.float64)
    absdot = np.abs(w) @ np.abs(x.astype(np.float64))
    with open(path, "wb") as f:
        f.write(b"GMMV")
        f.write(struct.pack("<IIII", int(qtype), rows, cols, raw.size))
        f.write(raw.tobytes())
        f.write(x.astype("<f4").tobytes())
        f.write(y.astype("<f8").tobytes())
        f.write(absdot.astype("<f8").tobytes())


def write_fp16(path, rng):
    x = (rng.standard_normal(1500) * 10.0 ** rng.uniform(-8, 5, 1500)).astype(np.float32)
    edge = np.array([0.0, -0.0, np.inf, -np.inf, 65504.0, 65519.99, 65520.0, 1e10, 2.0 ** -24, 2.0 ** -25,
                     2.0 ** -25 * 1.0000001, 3 * 2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1.0 + 2.0 ** -11,
                     1.0 + 3 * 2.0 ** -11, 1e-30, -1e-30, 3.3895314e38], dtype=np.float32)
    nans = np.array([0x7fc00000, 0xffc00001, 0x7f800001, 0x7fa00000], dtype=np.uint32).view(np.float32)
    # values halfway between two f16 / bf16 numbers exercise round-to-nearest-even
    mids = np.array([0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x477fe000, 0x387fc000], dtype=np.uint32)
    x = np.concatenate([edge, nans, mids.view(np.float32), x]).astype(np.float32)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).view(np.uint16)
    b = quants.quantize(x, Q.BF16).view(np.uint16)
    with open(path, "wb") as f:
        f.write(b"GMHF")
        f.write(struct.pack("<I", x.size))
        f.write(x.astype("<f4").tobytes())
        f.write(h.astype("<u2").tobytes())
        f.write(b.astype("<u2").tobytes())


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--model", default=os.path.join(here, "../../models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(here, "../fixtures/quant"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(20240607)
    reader = GGUFReader(args.model) if os.path.exists(args.model) else None
    for qtype in TYPES:
        block, size = GGML_QUANT_SIZES[qtype]
        if qtype in (Q.F32, Q.F16, Q.BF16):
            raw = float_values(rng, qtype, 96)
        else:
            n_rand = 6 if block == 256 else 24
            parts = [random_blocks(rng, qtype, n_rand)]
            if qtype in QUANTIZABLE:
                x = rng.standard_normal(8 * block).astype(np.float32) * np.float32(0.05)
                x[:block] = 0.0  # an all-zero block (d = 0)
                parts.append(quants.quantize(x, qtype).reshape(-1, size))
            if reader is not None:
                mb = model_blocks(reader, qtype, 2 if block == 256 else 8)
                if mb is not None:
                    parts.append(mb)
            raw = np.concatenate(parts)
        n = write_quant(os.path.join(args.out, f"{qtype.name}.bin"), qtype, raw)
        print(f"{qtype.name}: {n} values")
        if qtype in (Q.F32, Q.F16, Q.BF16):  # finite values only for the product
            x = (rng.standard_normal(96) * 0.5).astype(np.float32)
            raw = x.view(np.uint8) if qtype == Q.F32 else \
                x.astype(np.float16).view(np.uint8) if qtype == Q.F16 else quants.quantize(x, Q.BF16)
        write_matvec(os.path.join(args.out, f"{qtype.name}_matvec.bin"), qtype, raw, rng)
    write_fp16(os.path.join(args.out, "fp16.bin"), rng)


if __name__ == "__main__":
    main()
