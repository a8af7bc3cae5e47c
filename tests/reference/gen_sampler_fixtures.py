#!/usr/bin/env python3
"""Reference token choices of the seed library's sampling methods, for tests/unit/test_sampler.c.

The gemma library itself is not installed here: its four methods (gemma/gm/text/_sampling.py:
Greedy, RandomSampling, TopkSampling, TopPSampling) and the per-step key handling of its sampler
loop (_sampler_loop.py: forbidden logits set to -inf, then `next_rng, curr_rng =
jax.random.split(state.rng)` and the method draws with curr_rng) are restated below with the same
jax / jax.numpy operations, on [1, V] logits as the loop passes them.

Writes tests/fixtures/sampler_jax.json. Logits: "l1000" (stored) and "l262144" (big_logit() of
gen_prng_fixtures.py, recomputed by the C test); step s uses np.roll(logits, 37 * s).
    python tests/reference/gen_sampler_fixtures.py tests/fixtures/sampler_jax.json
"""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_prng_fixtures import BIG_V, big_logit, f32_bits  # noqa: E402

STEPS = 5
ROLL = 37


def greedy(logits, rng):
    del rng
    return jnp.argmax(logits, axis=-1)


def random_sampling(temperature):
    def f(logits, rng):
        return jax.random.categorical(rng, logits / temperature, axis=-1)
    return f


def top_k_sampling(temperature, k):
    def f(logits, rng):
        values, indices = jax.lax.top_k(logits, k)
        picked = jax.random.categorical(rng, values / temperature, axis=-1)
        return indices[jnp.arange(logits.shape[0]), picked]
    return f


def top_p_sampling(p, temperature):
    def f(logits, rng):
        logits = logits / temperature
        if p < 1.0:
            sorted_logits = jnp.sort(logits, axis=-1, descending=True)
            cum = jnp.cumsum(jax.nn.softmax(sorted_logits, axis=-1), axis=-1)
            cutoff_index = jnp.sum(cum < p, axis=-1, keepdims=True)
            cutoff_logit = jnp.take_along_axis(sorted_logits, cutoff_index, axis=-1)
            logits = jnp.where(logits < cutoff_logit, jnp.finfo(logits.dtype).min, logits)
        return jax.random.categorical(rng, logits, axis=-1)
    return f


def top_p_margin(logits, p, temperature):
    """Distance of the nearest cumulative probability to p, in float64 (the C code sums in double,
    JAX in float32): a fixture is only meaningful when both pick the same cutoff."""
    x = np.asarray(logits, np.float32) / np.float32(temperature)
    x = np.sort(x[np.isfinite(x)])[::-1].astype(np.float64)
    e = np.exp(x - x[0])
    cum64 = np.cumsum(e / e.sum())
    e32 = np.exp((x - x[0]).astype(np.float32))
    cum32 = np.cumsum((e32 / e32.sum()).astype(np.float32), dtype=np.float32)
    if int(np.sum(cum64 < p)) != int(np.sum(cum32 < p)):
        return 0.0  # the cutoff depends on float32 rounding: no exact fixture possible
    return float(np.min(np.abs(cum64 - p)))


def method_fn(cfg):
    m, t = cfg["method"], cfg["temperature"]
    if m == "greedy":
        return greedy
    if m == "random":
        return random_sampling(t)
    if m == "top_k":
        return top_k_sampling(t, cfg["top_k"])
    return top_p_sampling(cfg["top_p"], t)


def run(cfg, base, forbidden):
    fn = method_fn(cfg)
    rng = jax.random.key(cfg["seed"])
    tokens, margin = [], 1.0
    for s in range(STEPS):
        logits = jnp.asarray(np.roll(base, ROLL * s))[None, :]
        if forbidden:
            logits = logits.at[:, jnp.asarray(forbidden)].set(-jnp.inf)
        if cfg["method"] == "top_p" and cfg["top_p"] < 1.0:
            margin = min(margin, top_p_margin(logits[0], cfg["top_p"], cfg["temperature"]))
        next_rng, cur_rng = jax.random.split(rng)
        tokens.append(int(fn(logits, cur_rng)[0]))
        rng = next_rng
    return tokens, margin


def configs():
    out = []
    seeds = [0, 1, 42, 2**31 - 1]
    for seed in seeds:
        out.append({"method": "greedy", "temperature": 1.0, "seed": seed})
        out.append({"method": "random", "temperature": 1.0, "seed": seed})
    for t in (0.7, 1.5):
        out.append({"method": "random", "temperature": t, "seed": 7})
    for k, t in ((1, 1.0), (5, 1.0), (40, 0.8), (1000, 1.3)):
        for seed in (0, 42):
            out.append({"method": "top_k", "temperature": t, "top_k": k, "seed": seed})
    for p, t in ((0.9, 1.0), (0.5, 0.7), (0.95, 1.4), (1.0, 1.2)):
        for seed in (1, 2**31 - 1):
            out.append({"method": "top_p", "temperature": t, "top_p": p, "seed": seed})
    return out


def main(path):
    rng = np.random.default_rng(7)
    l1000 = rng.normal(0.0, 2.0, size=1000).astype(np.float32)
    big = np.array([big_logit(i) for i in range(BIG_V)], dtype=np.float32)
    cases = []
    for name, base, forbidden in (("l1000", l1000, []), ("l1000", l1000, [3, int(np.argmax(l1000))]),
                                  ("l262144", big, [255999, 256000, int(np.argmax(big))])):
        for cfg in configs():
            if name == "l262144" and cfg["method"] == "top_k" and cfg["top_k"] == 1000:
                continue
            for partitionable in (True, False):
                if not partitionable and cfg["seed"] not in (1, 42):
                    continue
                jax.config.update("jax_threefry_partitionable", partitionable)
                tokens, margin = run(cfg, base, forbidden)
                case = dict(cfg, logits=name, forbidden=forbidden, partitionable=partitionable, tokens=tokens)
                if cfg["method"] == "top_p" and cfg["top_p"] < 1.0:
                    if margin < 2e-5:  # e.g. p=0.95, T=1.4 on l262144 cuts deep in the flat tail
                        print(f"skipped (cutoff within float32 rounding of p): {case}", file=sys.stderr)
                        continue
                    case["top_p_margin"] = margin
                cases.append(case)
    jax.config.update("jax_threefry_partitionable", True)
    # gm_logits_top_k reference: float64 softmax over the whole vocabulary (numpy), top entries by
    # probability, ties by lower id (stable argsort of -p).
    tops = {}
    for name, base, k in (("l1000", l1000, 10), ("l262144", big, 30)):
        x = base.astype(np.float64)
        e = np.exp(x - x.max())
        prob = e / e.sum()
        order = np.argsort(-prob, kind="stable")[:k]
        tops[name] = {"ids": [int(i) for i in order], "probs": [float(prob[i]) for i in order]}
    data = {
        "generator": "tests/reference/gen_sampler_fixtures.py",
        "top_k_probs": tops,
        "jax_version": jax.__version__,
        "steps": STEPS,
        "roll": ROLL,
        "l1000_bits": f32_bits(l1000),
        "cases": cases,
    }
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/sampler_jax.json")
