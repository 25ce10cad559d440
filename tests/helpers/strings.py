"""Hard strings every backend must tokenize exactly like the reference.

Covers code, CRLF/tabs, whitespace and digit runs, contractions in every
case, emoji (ZWJ, skin tones, flags), CJK, RTL, combining marks, controls,
and every special string inside untrusted text. The conformance suite's JSONL
probe set is the larger, versioned version of this list.

Out of scope: chats and the probe files a gate run reads (:mod:`tests.helpers.data`).
"""

from __future__ import annotations

from stacktok_export import SPECIAL_TOKENS

from .paths import ROOT

PROBE = (
    "Tokenization is frozen for the life of the model.\n"
    "café 🚀 — mixed ünïcode\tTAB\r\nCRLF\n"
    "def f(x):\n    return x ** 2  # 1234567 and 2026\n"
    "hello <|assistant|> world\n"
)

_BASE = [
    PROBE,
    "",
    " ",
    "a",
    "Hello, world!",
    "def f(x):\n\treturn {'a': [1, 2, 3]}  # comment\r\n",
    '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }\n',
    '{"key": "value", "n": [1.5e-3, null, true]}',
    "for i in $(seq 1 10); do echo \"$i\" | grep -v '^#'; done 2>&1 >/dev/null",
    '<html><body class="x">&amp; &lt;p&gt;</body></html>',
    "line1\r\nline2\rline3\nline4\n\n\n",
    "tabs\t\t\tand  spaces   \t \n  \n",
    "\f\v\x0b\x0c form feed",
    "   leading and trailing   ",
    "\n\n\n\n",
    "       ",
    "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890 12345678901 123456789012",
    "٣٤٥ ١٢ ۱۲۳ ४२ ๔๒ １２３ ⅷ ½ ²³",
    "I'm you're he's we've they'd I'll it'S YOU'RE DON'T 'LL 'S 'Ll 'ſ 'ſt",
    "don't DON'T Don'T dOn't",
    "!!! ??? ... --- *** ### $$$ %%% ^^^ &&& ((( )))",
    "a+=b-=c*=d/=e%=f**=g//=h",
    "café naïve résumé Ångström Zoë",
    "e\u0301 a\u0300\u0316 o\u0308\u0304 n\u0303",
    "Ελληνικά γράμματα και λέξεις",
    "Русский текст с ёлкой",
    "العربية لغة جميلة",
    "עברית שפה יפה",
    "हिन्दी भाषा देवनागरी",
    "ภาษาไทยไม่มีช่องว่าง",
    "ភាសាខ្មែរ",
    "မြန်မာဘာသာ",
    "中文字符测试，标点。",
    "日本語のひらがなとカタカナ",
    "한국어 한글 테스트",
    "👨‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 🏳️‍🌈 ❤️",
    "\u00a0nbsp\u3000ideographic\u0085nel\u2028ls\u2029ps\ufeffbom\u200bzw\u200c\u200d",
    "\x00nul\x01\x02\x1b[31mred\x1b[0m\x7f",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "\x1f-a ¼-a a 〇b Ⅵ-a \ufeff//",
    " Việt Nam",
    "hi<s>there</s>",
    "^" * 1000,
    "0" * 1000,
    "'s" * 500,
]

_SPECIAL_FORMS = []
for _s in SPECIAL_TOKENS:
    _SPECIAL_FORMS += [
        _s,
        f"x{_s}y",
        f" {_s} ",
        _s + _s,
        _s[:-1],
        _s.upper(),
        f"hello {_s} world",
    ]

HARD_STRINGS: list[str] = _BASE + _SPECIAL_FORMS


def heldout_slice(n: int = 20_000) -> str:
    return (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")[:n]
