#!/usr/bin/env python3
"""Tiny random Gemma 3 checkpoints written by Hugging Face transformers, and reference data for them.

Writes into tests/fixtures/ (see tests/fixtures/README.md):
  hf_tiny/                 Gemma3ForCausalLM, bf16, one model.safetensors (transformers 5.x config layout)
  hf_tiny_mm_sharded/      Gemma3ForConditionalGeneration (tinier text + tiny SigLIP), f32, as transformers 5.x saves
                           it with a small max_shard_size: 3 shards + model.safetensors.index.json, names
                           language_model.model.* and vision_tower.* (as in Google's hub files), rope_parameters
  hf_tiny_mm_v4/           the same weights in bf16 with the config in Google's hub form (diff-only text_config,
                           rope_scaling, sliding_window_pattern, eos list) and the names transformers 4.52-4.57 save
                           (model.language_model.*, model.vision_tower.*), plus a tied lm_head.weight
  hf_tiny_logits.bin       float32 logits of Gemma3ForCausalLM (hf_tiny weights, float32, eager attention) at every
                           position of three token sequences (lengths 1, 7, 20)
  hf_tiny_mm_logits.bin    the same for the multimodal model's text path (hf_tiny_mm_sharded weights)
  hf_tiny_expected.json    what a reader must find in each folder: config values, tensors (GGUF names from the gguf
                           package's own HF->GGUF name map, ggml shape order), sample rows as float32
  safetensors_mixed.safetensors  F16/BF16/F32 tensors (incl. a 0-d and a 3-d one) + __metadata__, by the safetensors
                           library; its expected header (offsets from Python's json) and values are in the JSON too

Run from the repository root with the pinned versions of tests/reference/requirements.txt:
  python tests/reference/gen_tiny_hf_model.py
"""
import importlib.metadata
import json
import math
import os
import re
import shutil
import struct
import sys

import numpy as np
import torch
import gguf
import safetensors
import safetensors.torch
import transformers
from transformers import (AutoConfig, Gemma3Config, Gemma3ForCausalLM, Gemma3ForConditionalGeneration,
                          Gemma3TextConfig, SiglipVisionConfig)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
SEED = 1234
SEQ_LENGTHS = (1, 7, 20)

# The main tiny model. head_dim * heads == hidden here, but k/v projections are [32, 64] and the MLP is [80, 64], so
# a transposed shape shows; query_pre_attn_scalar (24) differs from head_dim (16); layer 1 is global.
TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, sliding_window=4, query_pre_attn_scalar=24,
            rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_theta=50000.0, rope_local_base_freq=1000.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"], max_position_embeddings=256,
            rms_norm_eps=1e-6)
# The multimodal one: smaller still; keys left at Gemma3TextConfig's defaults on purpose (query_pre_attn_scalar 256,
# rms_norm_eps, rope bases, max_position_embeddings), so a reader must know those defaults.
TINY_MM_TEXT = dict(vocab_size=128, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=16, sliding_window=4, sliding_window_pattern=2,
                    rope_scaling={"rope_type": "linear", "factor": 8.0})
TINY_VISION = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=8,
                   patch_size=4, vision_use_head=False)


# config.json of Google's checkpoints as published on the hub (text part; vision_config left out), to check the
# reader on the real shapes: the 270M and 1B hold every key, the multimodal ones only what differs from defaults.
def _layer_types(n, period=6):
    return ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]


HUB_CONFIGS = {
    "gemma-3-270m": {
        "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1,
        "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 640, "initializer_range": 0.02, "intermediate_size": 2048, "layer_types": _layer_types(18),
        "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
        "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": None, "rope_theta": 1000000.0,
        "sliding_window": 512, "torch_dtype": "bfloat16", "transformers_version": "4.55.0.dev0",
        "use_bidirectional_attention": False, "use_cache": True, "vocab_size": 262144},
    "gemma-3-1b-it": {
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
        "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
        "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
        "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
        "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144},
    "gemma-3-4b-it": {
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
        "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
        "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                        "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                        "sliding_window": 1024},
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0"},
    "gemma-3-12b-it": {
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
        "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
        "model_type": "gemma3",
        "text_config": {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                        "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0"},
    "gemma-3-27b-it": {
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
        "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
        "model_type": "gemma3",
        "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                        "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
                        "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0"},
}


def randomize(model):
    """Every parameter random (HF initialises norm weights to 0, which would hide a missing 1 + w)."""
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if p.ndim == 1:
                p.copy_(r * 0.5)
            elif "embed" in name:
                p.copy_(r * 0.3)
            else:
                p.copy_(r / math.sqrt(p.shape[-1]))


def clean(folder):
    if os.path.isdir(folder):
        shutil.rmtree(folder)


def load_state(folder):
    """Every tensor of a folder as the safetensors library reads it, upcast to float32."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            for k, v in safetensors.torch.load_file(os.path.join(folder, f)).items():
                out[k] = (v, f)
    return out


def hf_text_name(name):
    """Name of a text-model tensor as Gemma3ForCausalLM spells it, or None for vision tensors."""
    for p in ("language_model.model.", "model.language_model."):
        if name.startswith(p):
            return "model." + name[len(p):]
    if name.startswith(("vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                        "model.multi_modal_projector.")):
        return None
    if name in ("lm_head.weight", "language_model.lm_head.weight"):
        return "lm_head.weight"
    return name


def expected_config(tc):
    """gm_config values from transformers' own parsed text config."""
    rp = tc.rope_parameters
    def scale(p):
        return float(p.get("factor", 1.0)) if p.get("rope_type", "default") == "linear" else 1.0
    eos = tc.eos_token_id[0] if isinstance(tc.eos_token_id, list) else tc.eos_token_id
    return dict(
        n_layers=tc.num_hidden_layers, d_model=tc.hidden_size, d_ff=tc.intermediate_size,
        n_heads=tc.num_attention_heads, n_kv_heads=tc.num_key_value_heads, head_dim=tc.head_dim,
        vocab_size=tc.vocab_size, sliding_window=tc.sliding_window, context_length=tc.max_position_embeddings,
        rms_eps=float(np.float32(tc.rms_norm_eps)),
        rope_base_global=float(rp["full_attention"]["rope_theta"]),
        rope_base_local=float(rp["sliding_attention"]["rope_theta"]),
        rope_scale_global=scale(rp["full_attention"]), rope_scale_local=scale(rp["sliding_attention"]),
        query_scale=float(np.float32(1.0 / math.sqrt(tc.query_pre_attn_scalar))),
        embed_scale=float(np.float32(math.sqrt(tc.hidden_size))),
        attn_softcap=float(tc.attn_logit_softcapping or 0.0), final_softcap=float(tc.final_logit_softcapping or 0.0),
        norms_add_one=True,
        global_layers=[i for i, t in enumerate(tc.layer_types) if t == "full_attention"],
        bos_id=tc.bos_token_id, eos_id=eos, pad_id=tc.pad_token_id)


def expected_folder(folder, tc):
    """Expected tensors (GGUF names by the gguf package's TensorNameMap) and sample rows of one folder."""
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA3, tc.num_hidden_layers)
    state = load_state(folder)
    tensors, by_gguf = [], {}
    for name, (t, f) in sorted(state.items()):
        hf = hf_text_name(name)
        if hf is None or (hf == "lm_head.weight" and tc.tie_word_embeddings):
            continue
        g = name_map.get_name(hf, try_suffixes=(".weight",))
        assert g, name
        dtype = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}[t.dtype]
        tensors.append(dict(name=g, hf=name, file=f, type=dtype, ne=list(reversed(t.shape))))
        by_gguf[g] = t.float()
    n = tc.num_hidden_layers
    picks = [("token_embd.weight", 5), ("token_embd.weight", tc.vocab_size - 1), ("blk.0.attn_q.weight", 0),
             ("blk.0.attn_k.weight", 3), (f"blk.{n - 1}.ffn_down.weight", tc.hidden_size - 1),
             ("blk.1.attn_output.weight", 2), ("output_norm.weight", 0), ("blk.1.attn_q_norm.weight", 0)]
    rows = []
    for g, r in picks:
        t = by_gguf[g]
        v = t[r] if t.ndim == 2 else t
        rows.append(dict(tensor=g, row=r, values=[float(x) for x in v.tolist()]))
    return dict(config=expected_config(tc), tensors=tensors, rows=rows)


def write_logits(path, model, vocab, seqs):
    """Layout (little-endian): "GMLOGIT1", u32 n_seqs, u32 vocab, then per sequence: u32 len, i32 ids[len],
    f32 logits[len][vocab] (row p = logits after ids[0..p])."""
    with open(path, "wb") as f:
        f.write(b"GMLOGIT1")
        f.write(struct.pack("<II", len(seqs), vocab))
        for s in seqs:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([s])).logits[0].float().numpy()
            assert logits.shape == (len(s), vocab) and np.isfinite(logits).all()
            f.write(struct.pack("<I", len(s)))
            f.write(np.asarray(s, dtype="<i4").tobytes())
            f.write(np.ascontiguousarray(logits, dtype="<f4").tobytes())


def sequences(vocab, seed):
    rng = np.random.default_rng(seed)
    return [[2] + rng.integers(3, vocab, size=n - 1).tolist() for n in SEQ_LENGTHS]


def compact_json(obj):
    """Indented JSON with lists of numbers kept on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([-0-9.e,\s]*?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]",
                  text)


def write_mixed(path):
    g = torch.Generator().manual_seed(SEED + 1)
    tensors = {
        "a_f16": (torch.randn(2, 3, generator=g)).to(torch.float16),
        "b_bf16": (torch.randn(4, generator=g)).to(torch.bfloat16),
        "c_f32": torch.randn(1, 2, 2, generator=g),
        "d_scalar": torch.tensor(1.5, dtype=torch.float32),
    }
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt", "note": "gemma.c parser fixture"})
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    out = []
    for name, t in tensors.items():
        h = header[name]
        out.append(dict(name=name, dtype=h["dtype"], shape=h["shape"], offset=8 + n + h["data_offsets"][0],
                        nbytes=h["data_offsets"][1] - h["data_offsets"][0],
                        values=[float(x) for x in t.float().flatten().tolist()]))
    return dict(header_len=n, file_size=os.path.getsize(path), tensors=out)


def legacy_config(mm_config_dict):
    """Google's hub layout: text_config holds only what differs from Gemma3TextConfig's defaults."""
    text = dict(TINY_MM_TEXT, model_type="gemma3_text")
    vision = dict(TINY_VISION, model_type="siglip_vision_model")
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "boi_token_index": 255999, "eoi_token_index": 256000, "eos_token_id": [1, 106],
        "image_token_index": mm_config_dict["image_token_index"], "initializer_range": 0.02,
        "mm_tokens_per_image": mm_config_dict["mm_tokens_per_image"], "model_type": "gemma3",
        "text_config": text, "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
        "vision_config": vision,
    }


def v4_name(name):
    """transformers 4.52-4.57 naming of a Gemma3ForConditionalGeneration tensor."""
    for hub, v4 in (("language_model.model.", "model.language_model."), ("vision_tower.", "model.vision_tower."),
                    ("multi_modal_projector.", "model.multi_modal_projector.")):
        if name.startswith(hub):
            return v4 + name[len(hub):]
    raise ValueError(name)


def main():
    torch.manual_seed(SEED)
    os.makedirs(FIX, exist_ok=True)
    expected = dict(generator=dict(transformers=transformers.__version__, torch=torch.__version__.split("+")[0],
                                   safetensors=safetensors.__version__, gguf=importlib.metadata.version("gguf")))

    # ---- text-only model, bf16, one file; reference logits in float32 + eager attention from those bf16 weights ----
    model = Gemma3ForCausalLM(Gemma3TextConfig(**TINY))
    randomize(model)
    d_tiny = os.path.join(FIX, "hf_tiny")
    clean(d_tiny)
    model.to(torch.bfloat16).save_pretrained(d_tiny, safe_serialization=True)
    expected["hf_tiny"] = expected_folder(d_tiny, AutoConfig.from_pretrained(d_tiny))
    ref = Gemma3ForCausalLM.from_pretrained(d_tiny, dtype=torch.float32, attn_implementation="eager").eval()
    seqs = sequences(TINY["vocab_size"], SEED)
    write_logits(os.path.join(FIX, "hf_tiny_logits.bin"), ref, TINY["vocab_size"], seqs)
    expected["hf_tiny_logits"] = dict(folder="hf_tiny", sequences=seqs)

    # ---- multimodal, f32, sharded, as transformers 5.x saves it ----
    mm_cfg = Gemma3Config(text_config=Gemma3TextConfig(**TINY_MM_TEXT), vision_config=SiglipVisionConfig(**TINY_VISION),
                          mm_tokens_per_image=4)
    mm = Gemma3ForConditionalGeneration(mm_cfg)
    randomize(mm)
    mm = mm.to(torch.bfloat16).to(torch.float32)  # bf16-exact values, so the bf16 copy holds the same numbers
    d_mm, d_v4 = os.path.join(FIX, "hf_tiny_mm_sharded"), os.path.join(FIX, "hf_tiny_mm_v4")
    for d in (d_mm, d_v4):
        clean(d)
    mm.save_pretrained(d_mm, safe_serialization=True, max_shard_size="40KB")
    shards = [f for f in os.listdir(d_mm) if f.endswith(".safetensors")]
    assert len(shards) >= 2 and os.path.exists(os.path.join(d_mm, "model.safetensors.index.json")), shards
    mm_ref = Gemma3ForConditionalGeneration.from_pretrained(d_mm, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
    mm_vocab = TINY_MM_TEXT["vocab_size"]
    mm_seqs = sequences(mm_vocab, SEED + 2)
    # the text path of the multimodal model is Gemma3ForCausalLM with the same weights
    text_only = Gemma3ForCausalLM(mm_ref.config.text_config)
    text_only.model.load_state_dict(mm_ref.model.language_model.state_dict())
    text_only.lm_head.weight = text_only.model.embed_tokens.weight
    text_only.config._attn_implementation = "eager"
    with torch.no_grad():
        a = mm_ref(input_ids=torch.tensor([mm_seqs[2]])).logits
        b = text_only.eval()(input_ids=torch.tensor([mm_seqs[2]])).logits
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    write_logits(os.path.join(FIX, "hf_tiny_mm_logits.bin"), mm_ref, mm_vocab, mm_seqs)
    expected["hf_tiny_mm_logits"] = dict(folder="hf_tiny_mm_sharded", sequences=mm_seqs)

    # ---- the same weights, bf16, one file, config as on Google's hub, names as transformers 4.52-4.57 save ----
    os.makedirs(d_v4)
    with open(os.path.join(d_mm, "config.json")) as f:
        mm_dict = json.load(f)
    with open(os.path.join(d_v4, "config.json"), "w") as f:
        json.dump(legacy_config(mm_dict), f, indent=2, sort_keys=True)
        f.write("\n")
    state = {k: v for k, (v, _) in load_state(d_mm).items()}
    v4 = {v4_name(k): v.to(torch.bfloat16).contiguous() for k, v in state.items()}
    v4["lm_head.weight"] = v4["model.language_model.embed_tokens.weight"].clone()
    safetensors.torch.save_file(v4, os.path.join(d_v4, "model.safetensors"), metadata={"format": "pt"})
    back = Gemma3ForConditionalGeneration.from_pretrained(d_v4, dtype=torch.float32)  # transformers reads it back
    sd_back = back.state_dict()
    for k, v in mm.state_dict().items():
        assert torch.equal(v, sd_back[k]), k
    for d in (d_mm, d_v4):
        expected[os.path.basename(d)] = expected_folder(d, AutoConfig.from_pretrained(d).text_config)

    # ---- the hub's config.json files, read by transformers ----
    d_cfg = os.path.join(FIX, "hf_configs")
    clean(d_cfg)
    os.makedirs(d_cfg)
    expected["hf_configs"] = {}
    for name, cfg in HUB_CONFIGS.items():
        with open(os.path.join(d_cfg, name + ".json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        parsed = (Gemma3Config if cfg["model_type"] == "gemma3" else Gemma3TextConfig).from_dict(cfg)
        expected["hf_configs"][name] = expected_config(parsed.text_config if cfg["model_type"] == "gemma3" else parsed)

    # ---- parser fixture ----
    expected["safetensors_mixed"] = write_mixed(os.path.join(FIX, "safetensors_mixed.safetensors"))

    with open(os.path.join(FIX, "hf_tiny_expected.json"), "w") as f:
        f.write(compact_json(expected) + "\n")
    total = 0
    for root, _, files in os.walk(FIX):
        for fn in files:
            if "hf_tiny" in root or fn.startswith(("hf_tiny", "safetensors_mixed")):
                total += os.path.getsize(os.path.join(root, fn))
    print(f"wrote fixtures: {total / 1024:.0f} KiB in all")


if __name__ == "__main__":
    sys.exit(main())
