#!/usr/bin/env python3
"""Python's repr() of Gemma 3 token pieces, for tests/unit/test_token_repr.c.

The seed labels its logits plot with repr(tokenizer.tokens[i]), where tokens are the SentencePiece
pieces with U+2581 replaced by ' '. Pieces come from the real model's GGUF vocabulary (read with
the gguf package): every piece holding a character str.isprintable() rejects or a quote or
backslash, plus a fixed sample of ordinary pieces and a few hand-written strings.
    python tests/reference/gen_token_repr_fixtures.py MODEL.gguf tests/fixtures/token_repr.json
"""
import json
import random
import sys
import unicodedata

import gguf


def main(model, path):
    reader = gguf.GGUFReader(model)
    field = reader.fields["tokenizer.ggml.tokens"]
    pieces = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    special = [p for p in pieces
               if any(not c.isprintable() and c != " " for c in p) or any(c in "'\"\\" for c in p)]
    rnd = random.Random(3)
    ordinary = rnd.sample(pieces, 300)
    handmade = ["\u2581Mary", "\n", "\n\n", "'", '"', "'\"", "it's", 'say "hi"', "\\", "a\tb\r",
                "\u00e9t\u00e9", "\u4e2d\u6587", "\U0001F600", "\u00a0x\u3000", "\u200b", "\x7f\x1b",
                "\U000E0001", "<0x0A>", "<start_of_turn>", ""]
    cases = [{"piece": p, "repr": repr(p.replace("\u2581", " "))} for p in handmade + special + ordinary]
    data = {"generator": "tests/reference/gen_token_repr_fixtures.py", "python": sys.version.split()[0],
            "unicode": unicodedata.unidata_version, "cases": cases}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"{len(cases)} cases ({len(special)} special pieces)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
