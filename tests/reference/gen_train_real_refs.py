#!/usr/bin/env python3
"""LoRA training references on the real Gemma 3 270M Q4_K_M GGUF, from PyTorch autograd in float64.

Builds the float32, eager-attention Hugging Face Gemma3ForCausalLM holding exactly the GGUF's dequantized weights
(gen_real_refs.load_gguf + gmref.build_hf_model, as the inference references do), wraps q, k, v, o, gate, up,
down of every layer with LoRA adapters (rank 4, alpha 8: y = W x + 2 B A x, base frozen) whose values are a fixed
formula both sides compute (A[i][j] = 0.02 sin(1 + 0.37 i + 0.011 j + 0.7 l + 1.3 m), B[i][j] = 0.02 cos(same),
in float64 then rounded to float32; l = layer, m = 0..6 in the order q, k, v, o, gate, up, down), and runs two
date-task examples (the first two lines of data/dates/train.jsonl, tokenized by the C loader's rules with HF
tokenizers: prompt with <bos>, response + <end_of_turn>, loss on the response) through:
  - the loss and, per adapter tensor, the gradient's L2 norm and 8 of its elements;
  - 3 AdamW steps (lr 1e-3, torch defaults otherwise) on that batch: the loss before each step.
The model runs in float64 (the dequantized float32 weights, norms as float32 w = stored - 1, upcast exactly), so
the references carry no float32 rounding of their own: a float32 implementation is compared with the exact
values (PyTorch in float32 is itself about 1e-4 away on some adapter gradients of the last layers).
Writes tests/fixtures/train_real_270m.json.

  /work/venv/bin/python tests/reference/gen_train_real_refs.py --model /work/models/gemma-3-270m-q4_k_m.gguf \\
      --tokenizer ../shared/data/gemma3-tokenizer.json.gz
"""
import argparse
import gzip
import json
import math
import os
import sys

import numpy as np
import torch
import tokenizers
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gmref  # noqa: E402
from gen_real_refs import load_gguf  # noqa: E402

# float64 all the way: transformers' Gemma3RMSNorm and eager softmax upcast to float32 whatever the model dtype,
# so both are replaced by their float64 forms (RoPE's cos/sin stay as transformers computes them, from float32
# angles, as the C code does).
from transformers.models.gemma3 import modeling_gemma3 as _mg  # noqa: E402


def _rms_forward(self, x):
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)) * (1.0 + self.weight)


_mg.Gemma3RMSNorm.forward = _rms_forward
_softmax = torch.nn.functional.softmax


def _softmax64(x, dim=None, _stacklevel=3, dtype=None):
    return _softmax(x, dim=dim) if x.dtype == torch.float64 else _softmax(x, dim=dim, dtype=dtype)


torch.nn.functional.softmax = _softmax64

RANK, ALPHA = 4, 8.0
MODULES = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj"]
SAMPLES = 8


def lora_value(fn, i, j, layer, m):
    return np.float32(0.02 * fn(1.0 + 0.37 * i + 0.011 * j + 0.7 * layer + 1.3 * m))


def init(rows, cols, layer, m, fn):
    i = np.arange(rows, dtype=np.float64)[:, None]
    j = np.arange(cols, dtype=np.float64)[None, :]
    return torch.from_numpy((0.02 * fn(1.0 + 0.37 * i + 0.011 * j + 0.7 * layer + 1.3 * m)).astype(np.float32))


class LoRALinear(torch.nn.Module):
    def __init__(self, base, a, b):
        super().__init__()
        self.base, self.a, self.b = base, torch.nn.Parameter(a), torch.nn.Parameter(b)

    def forward(self, x):
        return self.base(x) + (ALPHA / RANK) * ((x @ self.a.T) @ self.b.T)


def examples(tok, path, n):
    out = []
    for line in open(path).readlines()[:n]:
        ex = json.loads(line)
        p = [2] + tok.encode(f"<start_of_turn>user\n{ex['prompt']}<end_of_turn>\n<start_of_turn>model\n",
                             add_special_tokens=False).ids
        r = tok.encode(f"{ex['response']}<end_of_turn>", add_special_tokens=False).ids
        ids = p + r
        out.append(dict(tokens=ids, loss_mask=[1 if i + 1 >= len(p) else 0 for i in range(len(ids) - 1)]))
    return out


def loss_of(model, batch):
    total, count = 0.0, 0
    for e in batch:
        logits = model(input_ids=torch.tensor([e["tokens"][:-1]])).logits[0]
        m = torch.tensor(e["loss_mask"], dtype=torch.bool)
        total = total + torch.nn.functional.cross_entropy(logits[m], torch.tensor(e["tokens"][1:])[m], reduction="sum")
        count += int(m.sum())
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "train_real_270m.json"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    tok = tokenizers.Tokenizer.from_str(gzip.open(args.tokenizer).read().decode("utf-8"))
    batch = examples(tok, os.path.join(ROOT, "data", "dates", "train.jsonl"), 2)
    meta, tensors, _ = load_gguf(args.model)
    n = meta["n_layers"]
    layer_types = ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(n)]
    model = gmref.build_hf_model(gmref.hf_text_config(layer_types=layer_types, **meta), tensors)
    norms = {gmref.gguf_to_hf_name(k)[0]: v for k, v in tensors.items() if gmref.gguf_to_hf_name(k)[1]}
    del tensors
    model = model.double()
    with torch.no_grad():  # w = stored - 1 exactly (in float64), so 1 + w is the stored float32 value
        for name, p in model.named_parameters():
            if name in norms:
                p.copy_(torch.from_numpy(norms[name].astype(np.float64)) - 1.0)
    model.model.embed_tokens.embed_scale = torch.tensor(np.float32(meta["d_model"] ** 0.5), dtype=torch.float64)
    model.train()
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for l, layer in enumerate(model.model.layers):
        for m, name in enumerate(MODULES):
            parent, attr = name.split(".")
            lin = getattr(getattr(layer, parent), attr)
            R, C = lin.weight.shape
            mod = LoRALinear(lin, init(RANK, C, l, m, np.sin).double(), init(R, RANK, l, m, np.cos).double())
            setattr(getattr(layer, parent), attr, mod)
            adapters.append((l, name, mod))
    loss = loss_of(model, batch)
    loss.backward()
    grads = []
    for l, name, mod in adapters:
        for ab, p in (("a", mod.a), ("b", mod.b)):
            g = p.grad.detach().numpy().ravel()  # float64
            idx = np.linspace(0, g.size - 1, SAMPLES).round().astype(int)
            grads.append(dict(layer=l, module=name, which=ab, norm=float(np.linalg.norm(g.astype(np.float64))),
                              index=idx.tolist(), values=[float(g[i]) for i in idx]))
    # 3 AdamW steps on the same batch
    params = [p for _, _, mod in adapters for p in (mod.a, mod.b)]
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        l3 = loss_of(model, batch)
        l3.backward()
        losses.append(l3.item())
        opt.step()
    out = dict(generator=dict(transformers=transformers.__version__, torch=torch.__version__.split("+")[0]),
               model=os.path.basename(args.model), dtype="float64", rank=RANK, alpha=ALPHA, batch=batch, loss=loss.item(),
               grads=grads, adamw=dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01), losses=losses)
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("loss", loss.item(), "curve", losses)


if __name__ == "__main__":
    main()
