#!/usr/bin/python3
"""Writes corpus.json: >= 2000 deterministic test strings for the tokenizer tests.

Usage: make_corpus.py OUT.json. Uses only a fixed-seed PRNG of its own (no
library randomness) so the output is byte-identical across Python versions.
"""
import json
import sys


class Rng:
    """xorshift64*: stable across interpreters."""

    def __init__(self, seed):
        self.s = seed or 1

    def next(self):
        x = self.s
        x ^= (x >> 12) & 0xFFFFFFFFFFFFFFFF
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27) & 0xFFFFFFFFFFFFFFFF
        self.s = x & 0xFFFFFFFFFFFFFFFF
        return (self.s * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return (self.next() >> 11) % n

    def choice(self, seq):
        return seq[self.below(len(seq))]


PROSE = ("The quick brown fox jumps over the lazy dog. I'm sure it's fine; they've "
         "said we'd go, you'll see. Don't WORRY about IT'S casing! Hello, world? "
         "Tokenizers split text into pieces, and models read those pieces one by one. "
         "Mr. O'Neil paid $3.50 for 12 apples on 2024-05-17 at 10:45am (approx.). "
         "e-mail: someone@example.com, url: https://example.org/path?q=1&r=two#frag").split(" ")
CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); }",
    "const x = {a: 1, 'b': [2, 3], \"c\": null};",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "    if x is not None and len(x) > 0:\n        pass",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "<div class=\"a\">&amp; &lt;tag&gt;</div>",
    "x+=1;y-=2;z*=3;w/=4;v%=5;u**=6",
    "$ ls -la | grep '^d' | awk '{print $9}'",
]
CJK = ["你好，世界", "日本語のテキストです。", "한국어 문장입니다", "中文分词测试：北京欢迎你",
       "カタカナとひらがな", "漢字かな交じり文", "汉字", "ひらがな", "我爱自然语言处理。"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🧑🏿‍💻", "👩🏻‍🚀", "🇯🇵", "🇺🇸", "✋🏾", "🤷‍♀️",
         "1️⃣", "🫠", "😂😂😂", "👋🏼 hi"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "Ame\u0301lie", "Z\u0335\u0321a\u0336l\u0337g\u0338o",
             "\u0915\u094d\u0937", "café", "naïve", "Å", "A\u030a", "ﬁ ligature", "①②③",
             "ｆｕｌｌｗｉｄｔｈ", "\u1e9b\u0323", "ḱṷṓn"]
RTL = ["مرحبا بالعالم", "שלום עולם", "العربية 123 English", "\u202eRTL override\u202c",
       "فارسی", "עִבְרִית", "سلام، دنیا!"]
WS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t  \n", "\u00a0", "\u3000", "\u2003",
      "          ", "\n\n\n\n"]
NUMBERS = ["0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "-17", "1e10", "0x1F",
           "1,000,000", "٣٤٥", "١٢٣٤", "Ⅻ", "½", "2²", "10^9"]
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>",
            "<unk>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<pad>",
            "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
            "<think>", "</think>", "<tool_call>", "<|reserved_special_token_5|>", "<|python_tag|>",
            "<|fim_prefix|>", "<|im_start", "im_end|>", "<s >", "< s>"]
LONG = ["a" * 300, "supercalifragilisticexpialidocious" * 5, "x" * 1000,
        "Pneumonoultramicroscopicsilicovolcanoconiosis", "ab" * 400, "z" * 64 + " " + "y" * 64,
        "1" * 200, "-" * 120, "=" * 80, "!!!!!!!!!!!!!!!!!!!!!!!", "....................", "漢" * 100,
        "😀" * 50, "\u0301" * 40]


def gen():
    r = Rng(20260529)
    out = []
    # Every atom on its own, and with a leading / trailing space.
    atoms = PROSE + CODE + CJK + EMOJI + COMBINING + RTL + WS + NUMBERS + SPECIALS + LONG
    for a in atoms:
        out += [a, " " + a, a + " "]
    pools = [PROSE, CODE, CJK, EMOJI, COMBINING, RTL, WS, NUMBERS, SPECIALS, LONG[:6]]
    # Random mixtures: 1..12 atoms from random pools joined by random separators.
    seps = ["", " ", "  ", "\n", "\t", ", ", ". ", "\u00a0"]
    while len(out) < 2100:
        n = 1 + r.below(12)
        parts = []
        for _ in range(n):
            pool = pools[r.below(len(pools))]
            parts.append(r.choice(pool))
            parts.append(r.choice(seps))
        out.append("".join(parts))
    # Random code points from several blocks (valid scalar values only).
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F),
              (0x300, 0x36F), (0x2000, 0x206F), (0xFF00, 0xFFEF), (0x10000, 0x1007F)]
    while len(out) < 2300:
        n = 1 + r.below(24)
        s = []
        for _ in range(n):
            lo, hi = blocks[r.below(len(blocks))]
            cp = lo + r.below(hi - lo + 1)
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0x41
            s.append(chr(cp))
        out.append("".join(s))
    out.append("")
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


if __name__ == "__main__":
    data = gen()
    assert len(data) >= 2000, len(data)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=0)
        f.write("\n")
