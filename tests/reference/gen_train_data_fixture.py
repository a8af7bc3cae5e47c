#!/usr/bin/env python3
"""A JSONL training file with good and malformed lines, and what a loader must make of it.

Writes tests/fixtures/train_data/:
  sample.jsonl    prompt/response and text examples (UTF-8, special tokens in text), blank lines, and malformed lines
  expected.json   for seq_len 24: per kept example its token ids and loss mask, computed with HF `tokenizers` on
                  tests/fixtures/tokenizer_tiny/tokenizer.json following the seed's Seq2SeqTask
                  (prompt = <bos> + encode("<start_of_turn>user\\n{p}<end_of_turn>\\n<start_of_turn>model\\n"),
                  response = encode("{r}<end_of_turn>"), mask[i] = 1 when ids[i + 1] is a response token;
                  text: <bos> + encode(text), every mask 1), then cut to seq_len; the line numbers of malformed
                  lines and of examples skipped for lack of response tokens; the summary counts.

Run from the repository root: python tests/reference/gen_train_data_fixture.py
"""
import json
import os

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures")
SEQ_LEN = 24
BOS = 2

LINES = [
    '{"prompt": "Convert: March 5, 2021", "response": "2021-03-05"}',
    '',
    '{"text": "The quick brown fox jumps over the lazy dog."}',
    '{"prompt": "caf\\u00e9 \\u4e2d\\u6587", "response": "ok"}',
    '{"prompt": "missing response"}',
    'this is not json',
    '[1, 2, 3]',
    '{"prompt": 5, "response": "x"}',
    '   ',
    '{"text": ""}',
    '{"prompt": "a", "response": "b", "text": "c"}',
    '{"prompt": "' + "long prompt " * 12 + '", "response": "cut away"}',
    '{"prompt": "short", "response": "' + "a long answer that will be cut " * 3 + '"}',
    '{"response": "no prompt"}',
    '{"prompt": "x", "response": "y"',
    '{"prompt": "<start_of_turn> inside", "response": "fine"}',
]


def main():
    tok = Tokenizer.from_file(os.path.join(FIX, "tokenizer_tiny", "tokenizer.json"))
    enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    out_dir = os.path.join(FIX, "train_data")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "sample.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(LINES) + "\n")
    examples, malformed, no_loss, truncated, blank = [], [], [], 0, 0
    for no, line in enumerate(LINES, 1):
        if not line.strip():
            blank += 1
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            malformed.append(no)
            continue
        if not isinstance(obj, dict):
            malformed.append(no)
            continue
        has_text, has_pr = "text" in obj, "prompt" in obj or "response" in obj
        if has_text == has_pr or (has_pr and not ("prompt" in obj and "response" in obj)):
            malformed.append(no)
            continue
        if has_text:
            if not isinstance(obj["text"], str) or not obj["text"]:
                malformed.append(no)
                continue
            ids = [BOS] + enc(obj["text"])
            mask = [1] * (len(ids) - 1)
        else:
            if not isinstance(obj["prompt"], str) or not isinstance(obj["response"], str):
                malformed.append(no)
                continue
            p = [BOS] + enc(f"<start_of_turn>user\n{obj['prompt']}<end_of_turn>\n<start_of_turn>model\n")
            r = enc(f"{obj['response']}<end_of_turn>")
            ids = p + r
            mask = [1 if i + 1 >= len(p) else 0 for i in range(len(ids) - 1)]
        if len(ids) > SEQ_LEN:
            truncated += 1
            ids, mask = ids[:SEQ_LEN], mask[:SEQ_LEN - 1]
        if sum(mask) == 0:
            no_loss.append(no)
            continue
        examples.append(dict(line=no, ids=ids, mask=mask))
    expected = dict(seq_len=SEQ_LEN, examples=examples, malformed_lines=malformed, no_loss_lines=no_loss,
                    summary=dict(lines=len(LINES), examples=len(examples), blank=blank, malformed=len(malformed),
                                 truncated=truncated, no_loss=len(no_loss),
                                 tokens=sum(len(e["ids"]) - 1 for e in examples),
                                 loss_tokens=sum(sum(e["mask"]) for e in examples)))
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(expected["summary"])


if __name__ == "__main__":
    main()
