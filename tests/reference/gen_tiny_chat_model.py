#!/usr/bin/env python3
"""A tiny random Gemma 3 model WITH a tokenizer, for robustness tests that need the whole chat path
(CLI generate/chat, SIGINT, MPI rank loss, load/free cycles, the chat fuzz harness).

Writes tests/fixtures/hf_tiny_chat/:
  config.json, model.safetensors   Gemma3ForCausalLM written by transformers save_pretrained, bf16, seed 4321,
                                   vocab 962 = the ids of tests/fixtures/tokenizer_tiny/tokenizer.json
                                   (<start_of_turn> 959, <end_of_turn> 960), hidden 32, 2 layers
  tokenizer.json                   a copy of tests/fixtures/tokenizer_tiny/tokenizer.json (HF tokenizers reads it
                                   back with the same vocabulary size: the script asserts so)

Its outputs are random text: tests use it for behaviour (exit codes, messages, memory), never for values.
Run from the repository root with the pinned versions of tests/reference/requirements.txt:
  python tests/reference/gen_tiny_chat_model.py
"""
import math
import os
import shutil

import torch
import tokenizers
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(FIX, "hf_tiny_chat")
TOK = os.path.join(FIX, "tokenizer_tiny", "tokenizer.json")
SEED = 4321


def main():
    tok = tokenizers.Tokenizer.from_file(TOK)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    assert vocab == 962, vocab
    assert tok.token_to_id("<end_of_turn>") == 960 and tok.token_to_id("<start_of_turn>") == 959
    cfg = Gemma3TextConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                           layer_types=["sliding_attention", "full_attention"], max_position_embeddings=4096,
                           query_pre_attn_scalar=16, bos_token_id=2, eos_token_id=1, pad_token_id=0)
    torch.manual_seed(SEED)
    model = Gemma3ForCausalLM(cfg)
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            p.copy_(r * 0.5 if p.ndim == 1 else r / math.sqrt(p.shape[-1]))
    model = model.to(torch.bfloat16)
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    model.save_pretrained(OUT)
    for extra in ("generation_config.json",):
        p = os.path.join(OUT, extra)
        if os.path.exists(p):
            os.remove(p)
    shutil.copyfile(TOK, os.path.join(OUT, "tokenizer.json"))
    print("wrote", OUT, sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
