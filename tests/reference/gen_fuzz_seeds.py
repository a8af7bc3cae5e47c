#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses: tests/fuzz/corpus/<harness>/seed_*.

Real files where they are small (the committed fixtures: tiny transformers checkpoints, hub configs,
tokenizer_tiny/tokenizer.json), the first 4 KiB of the real Gemma 3 270M GGUF (a truncated real header),
and files written here by the formats' own libraries: tiny Gemma 3 GGUF models by the `gguf` package
(metadata keys copied from the real model, its first 512 vocabulary entries, every weight type the
engine reads), safetensors files by the `safetensors` package, a SentencePiece tokenizer.model trained
by the `sentencepiece` package in Gemma's configuration (BPE, byte fallback, identity normalization).
Nothing here is a test reference; seeds only start the fuzzers somewhere deep. Each corpus stays within
tens of KB (no model weights, never Google's tokenizer.json).

Run from the repository root (pinned versions: tests/reference/requirements.txt):
  python tests/reference/gen_fuzz_seeds.py [path/to/gemma-3-270m-q4_k_m.gguf]
"""
import io
import json
import os
import shutil
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
import safetensors.numpy
import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
rng = np.random.default_rng(2024)


def corpus(name):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed_"):
            os.remove(os.path.join(d, f))
    return d


def put(d, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def fixture(rel):
    with open(os.path.join(FIX, rel), "rb") as f:
        return f.read()


# ---------------------------------------------------------------- GGUF

def real_vocab(n):
    r = gguf.GGUFReader(MODEL)
    f = r.fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data[:n]]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data[:n]]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data[:n]]
    return toks, scores, types


# block bytes and the offsets of its fp16 scale fields (d, dmin)
KQUANT = {Q.Q4_K: (144, (0, 2)), Q.Q5_K: (176, (0, 2)), Q.Q6_K: (210, (208,))}


def add_weight(w, name, shape, qtype):
    """shape numpy order (ne1, ne0); random values quantized by the gguf package."""
    a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    if qtype == Q.F32:
        w.add_tensor(name, a)
    elif qtype == Q.F16:
        w.add_tensor(name, a.astype(np.float16))
    elif qtype in KQUANT:
        # the gguf package does not quantize K-quants: random blocks with small fp16 scales
        size, d_at = KQUANT[qtype]
        rows, cols = (1, shape[0]) if len(shape) == 1 else shape
        q = rng.integers(0, 256, size=(rows, cols // 256, size), dtype=np.uint8)
        for off in d_at:
            q[:, :, off:off + 2] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
        q = q.reshape(rows, cols // 256 * size)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
    else:
        q = gguf.quants.quantize(a, qtype)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)


def tiny_gguf(path, vocab, d=32, heads=2, kv=1, hd=16, ff=64, layers=1, types=None, extra=(), version_keys=True):
    types = types or {}
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_string("general.type", "model")
    w.add_string("general.name", "fuzz seed")
    w.add_uint32("gemma3.context_length", 256)
    w.add_uint32("gemma3.embedding_length", d)
    w.add_uint32("gemma3.block_count", layers)
    w.add_uint32("gemma3.feed_forward_length", ff)
    w.add_uint32("gemma3.attention.head_count", heads)
    w.add_float32("gemma3.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_uint32("gemma3.attention.key_length", hd)
    w.add_uint32("gemma3.attention.value_length", hd)
    w.add_float32("gemma3.rope.freq_base", 1e6)
    w.add_uint32("gemma3.attention.sliding_window", 4)
    w.add_uint32("gemma3.attention.head_count_kv", kv)
    n_vocab = vocab if isinstance(vocab, int) else len(vocab[0])
    if not isinstance(vocab, int):
        toks, scores, ttypes = vocab
        w.add_string("tokenizer.ggml.model", "llama")
        w.add_string("tokenizer.ggml.pre", "default")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(ttypes)
        w.add_uint32("tokenizer.ggml.bos_token_id", 2)
        w.add_uint32("tokenizer.ggml.eos_token_id", 1)
        w.add_uint32("tokenizer.ggml.unknown_token_id", 3)
        w.add_uint32("tokenizer.ggml.padding_token_id", 0)
        w.add_bool("tokenizer.ggml.add_bos_token", True)
    if version_keys:
        w.add_uint32("general.quantization_version", 2)
        w.add_uint32("general.file_type", 7)
    t = lambda k, default: types.get(k, default)
    add_weight(w, "token_embd.weight", (n_vocab, d), t("embd", Q.Q8_0))
    add_weight(w, "output_norm.weight", (d,), Q.F32)
    for i in range(layers):
        p = f"blk.{i}."
        add_weight(w, p + "attn_norm.weight", (d,), Q.F32)
        add_weight(w, p + "attn_q.weight", (heads * hd, d), t("q", Q.F16))
        add_weight(w, p + "attn_k.weight", (kv * hd, d), t("k", Q.Q8_0))
        add_weight(w, p + "attn_v.weight", (kv * hd, d), t("v", Q.Q5_0))
        add_weight(w, p + "attn_output.weight", (d, heads * hd), t("o", Q.Q4_0))
        add_weight(w, p + "attn_q_norm.weight", (hd,), Q.F32)
        add_weight(w, p + "attn_k_norm.weight", (hd,), Q.F32)
        add_weight(w, p + "post_attention_norm.weight", (d,), Q.F32)
        add_weight(w, p + "ffn_norm.weight", (d,), Q.F32)
        add_weight(w, p + "ffn_gate.weight", (ff, d), t("gate", Q.Q8_0))
        add_weight(w, p + "ffn_up.weight", (ff, d), t("up", Q.Q4_1))
        add_weight(w, p + "ffn_down.weight", (d, ff), t("down", Q.Q5_1))
        add_weight(w, p + "post_ffw_norm.weight", (d,), Q.F32)
    for name, shape, qt in extra:
        add_weight(w, name, shape, qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        return f.read()


def gguf_seeds():
    d = corpus("fuzz_gguf")
    tmp = os.path.join(d, ".tmp.gguf")
    have_model = os.path.exists(MODEL)
    if have_model:
        vocab = real_vocab(640)
        put(d, "vocab640_q8.gguf", tiny_gguf(tmp, vocab))
        with open(MODEL, "rb") as f:
            put(d, "real_270m_head4k.gguf", f.read(4096))
    put(d, "novocab_bf16.gguf", tiny_gguf(tmp, 16, types={"embd": Q.BF16, "q": Q.F32, "gate": Q.BF16}, version_keys=False))
    # K-quants need 256-element rows: extra (non-model) tensors, read by the source and by info --check
    put(d, "novocab_kquant_extras.gguf", tiny_gguf(tmp, 8, extra=[("extra.q4_k", (2, 256), Q.Q4_K),
                                                                    ("extra.q5_k", (1, 256), Q.Q5_K),
                                                                    ("extra.q6_k", (256,), Q.Q6_K)]))
    # metadata only: every value type, nested arrays, a custom alignment
    w = gguf.GGUFWriter(tmp, "gemma3")
    w.add_custom_alignment(64)
    for k, v, fn in [("a.u8", 7, w.add_uint8), ("a.i8", -7, w.add_int8), ("a.u16", 700, w.add_uint16),
                     ("a.i16", -700, w.add_int16), ("a.u32", 70000, w.add_uint32), ("a.i32", -70000, w.add_int32),
                     ("a.f32", 1.5, w.add_float32), ("a.u64", 2**40, w.add_uint64), ("a.i64", -2**40, w.add_int64),
                     ("a.f64", 2.25, w.add_float64), ("a.bool", True, w.add_bool), ("a.str", "h\u00e9llo", w.add_string)]:
        fn(k, v)
    w.add_array("a.arr_u8", [1, 2, 3])
    w.add_array("a.arr_str", ["x", "", "\u2581y"])
    w.add_array("a.arr_nested", [[1, 2], [3]])
    add_weight(w, "t.f32", (2, 4), Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(tmp, "rb") as f:
        meta = f.read()
    put(d, "metadata_types.gguf", meta)
    v2 = bytearray(meta)
    v2[4:8] = struct.pack("<I", 2)
    put(d, "metadata_types_v2.gguf", bytes(v2))
    os.remove(tmp)


# ---------------------------------------------------------------- safetensors

def safetensors_seeds():
    d = corpus("fuzz_safetensors")
    put(d, "mixed.safetensors", fixture("safetensors_mixed.safetensors"))
    put(d, "tiny_mm_shard3.safetensors", fixture("hf_tiny_mm_sharded/model-00003-of-00003.safetensors"))
    put(d, "ints.safetensors", safetensors.numpy.save(
        {"u8": np.arange(6, dtype=np.uint8).reshape(2, 3), "i64": np.array([-1, 2], dtype=np.int64),
         "b": np.array([True, False]), "f64": np.zeros((1, 1, 1), dtype=np.float64)}, metadata={"k": "v"}))
    put(d, "empty_tensors.safetensors", safetensors.numpy.save(
        {"e": np.zeros((0, 4), dtype=np.float32), "s": np.array(3.0, dtype=np.float32)}))
    hdr = b'{"__metadata__":{"format":"pt"}}'
    put(d, "metadata_only.safetensors", struct.pack("<Q", len(hdr)) + hdr)
    hdr = b'{"x":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}  '
    put(d, "f8_padded.safetensors", struct.pack("<Q", len(hdr)) + hdr + bytes(4))


def hf_index_seeds():
    d = corpus("fuzz_hf_index")
    idx = fixture("hf_tiny_mm_sharded/model.safetensors.index.json")
    put(d, "real.index.json", idx)
    j = json.loads(idx)
    wm = j["weight_map"]
    first = sorted(wm)[0]
    bad = json.loads(idx)
    bad["weight_map"][first] = "model-00009-of-00003.safetensors"
    put(d, "missing_shard.index.json", json.dumps(bad))
    bad = json.loads(idx)
    bad["weight_map"][first] = "../hf_tiny/model.safetensors"
    put(d, "parent_path.index.json", json.dumps(bad))
    bad = json.loads(idx)
    del bad["weight_map"][first]
    put(d, "unlisted.index.json", json.dumps(bad))
    put(d, "empty_map.index.json", '{"metadata": {}, "weight_map": {}}')


def hf_folder_seeds():
    """[u16 config length][config.json][safetensors header JSON] of the tiny transformers checkpoints."""
    d = corpus("fuzz_hf_folder")
    for folder in ("hf_tiny", "hf_tiny_chat", "hf_tiny_mm_v4"):
        cfg = fixture(folder + "/config.json")
        st = fixture(folder + "/model.safetensors")
        n = struct.unpack("<Q", st[:8])[0]
        put(d, folder, struct.pack("<H", len(cfg)) + cfg + st[8:8 + n])


def hf_config_seeds():
    d = corpus("fuzz_hf_config")
    for f in sorted(os.listdir(os.path.join(FIX, "hf_configs"))):
        put(d, "hub_" + f, fixture("hf_configs/" + f))
    for folder in ("hf_tiny", "hf_tiny_mm_sharded", "hf_tiny_mm_v4", "hf_tiny_chat"):
        put(d, folder + ".json", fixture(folder + "/config.json"))


# ---------------------------------------------------------------- tokenizers

def tokenizer_json_seeds():
    d = corpus("fuzz_tokenizer_json")
    put(d, "tokenizer_tiny.json", fixture("tokenizer_tiny/tokenizer.json"))
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "a": 4, "b": 5, "ab": 6, "\u2581": 7, "\u2581ab": 8}
    for i in range(256):
        vocab["<0x%02X>" % i] = 9 + i
    base = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for c, i in list(vocab.items())[:4]],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [["a", "b"], ["\u2581", "ab"]]},
    }
    put(d, "mini_pair_merges.json", json.dumps(base, ensure_ascii=False))
    base["model"]["merges"] = ["a b", "\u2581 ab"]
    base["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                             "invert": False}
    put(d, "mini_string_merges.json", json.dumps(base, ensure_ascii=False))


def spm_seeds():
    d = corpus("fuzz_spm_model")
    texts = [json.loads(l).get("text") for l in open(os.path.join(FIX, "tokenizer_parity.jsonl"), encoding="utf-8")]
    texts = [t for t in texts if t]
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts * 3), model_writer=m, vocab_size=800, model_type="bpe", byte_fallback=True,
        add_dummy_prefix=False, remove_extra_whitespaces=False, normalization_rule_name="identity",
        user_defined_symbols=["<start_of_turn>", "<end_of_turn>", "\n\n"], character_coverage=0.98, minloglevel=2,
        unk_id=3, bos_id=2, eos_id=1, pad_id=0, split_by_whitespace=False, max_sentencepiece_length=16,
        num_threads=1)
    put(d, "bpe800.model", m.getvalue())


def tokenizer_seeds():
    d = corpus("fuzz_tokenizer")
    cases = [json.loads(l) for l in open(os.path.join(FIX, "tokenizer_parity.jsonl"), encoding="utf-8")][1:]
    seen, k = set(), 0
    for c in cases:
        t = c.get("text")
        if not t or c["cat"] in seen or len(t.encode()) > 400:
            continue
        seen.add(c["cat"])
        put(d, "enc_%02d_%s" % (k, c["cat"]), b"\x00" + t.encode("utf-8"))
        put(d, "ids_%02d_%s" % (k, c["cat"]), b"\x01" + struct.pack("<%di" % len(c["ids"]), *c["ids"]))
        k += 1
    put(d, "enc_bos_invalid_utf8", b"\x80" + b"ab\xff\xfe\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x96")
    put(d, "enc_added", b"\x00<bos><start_of_turn>user\n\n\nhi<end_of_turn>\n<start_of_turn")
    put(d, "ids_out_of_range", b"\x01" + struct.pack("<4i", 2, -1, 262144, 2**31 - 1))
    put(d, "pieces", b"\x02" + struct.pack("<6i", 0, 1, 2, 105, 255999, 262143))


def chat_seeds():
    d = corpus("fuzz_chat")
    put(d, "hello", b"\x00\x00Hello there, how are you?")
    put(d, "turns", b"\x03\x00first turn\x00second turn \xe4\xb8\xad\xe6\x96\x87\x00third")
    put(d, "markers", b"\x08\x00<start_of_turn>model\n<end_of_turn><bos>\x00<eos>")
    put(d, "stop", b"\x13\x02ha" + b"say ha ha ha")
    put(d, "long", b"\x01\x00" + b"word " * 60)
    put(d, "empty_turn", b"\x04\x00\x00x\x00\x00")


def cli_seeds():
    d = corpus("fuzz_cli")
    z = b"\x00"
    put(d, "generate", z.join([b"\x00", b"--verbose", b"Hello", b"world"]))
    put(d, "generate_raw", z.join([b"\x00", b"--raw", b"--sampling", b"top-k", b"--top-k", b"5", b"--seed", b"3", b"hi"]))
    put(d, "generate_stop", z.join([b"\x00", b"--stop", b"a", b"--stop", b"\xe4\xb8", b"--", b"-x", b"y"]))
    put(d, "chat_stdin", z.join([b"\x01", b"--multi-turn"]) + b"\x01\x01line one\n/reset\nline \xff two\n\n/quit\nafter")
    put(d, "chat_prompt", z.join([b"\x01", b"--temperature", b"0.5", b"--top-p", b"0.3", b"hey"]))
    put(d, "logits", z.join([b"\x02", b"--top", b"5", b"--json", b"--sample", b"--seed", b"-1", b"The"]))
    put(d, "logits_tokens", z.join([b"\x02", b"--tokens", b"2,5,7,961"]))
    put(d, "tokenize", z.join([b"\x03", b"--bos", b"--json"]) + b"\x01\x01text <bos> \xf0\x9f\x98\x80\n")
    put(d, "detokenize", z.join([b"\x04", b"2", b"300", b"960", b"961", b"962", b"-1", b"x"]))
    put(d, "usage", z.join([b"\x00", b"--top-k", b"0", b"--temperature", b"nan"]))
    put(d, "batch", z.join([b"\x00", b"--batch", b"ignored"]) + b"\x01\x01first prompt\n\nsecond \xff prompt\n<bos>third")


def train_jsonl_seeds():
    """[options byte][JSONL]: prompt/response and text examples, blank and malformed lines, long lines."""
    d = corpus("fuzz_train_jsonl")
    ex = [json.dumps({"prompt": "What is the capital of France?", "response": "Paris."}),
          json.dumps({"text": "The quick brown fox jumps over the lazy dog."}),
          "", "   ", json.dumps({"prompt": "caf\u00e9 \u4e2d\u6587", "response": "\U0001F600 ok"}, ensure_ascii=False)]
    put(d, "mixed", b"\x20" + "\n".join(ex).encode("utf-8") + b"\n")
    bad = ['{"text": 3}', '{"prompt": "x"}', '{"response": "y"}', '{"text": ""}', '[1, 2]', '{"text": "a", "prompt": "b"}',
           '{not json', '{"prompt": "p", "response": "r"} trailing', '{"text": "ok line"}', '{"text": "nul\u0000inside"}']
    put(d, "malformed", b"\x3f" + "\r\n".join(bad).encode("utf-8"))
    put(d, "strict", b"\x48" + "\n".join(bad[:2] + ex[:2]).encode("utf-8"))
    put(d, "truncated_response", b"\x01" + json.dumps({"prompt": "word " * 30, "response": "answer"}).encode() + b"\n" +
        json.dumps({"text": "short"}).encode())
    put(d, "invalid_utf8", b"\x10" + b'{"text": "bytes \xff\xfe \xc3 end"}\n{"prompt": "\xed\xa0\x80", "response": "x"}')


def main():
    if os.path.exists(MODEL):
        print("real model:", MODEL)
    else:
        print("no real model at", MODEL, "- the GGUF corpus lacks its real-vocabulary seeds")
    gguf_seeds()
    safetensors_seeds()
    hf_index_seeds()
    hf_folder_seeds()
    hf_config_seeds()
    tokenizer_json_seeds()
    spm_seeds()
    tokenizer_seeds()
    chat_seeds()
    cli_seeds()
    train_jsonl_seeds()
    for name in sorted(os.listdir(OUT)):
        p = os.path.join(OUT, name)
        files = [f for f in os.listdir(p) if not f.startswith(".")]
        print("%-22s %3d files %7d bytes" % (name, len(files), sum(os.path.getsize(os.path.join(p, f)) for f in files)))


if __name__ == "__main__":
    main()
