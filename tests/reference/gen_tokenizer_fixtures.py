#!/usr/bin/env python3
"""Reference fixtures for the C tokenizer, made with Hugging Face `tokenizers` (pinned in requirements.txt).

Writes (into tests/fixtures/):
  tokenizer_parity.jsonl      Gemma 3 token ids for a corpus of >= 400 strings, from Google's tokenizer.json
                              (../shared/data/gemma3-tokenizer.json.gz; never committed itself). Line 1 is a header
                              with the HF "special" ids; then one case per line:
                              {"cat", "text" | "hex", "ids", "dec"?, "no_gguf"?}
                              "hex" holds raw bytes (NUL bytes, invalid UTF-8). "dec" = HF decode(ids,
                              skip_special_tokens=True).
  tokenizer_decode_pieces.jsonl  HF decode of single ids and of short id runs (byte pieces included).
  tokenizer_tiny/tokenizer.json  a small byte-fallback BPE trained here with HF `tokenizers` (Gemma's normalizer
                              and pre-tokenizer, special and non-special added tokens, one added token outside the
                              model vocabulary) and tokenizer_tiny_parity.jsonl: its ids for a corpus.

Invalid UTF-8: HF only takes str, so those cases get ids as follows: the bytes are split into maximal valid UTF-8
runs and single invalid bytes; each run is encoded by HF, each invalid byte becomes its <0xXX> piece. This is what
byte fallback does for a character missing from the vocabulary, and it is exact because no merge involves a byte
piece (asserted below), so a byte piece is a barrier BPE never merges across.

Also checks, and fails loudly otherwise, that the GGUF vocabulary (tokens with ' ' read as U+2581) equals
tokenizer.json's, that the HF added tokens are exactly the GGUF control + user-defined pieces (plus
<image_soft_token> 262144, absent from the GGUF), and that the merges list is reproduced exactly by ranking
splits of NORMAL / USER_DEFINED pieces by (score desc, left chars desc, right chars desc, id asc).

Usage: python tests/reference/gen_tokenizer_fixtures.py [--gguf models/gemma-3-270m-q4_k_m.gguf]
"""
import argparse
import gzip
import json
import os
import random
import unicodedata

import tokenizers
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "gemma3-tokenizer.json.gz")
if not os.path.exists(DATA):
    DATA = "/work/shared/data/gemma3-tokenizer.json.gz"

EXPECTED_TOKENIZERS = "0.23.3"


def load_gemma():
    raw = gzip.open(DATA).read().decode("utf-8")
    return Tokenizer.from_str(raw), json.loads(raw)


# ----------------------------------------------------------------------------------------------- corpus

ENGLISH = [
    "Hello world!", "hello", " hello", "Hello, World.", "The quick brown fox jumps over the lazy dog.",
    "My name is", "I can't believe it's not butter!", "Don't stop me now; I'm having such a good time.",
    "What's the weather like in San Francisco today?", "e.g. i.e. etc. vs. Mr. Mrs. Dr.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "THIS IS ALL CAPS AND SHOUTING", "camelCaseIdentifierWithManyParts", "snake_case_identifier_here",
    "Supercalifragilisticexpialidocious", "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
    "A", "a", "I", ".", "!", "?", "...", "—", "–", "\"quoted\"", "'single'", "“smart quotes” and ‘single’",
    "Tokenization is the process of splitting text into tokens.",
    "Gemma is a family of lightweight, state-of-the-art open models.",
    "The year 2024 was a leap year; 2025 is not.", "She sells sea shells by the sea shore.",
    "To be, or not to be, that is the question:", "All work and no play makes Jack a dull boy.",
    "user\nWrite a poem about the sea.", "model\nThe sea is vast and deep,",
    "Once upon a time, in a land far, far away, there lived a king.",
    "(parentheses) [brackets] {braces} <angles>", "#hashtag @mention $dollar %percent ^caret &amp *star",
    "a-b_c.d/e\\f|g~h`i", "Ünïcödé àccénts éverywhere: café, naïve, résumé, coöperate, Zürich.",
]

WHITESPACE = (
    [" " * n for n in range(1, 41)]
    + ["\t" * n for n in (1, 2, 3, 5, 8, 31, 32, 40)]
    + ["\n" * n for n in (1, 2, 3, 7, 31, 32, 33, 64)]
    + ["a" + " " * n + "b" for n in (1, 2, 3, 4, 7, 16, 31, 32, 33)]
    + [" leading", "trailing ", "  both  ", "\ttab\tseparated\tvalues\t", "line1\nline2\n\nline4\n",
       "windows\r\nline\r\nendings\r\n", "\r", "\r\n\r\n", " \n \n ", "\n \t \n", "\u00a0nbsp\u00a0here",
       "\u2003em\u2002en\u2009thin\u200ahair", "\u3000ideographic\u3000space", "\v\f vertical tab form feed",
       "mixed \t\n \t\n  \t\t\n\n\n   x", "    def indented():\n        return 4\n", "\u2581literal lower one eighth block",
       "\u2581\u2581two blocks", "a\u2581\u2581\u2581b", " \u2581 \u2581 "]
)

DIGITS = [
    "0", "1", "12", "123", "1234", "12345", "123456789", "3.14159265358979323846", "-42", "+1 (555) 123-4567",
    "1,000,000", "1.000.000,50", "2024-06-01T12:34:56Z", "0x1F4A9", "0b101010", "1e-10", "6.022e23",
    "99 bottles of beer", "Version 3.11.4", "IPv4 192.168.0.1 and IPv6 ::1", "007", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९",
    "１２３４５", "½ ¾ ⅓ ², ³", "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\n\nint main(void) {\n\tprintf(\"Hello, world!\\n\");\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "const x = arr.map((v, i) => v * i).filter(Boolean);",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "<?php echo $foo->bar['baz']; ?>", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "if __name__ == \"__main__\":\n    main()\n", "git commit -m \"Fix: off-by-one in tokenizer\" && git push",
    "$ ls -la /usr/local/bin | grep -E '^-rwx' | wc -l", "x = [i**2 for i in range(10) if i % 2 == 0]",
    "public static void main(String[] args) { System.out.println(\"hi\"); }",
    "template <typename T>\nstd::vector<T> f(const std::vector<T>& v);",
    "    \t  mixed indentation\n\t    more\n", "a=1;b=2;c=a+b;print(c)", "/* comment */ // line comment\n# shell comment",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n", "==> !== === <= >= != -> => :: ... ..= |> <|",
    "\\begin{equation} E = mc^2 \\end{equation}", "regex: ^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
]

URLS = [
    "https://www.example.com/path/to/page?query=1&other=two#fragment", "http://localhost:8080/api/v1/users/42",
    "ftp://files.example.org/pub/file.tar.gz", "mailto:someone@example.com", "user.name+tag@sub.domain.co.uk",
    "https://en.wikipedia.org/wiki/Byte_pair_encoding", "www.google.com", "https://github.com/google/gemma.cpp",
    "See https://arxiv.org/abs/2503.19786 for details.", "file:///home/user/Documents/report%20final.pdf",
    "https://例子.测试/路径?查询=值", "https://xn--r8jz45g.xn--zckzah/", "data:text/plain;base64,SGVsbG8sIFdvcmxkIQ==",
    "s3://bucket-name/key/with/slashes.json", "C:\\Program Files\\App\\app.exe",
]

CJK = [
    "你好，世界！", "我爱北京天安门。", "机器学习是人工智能的一个分支。", "今日は良い天気ですね。", "東京タワーに行きました。",
    "ひらがな カタカナ 漢字", "안녕하세요, 세계!", "한국어 텍스트를 토큰화합니다.", "中文、日本語、한국어 mixed with English.",
    "繁體中文與简体中文", "「引用」『二重引用』【括弧】", "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ", "ｶﾀｶﾅ半角", "㊗️ ㊙️ 〒 〠",
    "龘龘龘 齉 biáng", "臺灣 台灣 台湾",
]

SCRIPTS = [
    "مرحبا بالعالم", "اللغة العربية جميلة جداً.", "שלום עולם", "नमस्ते दुनिया", "हिन्दी भाषा में पाठ।",
    "সবাইকে শুভেচ্ছা", "வணக்கம் உலகம்", "స్వాగతం", "ಕನ್ನಡ", "മലയാളം", "ગુજરાતી", "ਪੰਜਾਬੀ",
    "สวัสดีชาวโลก", "ລາວ", "မြန်မာ", "ខ្មែរ", "Привет, мир!", "Ελληνικά γράμματα", "Հայերեն", "ქართული",
    "Tiếng Việt có dấu", "Türkçe İıĞğŞş", "Polski: zażółć gęślą jaźń", "Ærø Ørsted Åse", "አማርኛ", "ᏣᎳᎩ",
    "ᠮᠣᠩᠭᠣᠯ", "བོད་ཡིག", "ދިވެހި", "ܐܪܡܝܐ", "mixed العربية and English in one line",
    "עברית עם ניקוד: בְּרֵאשִׁית", "Ё ё Й й Щ щ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝓢𝓬𝓻𝓲𝓹𝓽",
]

EMOJI = [
    "😀", "👍", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🏴‍☠️", "🇺🇸🇫🇷🇯🇵🇩🇪", "1️⃣2️⃣#️⃣",
    "❤️‍🔥", "🧑🏿‍🤝‍🧑🏻", "I love 🍕 and 🍣!", "🙂🙃😉😊😇🥰😍🤩", "✅ ❌ ⚠️ ℹ️", "👁️‍🗨️", "🫠🫥🫨",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🐈‍⬛", "👩‍❤️‍💋‍👨", "emoji at the end 🎉", "🎉 emoji at the start",
]

BYTE_FALLBACK = [
    "\U00020000", "\U00020001\U00020002", "𠀀𠀁𠀂 rare CJK extension B", "\U0002A700\U0002B740\U0002B820",
    "\U00030000", "\U000F0000", "\U000FFFFD", "\U00100000", "\U0010FFFD", "private use \U000F1234 plane 15",
    "\U0001D11E musical", "𓀀𓀁 hieroglyphs", "𐎀 ugaritic", "\U0001F9D1\U0001FAF6", "\u0378\u0379 unassigned",
    "\ufdd0 noncharacter", "\U0001FFFE", "x\U00020000y\U00020000z",
]

HTML_MD = [
    "<h1>Title</h1>", "<p>Paragraph with <strong>bold</strong> and <em>italic</em>.</p>",
    "<table><tr><th>A</th><td>1</td></tr></table>", "<div class=\"x\"><span>t</span></div>",
    "<a href=\"https://example.com\">link</a>", "<ul>\n  <li>one</li>\n  <li>two</li>\n</ul>",
    "<code>x = 1</code>", "<blockquote>quote</blockquote>", "<b><i><u><s>nested</s></u></i></b>",
    "<sub>2</sub> and <sup>3</sup>", "<html><body><footer>f</footer></body></html>", "<img src=x.png/>",
    "<H1>upper</H1>", "< h1 >spaced</ h1 >", "<h7>not a token</h7>", "<iframe></iframe><bbox></bbox>",
    "# Heading\n\n## Subheading\n\n- item 1\n- item 2\n\n1. first\n2. second\n",
    "**bold** _italic_ `code` ~~strike~~ [link](http://x.y)", "```python\nprint('hi')\n```\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n", "> quoted\n> text\n", "---\ntitle: front matter\n---\n",
    "![alt text](image.png \"Title\")", "&lt;escaped&gt; &amp; &quot;entities&quot; &#x1F600;",
]

SPECIAL = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>",
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<unused0>", "<unused5>", "<unused98>",
    "<unused99>", "<unused-1>", "text<bos>text", "<bos><bos><bos>", "<<bos>>", "<bos", "bos>", "<start_of_turn",
    "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<start_of_image> image here <end_of_image>",
    "a<unused5>b<unused50>c", "The token <eos> ends text.", "<start_of_turn><end_of_turn>",
    "user <start_of_turn>model", "<BOS>", "< bos >", "<bos>\n\n<eos>",
]

NFC_NFD_BASE = [
    "café", "naïve", "Zürich", "résumé", "Ångström", "Crème brûlée", "Ελληνικά", "Tiếng Việt", "한국어",
    "がぎぐげご", "ﬁ ligature", "Å Å Å", "ḱṷṓn", "ñ vs ñ", "e\u0301\u0302\u0303 stacked",
]

NUL_AND_CONTROL = [
    b"", b"\x00", b"a\x00b", b"\x00\x00\x00", b"<bos>\x00<eos>", b"\x01\x02\x03\x1f\x7f", b"\x1b[31mred\x1b[0m",
    "\ufeffBOM at start".encode(), "zero\u200bwidth\u200cjoiner\u200d".encode(), "soft\u00adhyphen".encode(),
    "\u202eright-to-left override".encode(), "\u2028line sep\u2029para sep".encode(), "\ufffd replacement".encode(),
]

INVALID_UTF8 = [
    b"\xff", b"\xfe\xff", b"abc\xffdef", b"\x80", b"\xc3", b"\xc3(", b"\xe4\xb8", b"\xe4\xb8A", b"\xf0\x9f\x98",
    b"\xf0\x9f\x98 x", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
    b"valid \xe4\xb8\xad then \xe4\xb8 cut", b"hello \x80\x81\x82 world", b"<bos>\xff<eos>", b"\xff<start_of_turn>\xfe",
    b"  \xff  ", b"\n\n\xff\n\n", "caf\u00e9".encode("latin-1"), b"\xc3\xa9\xe9\xc3", b"\xef\xbb\xbf\xff\xfe",
]


def paragraphs(rng, n, size):
    words = (" ".join(ENGLISH)).split() + ["the", "of", "and", "to", "in", "a", "is", "that", "for", "it"] * 5
    out = []
    for _ in range(n):
        parts = []
        while sum(len(p) + 1 for p in parts) < size:
            sent = " ".join(rng.choice(words) for _ in range(rng.randint(5, 18)))
            parts.append(sent[0].upper() + sent[1:] + rng.choice([".", ".", "!", "?", ";"]))
            if rng.random() < 0.15:
                parts.append("\n\n" if rng.random() < 0.5 else "\n")
        out.append(" ".join(parts))
    return out


def random_mixed(rng, n):
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + list(" " * 12) + list("\n\t<>/_-.,;:!?'\"()[]{}#@&*+=")
            + list("éüßçñøåæœ") + list("你好世界中文字机器学习") + list("こんにちはカタカナ") + list("안녕하세요") + list("مرحبا")
            + list("नमस्ते") + list("привет") + ["😀", "👍🏽", "‍", "️", "🇯🇵", "\U00020000", "\U000F0000", "\u2581", "\u00a0", "\u0301"]
            + ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<unused7>", "<h1>", "</h1>", "<table>", "<b>", "<s>",
               "▁▁", "\n\n", "\t\t", "   "])
    out = []
    for _ in range(n):
        k = rng.choice([1, 2, 3, 5, 8, 13, 21, 34, 55, 89])
        out.append("".join(rng.choice(pool) for _ in range(k)))
    return out


def random_pieces(rng, vocab_list, n):
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        s = "".join(rng.choice(vocab_list) for _ in range(k))
        out.append(s.replace("\u2581", " ") if rng.random() < 0.7 else s)
    return out


def build_corpus(gemma_json):
    rng = random.Random(20250601)
    cases = []

    def add(cat, items):
        for s in items:
            cases.append((cat, s))

    add("english", ENGLISH)
    add("whitespace", WHITESPACE)
    add("digits", DIGITS)
    add("code", CODE)
    add("url", URLS)
    add("cjk", CJK)
    add("scripts", SCRIPTS)
    add("emoji", EMOJI)
    add("byte_fallback", BYTE_FALLBACK)
    add("html_md", HTML_MD)
    add("special", SPECIAL)
    for s in NFC_NFD_BASE:
        add("nfc", [unicodedata.normalize("NFC", s)])
        add("nfd", [unicodedata.normalize("NFD", s)])
        add("nfkc", [unicodedata.normalize("NFKC", s)])
    add("paragraph", paragraphs(rng, 4, 3000))
    add("paragraph", ["\n\n".join(paragraphs(rng, 3, 1500)) + "\n" + CODE[0] * 3 + " ".join(CJK + SCRIPTS + EMOJI)])
    add("random", random_mixed(rng, 110))
    vocab_list = [p for p, i in gemma_json["model"]["vocab"].items() if i >= 256 + 6 and not p.startswith("<")]
    vocab_list.sort()
    add("pieces", random_pieces(rng, vocab_list, 70))
    add("control", NUL_AND_CONTROL)
    add("invalid_utf8", INVALID_UTF8)
    cases.append(("special", "<image_soft_token>"))
    cases.append(("special", "x<image_soft_token>y <start_of_image><image_soft_token><end_of_image>"))
    return cases


# ----------------------------------------------------------------------------------------------- helpers

def split_invalid(b):
    """bytes -> list of str (valid runs) and int (single invalid bytes)."""
    s = b.decode("utf-8", errors="surrogateescape")
    out, run = [], []
    for ch in s:
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            if run:
                out.append("".join(run))
                run = []
            out.append(ord(ch) - 0xDC00)
        else:
            run.append(ch)
    if run:
        out.append("".join(run))
    return out


def encode_bytes(tok, b):
    ids = []
    for part in split_invalid(b):
        if isinstance(part, int):
            ids.append(tok.token_to_id("<0x%02X>" % part))
        else:
            ids.extend(tok.encode(part, add_special_tokens=False).ids)
    return ids


def put_dec(rec, dec):
    """JSON strings cannot carry NUL through the C reader: such decodes go as hex."""
    if "\x00" in dec:
        rec["dec_hex"] = dec.encode().hex()
    else:
        rec["dec"] = dec
    return rec


def case_record(tok, cat, s, special_ids, extra=None):
    rec = {"cat": cat}
    b = s if isinstance(s, bytes) else s.encode("utf-8")
    try:
        txt = b.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    if valid and "\x00" not in txt:
        rec["text"] = txt
    else:
        rec["hex"] = b.hex()
    if valid:
        ids = tok.encode(txt, add_special_tokens=False).ids
        assert ids == encode_bytes(tok, b)  # the split rule agrees with HF on valid text
        rec["ids"] = ids
        put_dec(rec, tok.decode(ids, skip_special_tokens=True))
    else:
        rec["ids"] = encode_bytes(tok, b)
    if extra:
        rec.update(extra)
    return rec


def write_jsonl(path, header, recs):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False, separators=(",", ":")) + "\n")
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")


# ----------------------------------------------------------------------------------------------- GGUF checks

def check_against_gguf(gguf_path, gemma_json):
    from gguf import GGUFReader

    r = GGUFReader(gguf_path)
    f = r.fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    toks = [t.replace(" ", "\u2581") for t in toks]
    vocab = gemma_json["model"]["vocab"]
    assert len(toks) == len(vocab) and all(vocab[t] == i for i, t in enumerate(toks)), "GGUF vocab != tokenizer.json"
    added = {a["id"]: a for a in gemma_json["added_tokens"]}
    gguf_added = {i for i, ty in enumerate(types) if ty in (2, 3, 4)}
    assert set(added) - {262144} == gguf_added, "added tokens != GGUF control + user-defined"
    assert added[262144]["content"] == "<image_soft_token>"
    index = {t: i for i, t in enumerate(toks)}
    derived = []
    for m, p in enumerate(toks):
        if types[m] not in (1, 4):
            continue
        sc = 0.0 if types[m] == 4 else scores[m]
        for k in range(1, len(p)):
            if p[:k] in index and p[k:] in index:
                derived.append((-sc, -k, -(len(p) - k), m, p[:k], p[k:]))
    derived.sort(key=lambda x: x[:4])
    merges = [tuple(x) for x in gemma_json["model"]["merges"]]
    assert [(x[4], x[5]) for x in derived] == merges, "derived merge ranks != tokenizer.json merges"
    assert not any(a.startswith("<0x") or b.startswith("<0x") for a, b in merges), "a merge involves a byte piece"
    print(f"GGUF check: vocab, added tokens and all {len(merges)} merges reproduced from {gguf_path}")
    # HF special vs GGUF control: where decode (skip special / skip control) differs
    return sorted(i for i in range(len(toks)) if (types[i] in (2, 3)) != (added.get(i, {}).get("special", False)))


# ----------------------------------------------------------------------------------------------- tiny tokenizer.json

TINY_TRAIN = ENGLISH + CODE + URLS + CJK[:6] + SCRIPTS[:6] + HTML_MD + [" ".join(ENGLISH)] * 3


def build_tiny():
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=700, min_frequency=2, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"],
                                  show_progress=False)
    tok.train_from_iterator(TINY_TRAIN, trainer)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    nxt = max(vocab.values()) + 1
    for b in range(256):  # byte pieces, appended to the model vocabulary
        name = "<0x%02X>" % b
        if name not in vocab:
            vocab[name] = nxt
            nxt += 1
    # user-defined pieces that are also model pieces (as in Gemma): "\n\n", "▁▁" and an HTML tag
    for piece in ["\n", "\n\n", "\u2581\u2581", "<h1>", "</h1>"]:
        if piece not in vocab:
            vocab[piece] = nxt
            nxt += 1
        j["added_tokens"].append({"id": vocab[piece], "content": piece, "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": False})
    for piece in ["<start_of_turn>", "<end_of_turn>"]:
        vocab[piece] = nxt
        j["added_tokens"].append({"id": nxt, "content": piece, "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True})
        nxt += 1
    # an added token outside the model vocabulary (like Gemma's <image_soft_token>)
    j["added_tokens"].append({"id": nxt, "content": "<image_soft_token>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True})
    j["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [vocab["<bos>"]], "tokens": ["<bos>"]}}}
    for a in j["added_tokens"]:
        a["normalized"] = False
    text = json.dumps(j, ensure_ascii=False, indent=None, separators=(",", ":"))
    return Tokenizer.from_str(text), text


def build_tiny_spm():
    """A small SentencePiece BPE model (trained by `sentencepiece` itself, Gemma's settings: byte fallback, no dummy
    prefix, whitespace kept, identity normalization, control and user-defined pieces) and its HF tokenizer built the
    way Google's Gemma 3 tokenizer.json is (merges ranked as check_against_gguf verifies), whose ids are the reference
    for the C tokenizer.model loader."""
    import io

    import sentencepiece as spm

    m = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TINY_TRAIN * 3), model_writer=m, vocab_size=600, model_type="bpe", byte_fallback=True,
        add_dummy_prefix=False, remove_extra_whitespaces=False, normalization_rule_name="identity",
        split_by_whitespace=False, allow_whitespace_only_pieces=True, character_coverage=0.9995,
        user_defined_symbols=["<h1>", "</h1>", "\n", "\n\n", "\u2581\u2581", "\u2581\u2581\u2581"],
        control_symbols=["<start_of_turn>", "<end_of_turn>"], pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>", minloglevel=2)
    blob = m.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=blob)
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = [1] * n
    for i in range(n):
        if sp.is_control(i):
            types[i] = 3
        elif sp.is_unknown(i):
            types[i] = 2
        elif sp.is_byte(i):
            types[i] = 6
        elif sp.is_unused(i):
            types[i] = 5
        elif sp.IdToPiece(i) in ("<h1>", "</h1>", "\n", "\n\n", "\u2581\u2581", "\u2581\u2581\u2581"):
            types[i] = 4
    index = {p: i for i, p in enumerate(pieces)}
    derived = []
    for mid, p in enumerate(pieces):
        if types[mid] not in (1, 4):
            continue
        sc = 0.0 if types[mid] == 4 else scores[mid]
        for k in range(1, len(p)):
            if p[:k] in index and p[k:] in index:
                derived.append((-sc, -k, -(len(p) - k), mid, p[:k], p[k:]))
    derived.sort(key=lambda x: x[:4])
    j = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": pieces[i], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": types[i] in (2, 3)} for i in range(n) if types[i] in (2, 3, 4)],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {p: i for i, p in enumerate(pieces)}, "merges": [[x[4], x[5]] for x in derived]},
    }
    return Tokenizer.from_str(json.dumps(j)), blob


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    args = ap.parse_args()
    if tokenizers.__version__ != EXPECTED_TOKENIZERS:
        raise SystemExit(f"tokenizers {tokenizers.__version__} != pinned {EXPECTED_TOKENIZERS}")
    tok, gemma_json = load_gemma()
    special_ids = sorted(a["id"] for a in gemma_json["added_tokens"] if a["special"])
    decode_differs = []
    gguf = args.gguf if os.path.exists(args.gguf) else "/work/models/gemma-3-270m-q4_k_m.gguf"
    if os.path.exists(gguf):
        decode_differs = check_against_gguf(gguf, gemma_json)
    else:
        print("warning: no GGUF found; skipping the GGUF/tokenizer.json equivalence checks")

    cases = build_corpus(gemma_json)
    recs = []
    for cat, s in cases:
        extra = {"no_gguf": True} if (isinstance(s, str) and "<image_soft_token>" in s) else None
        recs.append(case_record(tok, cat, s, special_ids, extra))
    header = {"tokenizers": tokenizers.__version__, "source": "gemma3 tokenizer.json", "cases": len(recs),
              "hf_special_ids": special_ids}
    write_jsonl(os.path.join(FIX, "tokenizer_parity.jsonl"), header, recs)
    print(f"tokenizer_parity.jsonl: {len(recs)} cases, {sum(len(r['ids']) for r in recs)} ids")

    # single-id and short-run decodes
    rng = random.Random(7)
    V = tok.get_vocab_size(with_added_tokens=False)
    ids = sorted(set(list(range(0, 300)) + list(range(255960, 256010)) + rng.sample(range(V), 700)))
    drec = [put_dec({"ids": [i]}, tok.decode([i], skip_special_tokens=True)) for i in ids]
    byte = lambda b: tok.token_to_id("<0x%02X>" % b)
    runs = [[byte(0xE4), byte(0xB8), byte(0xAD)], [byte(0xE4), byte(0xB8)], [byte(0xE4), byte(0xB8), byte(0xAD), byte(0x80)],
            [byte(0xFF)], [byte(0x41), byte(0xFF), byte(0x42)], [byte(0xF0), byte(0x9F), byte(0x98), byte(0x80)],
            [byte(0xE4), 100, byte(0xB8)], [2, byte(0xC3), byte(0xA9), 1], [byte(0xED), byte(0xA0), byte(0x80)],
            [byte(0xC0), byte(0xAF)], [byte(0x00)], [236743, byte(0x20), 138]]
    for _ in range(60):
        runs.append([rng.choice([byte(rng.randrange(256)), rng.randrange(V)]) for _ in range(rng.randint(1, 8))])
    for r in runs:
        drec.append(put_dec({"ids": r}, tok.decode(r, skip_special_tokens=True)))
    write_jsonl(os.path.join(FIX, "tokenizer_decode_pieces.jsonl"),
                {"tokenizers": tokenizers.__version__, "hf_special_ids": special_ids},
                drec)
    print(f"tokenizer_decode_pieces.jsonl: {len(drec)} cases; ids whose GGUF control flag != HF special flag "
          f"(decode skips one, not the other): {len(decode_differs)}")

    # tiny tokenizer.json
    tiny, tiny_text = build_tiny()
    os.makedirs(os.path.join(FIX, "tokenizer_tiny"), exist_ok=True)
    with open(os.path.join(FIX, "tokenizer_tiny", "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tiny_text)
    trecs = [case_record(tiny, cat, s, None) for cat, s in cases if cat != "paragraph"]
    tiny_special = sorted(a["id"] for a in json.loads(tiny_text)["added_tokens"] if a["special"])
    write_jsonl(os.path.join(FIX, "tokenizer_tiny_parity.jsonl"),
                {"tokenizers": tokenizers.__version__, "source": "tokenizer_tiny/tokenizer.json", "cases": len(trecs),
                 "hf_special_ids": tiny_special, "vocab_size": tiny.get_vocab_size(with_added_tokens=True)}, trecs)
    print(f"tokenizer_tiny: vocab {tiny.get_vocab_size(with_added_tokens=True)}, {len(trecs)} cases")

    # tiny tokenizer.model
    spm_tok, blob = build_tiny_spm()
    os.makedirs(os.path.join(FIX, "tokenizer_spm_tiny"), exist_ok=True)
    with open(os.path.join(FIX, "tokenizer_spm_tiny", "tokenizer.model"), "wb") as f:
        f.write(blob)
    srecs = [case_record(spm_tok, cat, s, None) for cat, s in cases if cat != "paragraph"]
    write_jsonl(os.path.join(FIX, "tokenizer_spm_tiny_parity.jsonl"),
                {"tokenizers": tokenizers.__version__, "source": "tokenizer_spm_tiny/tokenizer.model", "cases": len(srecs),
                 "vocab_size": spm_tok.get_vocab_size(with_added_tokens=True)}, srecs)
    print(f"tokenizer_spm_tiny: vocab {spm_tok.get_vocab_size(with_added_tokens=True)}, {len(srecs)} cases")


if __name__ == "__main__":
    main()
