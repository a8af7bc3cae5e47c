#!/usr/bin/env python3
"""Training references from PyTorch autograd through transformers' Gemma3ForCausalLM (float32, eager attention).

Writes into tests/fixtures/ (see tests/fixtures/README.md, "Training references"):
  hf_train_tiny/              a tiny random Gemma 3 (float32, save_pretrained): vocab 128, hidden 32, intermediate 48,
                              3 layers (layer 1 global), 4 heads, 2 kv heads, head_dim 8, sliding_window 4,
                              query_pre_attn_scalar 12, global RoPE linear x8; every parameter random (norms included)
  hf_train_tiny_ref.json      batches (token sequences + loss masks), hyperparameters, losses
  hf_train_tok/               a tiny random Gemma 3 with a tokenizer (tokenizer_tiny/tokenizer.json, vocab 961; the
                              model's vocab 1024), bf16, for the command-line tests of `gemma train`
  hf_train_tiny_ref.safetensors
                              float32 tensors: "grad.<hf name>" = d loss / d parameter on batch 0 (full fine-tuning);
                              "lora_init.<hf module>.{a,b}" and "lora_grad.<hf module>.{a,b}" for the LoRA check

The loss is the seed's Seq2SeqTask loss: input = seq[:-1], target = seq[1:], cross-entropy summed over positions
whose loss mask is 1 and divided by the number of such positions in the whole batch. Sequences of a batch are run
one by one (batch size 1, no padding), so no attention mask is involved.

Adafactor: 10 steps of optax.adafactor(lr 1e-2, min_dim_size_to_factor 16, other arguments at their defaults) applied
to the parameters in the seed library's (JAX gemma) layout -- q_einsum [N, D, H], kv_einsum [2, K, D, H],
attn_vec_einsum [N, H, D], gating_einsum [2, F, D], linear [F, D], norm scales -- with the gradients PyTorch
computes for the same weights (converted to that layout each step): "adafactor_losses".

Curves: 10 steps of torch.optim.AdamW (lr 3e-3, betas (0.9, 0.95), eps 1e-8, weight_decay 0.1) on batches 0..9,
from the fixture weights; full fine-tuning, and LoRA (rank 4, alpha 8, A ~ U(-1/sqrt(in), 1/sqrt(in)) stored in the
fixture, B = 0, base frozen) on q, k, v, o, gate, up, down. losses[i] is the loss of batch i before step i's update.

Run from the repository root with the pinned versions of tests/reference/requirements.txt:
  python tests/reference/gen_train_refs.py
"""
import json
import math
import os
import shutil
import sys

import torch
import safetensors.torch
import transformers
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
SEED = 4321
TINY = dict(vocab_size=128, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, sliding_window=4, query_pre_attn_scalar=12,
            rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_theta=10000.0, rope_local_base_freq=100.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"], max_position_embeddings=128,
            rms_norm_eps=1e-6)
ADAMW = dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
LORA_RANK, LORA_ALPHA = 4, 8.0
LORA_MODULES = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                "mlp.up_proj", "mlp.down_proj"]
STEPS, SEQS_PER_BATCH = 10, 4
ADAFACTOR_LR, ADAFACTOR_MIN_DIM = 1e-2, 16


def randomize(model, g):
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            p.copy_(r * 0.5 if p.ndim == 1 else r * 0.3 if "embed" in name else r / math.sqrt(p.shape[-1]))


def make_batches(g, vocab):
    """Sequences of 6..16 tokens starting with BOS (2); the first 2..5 targets masked (a 'prompt')."""
    batches = []
    for _ in range(STEPS):
        seqs, masks = [], []
        for _ in range(SEQS_PER_BATCH):
            n = int(torch.randint(6, 17, (1,), generator=g))
            ids = [2] + torch.randint(3, vocab, (n - 1,), generator=g).tolist()
            k = int(torch.randint(2, 6, (1,), generator=g))
            masks.append([0] * k + [1] * (n - 1 - k))  # one entry per target ids[1:]
            seqs.append(ids)
        batches.append(dict(tokens=seqs, loss_mask=masks))
    return batches


def batch_loss(model, batch):
    total, count = 0.0, 0
    for ids, mask in zip(batch["tokens"], batch["loss_mask"]):
        logits = model(input_ids=torch.tensor([ids[:-1]])).logits[0]
        m = torch.tensor(mask, dtype=torch.bool)
        ce = torch.nn.functional.cross_entropy(logits[m], torch.tensor(ids[1:])[m], reduction="sum")
        total = total + ce
        count += int(m.sum())
    return total / count


class LoRALinear(torch.nn.Module):
    """y = W x + (alpha / r) B A x around a frozen nn.Linear."""

    def __init__(self, base, a, b):
        super().__init__()
        self.base = base
        self.a = torch.nn.Parameter(a.clone())
        self.b = torch.nn.Parameter(b.clone())
        self.scale = LORA_ALPHA / LORA_RANK

    def forward(self, x):
        return self.base(x) + self.scale * ((x @ self.a.T) @ self.b.T)


def add_lora(model, inits):
    for p in model.parameters():
        p.requires_grad_(False)
    mods = {}
    for i, layer in enumerate(model.model.layers):
        for name in LORA_MODULES:
            parent_name, attr = name.split(".")
            parent = getattr(layer, parent_name)
            key = f"model.layers.{i}.{name}"
            lin = LoRALinear(getattr(parent, attr), *inits[key])
            setattr(parent, attr, lin)
            mods[key] = lin
    return mods


def lora_inits(model, g, b_random):
    out = {}
    for i, layer in enumerate(model.model.layers):
        for name in LORA_MODULES:
            parent_name, attr = name.split(".")
            lin = getattr(getattr(layer, parent_name), attr)
            fan_in = lin.weight.shape[1]
            a = (torch.rand(LORA_RANK, fan_in, generator=g) * 2 - 1) / math.sqrt(fan_in)
            b = torch.randn(lin.weight.shape[0], LORA_RANK, generator=g) * 0.3 if b_random else \
                torch.zeros(lin.weight.shape[0], LORA_RANK)
            out[f"model.layers.{i}.{name}"] = (a, b)
    return out


def curve(model, params, batches):
    opt = torch.optim.AdamW(params, foreach=False, **ADAMW)
    losses = []
    for b in batches:
        opt.zero_grad()
        loss = batch_loss(model, b)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def to_seed(model, grads=False):
    """Parameters (or their gradients) of a Gemma3ForCausalLM in the seed library's layout, as numpy float32."""
    c = model.config
    N, K, H, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.hidden_size
    get = (lambda p: p.grad.detach().numpy().astype("float32")) if grads else (lambda p: p.detach().numpy().copy())
    tree = {"embedder": {"input_embedding": get(model.model.embed_tokens.weight)},
            "final_norm": {"scale": get(model.model.norm.weight)}}
    for i, L in enumerate(model.model.layers):
        a, m = L.self_attn, L.mlp
        kv = [get(w).reshape(K, H, D).transpose(0, 2, 1) for w in (a.k_proj.weight, a.v_proj.weight)]
        tree[f"layer_{i}"] = {
            "q_einsum": get(a.q_proj.weight).reshape(N, H, D).transpose(0, 2, 1),
            "kv_einsum": __import__("numpy").stack(kv),
            "attn_vec_einsum": get(a.o_proj.weight).T.reshape(N, H, D),
            "query_norm": get(a.q_norm.weight), "key_norm": get(a.k_norm.weight),
            "gating_einsum": __import__("numpy").stack([get(m.gate_proj.weight), get(m.up_proj.weight)]),
            "linear": get(m.down_proj.weight).T,
            "pre_attention_norm": get(L.input_layernorm.weight), "post_attention_norm": get(L.post_attention_layernorm.weight),
            "pre_ffw_norm": get(L.pre_feedforward_layernorm.weight), "post_ffw_norm": get(L.post_feedforward_layernorm.weight),
        }
    return tree


def from_seed(model, tree):
    import numpy as np
    c = model.config
    N, K, H, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.hidden_size
    put = lambda p, v: p.data.copy_(torch.from_numpy(np.ascontiguousarray(np.asarray(v, dtype=np.float32))))
    put(model.model.embed_tokens.weight, tree["embedder"]["input_embedding"])
    put(model.model.norm.weight, tree["final_norm"]["scale"])
    for i, L in enumerate(model.model.layers):
        t, a, m = tree[f"layer_{i}"], L.self_attn, L.mlp
        put(a.q_proj.weight, np.asarray(t["q_einsum"]).transpose(0, 2, 1).reshape(N * H, D))
        put(a.k_proj.weight, np.asarray(t["kv_einsum"][0]).transpose(0, 2, 1).reshape(K * H, D))
        put(a.v_proj.weight, np.asarray(t["kv_einsum"][1]).transpose(0, 2, 1).reshape(K * H, D))
        put(a.o_proj.weight, np.asarray(t["attn_vec_einsum"]).reshape(N * H, D).T)
        put(a.q_norm.weight, t["query_norm"]), put(a.k_norm.weight, t["key_norm"])
        put(m.gate_proj.weight, t["gating_einsum"][0]), put(m.up_proj.weight, t["gating_einsum"][1])
        put(m.down_proj.weight, np.asarray(t["linear"]).T)
        put(L.input_layernorm.weight, t["pre_attention_norm"]), put(L.post_attention_layernorm.weight, t["post_attention_norm"])
        put(L.pre_feedforward_layernorm.weight, t["pre_ffw_norm"]), put(L.post_feedforward_layernorm.weight, t["post_ffw_norm"])


def adafactor_curve(model, batches):
    import jax
    import optax
    tx = optax.adafactor(learning_rate=ADAFACTOR_LR, min_dim_size_to_factor=ADAFACTOR_MIN_DIM)
    params = jax.tree.map(jax.numpy.asarray, to_seed(model))
    state = tx.init(params)
    losses = []
    for b in batches:
        model.zero_grad()
        loss = batch_loss(model, b)
        loss.backward()
        losses.append(loss.item())
        grads = jax.tree.map(jax.numpy.asarray, to_seed(model, grads=True))
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        from_seed(model, jax.tree.map(lambda x: __import__("numpy").asarray(x), params))
    return losses


def load(folder):
    return Gemma3ForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").train()


def optax_version():
    import optax
    return optax.__version__


def main():
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(SEED)
    folder = os.path.join(FIX, "hf_train_tiny")
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    model = Gemma3ForCausalLM(Gemma3TextConfig(**TINY))
    randomize(model, g)
    model.save_pretrained(folder, safe_serialization=True)
    batches = make_batches(g, TINY["vocab_size"])
    tensors = {}

    # gradients on batch 0 (full fine-tuning); the tied head's gradient is part of embed_tokens'
    ref = load(folder)
    loss0 = batch_loss(ref, batches[0])
    loss0.backward()
    for name, p in ref.named_parameters():
        tensors["grad." + name] = p.grad.detach().clone().contiguous()

    # LoRA gradients on batch 0 (B random so that A's gradient is not zero)
    ref = load(folder)
    inits = lora_inits(ref, g, b_random=True)
    mods = add_lora(ref, inits)
    lora_loss0 = batch_loss(ref, batches[0])
    lora_loss0.backward()
    for key, m in mods.items():
        tensors[f"lora_init.{key}.a"], tensors[f"lora_init.{key}.b"] = inits[key][0], inits[key][1]
        tensors[f"lora_grad.{key}.a"] = m.a.grad.detach().clone()
        tensors[f"lora_grad.{key}.b"] = m.b.grad.detach().clone()

    # 10-step AdamW curves
    ref = load(folder)
    full_losses = curve(ref, list(ref.parameters()), batches)
    ref = load(folder)
    curve_inits = lora_inits(ref, g, b_random=False)
    mods = add_lora(ref, curve_inits)
    for key, (a, _) in curve_inits.items():
        tensors[f"lora_curve_init.{key}.a"] = a
    lora_params = [p for m in mods.values() for p in (m.a, m.b)]
    lora_losses = curve(ref, lora_params, batches)

    ref = load(folder)
    ada_losses = adafactor_curve(ref, batches)

    safetensors.torch.save_file({k: v.contiguous() for k, v in tensors.items()},
                                os.path.join(FIX, "hf_train_tiny_ref.safetensors"))
    out = dict(
        generator=dict(transformers=transformers.__version__, torch=torch.__version__.split("+")[0]),
        folder="hf_train_tiny", loss=loss0.item(), lora_loss=lora_loss0.item(),
        lora=dict(rank=LORA_RANK, alpha=LORA_ALPHA, modules=LORA_MODULES),
        adamw=dict(lr=ADAMW["lr"], beta1=ADAMW["betas"][0], beta2=ADAMW["betas"][1], eps=ADAMW["eps"],
                   weight_decay=ADAMW["weight_decay"]),
        full_losses=full_losses, lora_losses=lora_losses,
        adafactor=dict(lr=ADAFACTOR_LR, min_dim_size_to_factor=ADAFACTOR_MIN_DIM, optax=optax_version()),
        adafactor_losses=ada_losses, batches=batches)
    with open(os.path.join(FIX, "hf_train_tiny_ref.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("loss", loss0.item(), "full", full_losses, "lora", lora_losses, "adafactor", ada_losses)

    # a tiny model that can read text: for the CLI tests
    tok_folder = os.path.join(FIX, "hf_train_tok")
    if os.path.isdir(tok_folder):
        shutil.rmtree(tok_folder)
    g2 = torch.Generator().manual_seed(SEED + 1)
    small = Gemma3ForCausalLM(Gemma3TextConfig(**dict(TINY, vocab_size=1024, num_hidden_layers=2,
                                                       layer_types=["sliding_attention", "full_attention"])))
    randomize(small, g2)
    small.to(torch.bfloat16).save_pretrained(tok_folder, safe_serialization=True)
    shutil.copy(os.path.join(FIX, "tokenizer_tiny", "tokenizer.json"), os.path.join(tok_folder, "tokenizer.json"))


if __name__ == "__main__":
    sys.exit(main())
