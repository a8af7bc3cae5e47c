#!/usr/bin/env python3
"""PyTorch baseline for bench_train: transformers' Gemma3ForCausalLM (float32, eager attention, CPU) with the same
shapes as the real Gemma 3 270M (tests/fixtures/hf_configs/gemma-3-270m.json; random weights: speed does not depend
on them), LoRA adapters of the same rank on q, k, v, o, gate, up, down (base frozen), AdamW, masked mean
cross-entropy over the same batch of random tokens. Prints tokens per second of full steps (forward, backward,
optimizer), the first step excluded.

usage: bench_train_torch.py [threads] [batch] [seq_len] [lora_rank] [steps] [loss_fraction] [--full]"""
import json
import math
import os
import sys
import time

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LoRALinear(torch.nn.Module):
    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        self.a = torch.nn.Parameter((torch.rand(rank, base.in_features) * 2 - 1) / math.sqrt(base.in_features))
        self.b = torch.nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.scale * ((x @ self.a.T) @ self.b.T)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    full = "--full" in sys.argv
    threads, B, S, rank, steps = [int(x) for x in (args + ["2", "4", "64", "8", "3"][len(args):])[:5]]
    frac = float(args[5]) if len(args) > 5 else 1.0
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    with open(os.path.join(ROOT, "tests/fixtures/hf_configs/gemma-3-270m.json")) as f:
        cfg = json.load(f)
    model = Gemma3ForCausalLM(Gemma3TextConfig.from_dict(cfg)).float()
    model.config._attn_implementation = "eager"
    model.train()
    if full:
        params = list(model.parameters())
    else:
        for p in model.parameters():
            p.requires_grad_(False)
        params = []
        for layer in model.model.layers:
            for parent, names in ((layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                                  (layer.mlp, ("gate_proj", "up_proj", "down_proj"))):
                for n in names:
                    lin = LoRALinear(getattr(parent, n), rank, 2.0 * rank)
                    setattr(parent, n, lin)
                    params += [lin.a, lin.b]
    opt = torch.optim.AdamW(params, lr=1e-4)
    V = cfg["vocab_size"]
    g = torch.Generator().manual_seed(12345)
    ids = torch.randint(3, V, (B, S), generator=g)
    ids[:, 0] = 2
    mask = torch.zeros(B, S - 1, dtype=torch.bool)
    mask[:, int((1 - frac) * (S - 1)):] = True
    total, tokens, cpu_total = 0.0, 0, 0.0
    for i in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        logits = model(input_ids=ids[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits[mask], ids[:, 1:][mask])
        loss.backward()
        opt.step()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        n = B * (S - 1)
        print(f"step {i + 1}: loss {loss.item():.4f}, {dt:.2f} s, {n / dt:.1f} tok/s", flush=True)
        if i > 0 or steps == 1:
            total += dt
            cpu_total += dc
            tokens += n
    print(f"torch {torch.__version__}, threads {threads}, batch {B} x {S}, "
          f"{'full fine-tuning' if full else f'LoRA rank {rank}'}: {tokens / total:.1f} tok/s, "
          f"{tokens / cpu_total:.1f} tok per CPU-second (steps after the first)")


if __name__ == "__main__":
    main()
