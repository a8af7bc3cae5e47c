#!/usr/bin/env python3
"""What the gguf package's GGUFReader reports about the real Gemma 3 270M GGUF, for
tests/unit/test_gguf.c to compare our reader against.

Writes tests/fixtures/gguf/gemma3_270m_q4_k_m.txt, one record a line, fields separated by spaces:
    header <version> <n_tensors> <n_kv> <alignment> <data_offset>
    kv <key> <gguf value type> <value>                  scalars: integer, %.9g float, or 0/1 bool
    kv <key> 8 <hex of the UTF-8 bytes>                 strings ("-" when empty)
    arr <key> <element type> <count> <first element>    arrays (strings as hex)
    tensor <name> <ggml type> <n_dims> <ne0> <ne1> <ne2> <ne3> <absolute offset> <n_bytes>

usage: gen_gguf_fixture.py [MODEL.gguf] [OUT.txt]
"""
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType

here = os.path.dirname(os.path.abspath(__file__))
model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../../models/gemma-3-270m-q4_k_m.gguf")
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "../fixtures/gguf/gemma3_270m_q4_k_m.txt")

r = GGUFReader(model)


def scalar(field, idx):
    v = field.parts[idx]
    t = field.types[-1]
    if t == GGUFValueType.STRING:
        b = bytes(v)
        return b.hex() if b else "-"
    x = v[0]
    if t in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return "%.9g" % float(x)
    if t == GGUFValueType.BOOL:
        return "1" if x else "0"
    return str(int(x))


lines = []
version = int(r.fields["GGUF.version"].parts[-1][0])
kvs = [f for k, f in r.fields.items() if not k.startswith("GGUF.")]
lines.append(f"header {version} {len(r.tensors)} {len(kvs)} {r.alignment} {r.data_offset}")
for f in kvs:
    t = f.types[0]
    if t == GGUFValueType.ARRAY:
        et = f.types[-1]
        first = scalar(f, f.data[0]) if f.data else "-"
        lines.append(f"arr {f.name} {int(et)} {len(f.data)} {first}")
    else:
        lines.append(f"kv {f.name} {int(t)} {scalar(f, f.data[0])}")
for t in r.tensors:
    ne = [int(d) for d in t.shape] + [1] * (4 - len(t.shape))
    lines.append(f"tensor {t.name} {int(t.tensor_type)} {len(t.shape)} {' '.join(map(str, ne))} "
                 f"{int(t.data_offset)} {int(t.n_bytes)}")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as fh:
    fh.write("\n".join(lines) + "\n")
print(f"{out}: {len(kvs)} keys, {len(r.tensors)} tensors")
