"""Shared helpers for the reference-fixture scripts (not used at test time, except by make_random_gguf.py's
sibling gen_random_refs.py).

- write_gmrf(): the tiny raw-binary array format the C tests read (layout in tests/fixtures/README.md).
- hf_text_config() / build_hf_model(): a float32, eager-attention Hugging Face Gemma3ForCausalLM whose weights
  come from llama.cpp-named tensors (token_embd.weight, blk.N.attn_q.weight, ...). GGUF norm weights hold
  (1 + w) (llama.cpp's converter adds the 1; its graph multiplies by the stored value), while HF's
  Gemma3RMSNorm multiplies by (1 + weight), so the HF weight is gguf_value - 1.
"""
import struct

import numpy as np

GMRF_DTYPES = {np.dtype("<f4"): 0, np.dtype("<f2"): 1, np.dtype("<i4"): 2}


def write_gmrf(path, arr):
    """One little-endian array per file: 48-byte header, then the data in C (row-major) order.

    header: char magic[4] = "GMRF"; u32 version = 1; u32 dtype (0 f32, 1 f16, 2 i32); u32 ndim (1..4);
            u64 dims[4] (outermost first; unused trailing dims are 1).
    """
    arr = np.ascontiguousarray(arr)
    dt = arr.dtype.newbyteorder("<")
    if dt not in GMRF_DTYPES:
        raise ValueError(f"unsupported dtype {arr.dtype}")
    if not 1 <= arr.ndim <= 4:
        raise ValueError("ndim must be 1..4")
    dims = list(arr.shape) + [1] * (4 - arr.ndim)
    hdr = b"GMRF" + struct.pack("<III4Q", 1, GMRF_DTYPES[dt], arr.ndim, *dims)
    assert len(hdr) == 48
    with open(path, "wb") as f:
        f.write(hdr)
        f.write(arr.astype(dt, copy=False).tobytes(order="C"))


def read_gmrf(path):
    with open(path, "rb") as f:
        hdr = f.read(48)
        magic, (ver, dt, ndim, *dims) = hdr[:4], struct.unpack("<III4Q", hdr[4:])
        assert magic == b"GMRF" and ver == 1
        dtype = {v: k for k, v in GMRF_DTYPES.items()}[dt]
        return np.frombuffer(f.read(), dtype=dtype).reshape(dims[:ndim])


# llama.cpp tensor-name suffix -> (HF module path inside layer N, is_norm)
_LAYER_MAP = {
    "attn_q": ("self_attn.q_proj", False),
    "attn_k": ("self_attn.k_proj", False),
    "attn_v": ("self_attn.v_proj", False),
    "attn_output": ("self_attn.o_proj", False),
    "attn_q_norm": ("self_attn.q_norm", True),
    "attn_k_norm": ("self_attn.k_norm", True),
    "attn_norm": ("input_layernorm", True),
    "post_attention_norm": ("post_attention_layernorm", True),
    "ffn_norm": ("pre_feedforward_layernorm", True),
    "post_ffw_norm": ("post_feedforward_layernorm", True),
    "ffn_gate": ("mlp.gate_proj", False),
    "ffn_up": ("mlp.up_proj", False),
    "ffn_down": ("mlp.down_proj", False),
}


def gguf_to_hf_name(name):
    """Returns (hf_name, is_norm) for a llama.cpp gemma3 tensor name."""
    if name == "token_embd.weight":
        return "model.embed_tokens.weight", False
    if name == "output_norm.weight":
        return "model.norm.weight", True
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in _LAYER_MAP:
        mod, is_norm = _LAYER_MAP[parts[2]]
        return f"model.layers.{int(parts[1])}.{mod}.weight", is_norm
    raise KeyError(f"unexpected tensor {name}")


def hf_text_config(*, n_layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab, sliding_window,
                   layer_types, rope_global=1e6, rope_local=1e4, rope_scale=None, query_pre_attn_scalar=None,
                   eps=1e-6):
    from transformers import Gemma3TextConfig

    full = {"rope_type": "default", "rope_theta": rope_global}
    if rope_scale is not None and rope_scale != 1.0:
        full = {"rope_type": "linear", "factor": float(rope_scale), "rope_theta": rope_global}
    cfg = Gemma3TextConfig(
        vocab_size=vocab, hidden_size=d_model, intermediate_size=d_ff, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, num_key_value_heads=n_kv_heads, head_dim=head_dim,
        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=eps, sliding_window=sliding_window,
        layer_types=list(layer_types),
        rope_parameters={"full_attention": full,
                         "sliding_attention": {"rope_type": "default", "rope_theta": rope_local}},
        query_pre_attn_scalar=query_pre_attn_scalar if query_pre_attn_scalar is not None else head_dim,
        final_logit_softcapping=None, attn_logit_softcapping=None, tie_word_embeddings=True,
        max_position_embeddings=32768, pad_token_id=0, bos_token_id=2, eos_token_id=1,
        attn_implementation="eager", dtype="float32",
    )
    return cfg


def build_hf_model(cfg, tensors):
    """tensors: dict llama.cpp name -> float32 numpy array in GGUF row order ([out, in] for matrices)."""
    import torch
    from transformers import Gemma3ForCausalLM

    with torch.device("meta"):
        model = Gemma3ForCausalLM(cfg)
    sd = {}
    for name, arr in tensors.items():
        hf, is_norm = gguf_to_hf_name(name)
        a = np.asarray(arr, dtype=np.float32)
        if is_norm:
            a = a - np.float32(1.0)  # GGUF stores 1 + w; HF multiplies by 1 + weight
        sd[hf] = torch.from_numpy(np.ascontiguousarray(a))
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False, assign=True)
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"state dict mismatch: missing {missing} unexpected {unexpected}")
    model.tie_weights()
    # Non-persistent buffers (rope inv_freq, embed_scale) are still on meta: rebuild them on the CPU.
    model.model.embed_tokens.embed_scale = torch.tensor(cfg.hidden_size ** 0.5, dtype=torch.float32)
    rot = type(model.model.rotary_emb)(cfg, device="cpu")
    model.model.rotary_emb = rot
    for n, b in model.named_buffers():
        if b.device.type == "meta":
            raise RuntimeError(f"buffer {n} still on meta")
    for n, p in model.named_parameters():
        if p.device.type == "meta":
            raise RuntimeError(f"parameter {n} still on meta")
    model.config._attn_implementation = "eager"
    model.eval()
    return model


def greedy(model, ids, n_new):
    """Pure argmax decoding with the KV cache (no EOS stop, no logits processors).

    Returns (new_ids, margins) where margins[i] = top1 - top2 logit at step i (float32), so tests can
    see where a near-tie makes a divergence legitimate."""
    import torch

    out, margins = [], []
    with torch.no_grad():
        res = model(input_ids=torch.tensor([ids]), use_cache=True)
        past = res.past_key_values
        logits = res.logits[0, -1]
        for step in range(n_new):
            top2 = torch.topk(logits, 2)
            nxt = int(top2.indices[0])
            out.append(nxt)
            margins.append(float(top2.values[0] - top2.values[1]))
            if step + 1 == n_new:
                break
            res = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past = res.past_key_values
            logits = res.logits[0, -1]
    return out, margins


def f32(x):
    """A float32 value as the shortest decimal that round-trips it (for the JSON sidecars)."""
    return float(str(np.float32(x)))
