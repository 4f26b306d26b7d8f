#!/usr/bin/env python3
"""tokenizer_corpus: the texts tests/ref/tokenizer_vs_hf.py feeds to tfcore's
tokenizer and to Hugging Face's, chosen to hit every rule of SPEC.md's "BERT
WordPiece tokenizer" section: hand-written cases per rule, then random
strings drawn from the same character classes (deterministic: seeded).

Imported by tokenizer_vs_hf.py. Run directly to print a sample, or
  tokenizer_corpus.py --write-fuzz-seeds DIR
to (re)write the fuzz target's seed inputs (tests/fuzz/corpus/tokenizer/):
each seed is "text" or "text<TAB>pair" in UTF-8, as fuzz_tokenizer.c reads it.
"""
import os
import random
import sys

# ---------------------------------------------------------------- classes
WORDS = ("the a of and to in is was it for on with as his that he at by this had not are but "
         "from or have an they which one you were all her she there would their we him been has "
         "when who will no more if out so said what up its about into than them can only other "
         "new some could time these two may then do first any my now such like our over man me "
         "even most made after also did many before must through back years where much your way "
         "well down should because each just those people how too little state good very make "
         "world still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go came "
         "right used take three movie film unaffable tokenization huggingface transformers "
         "preprocessing embeddings wordpiece bert unbelievably antidisestablishmentarianism "
         "don't isn't it's you're we've i'm they'd ca can't won't o'clock rock'n'roll e-mail "
         "U.S.A. Ph.D. 3.14159 1,000,000 $100 50% #hashtag @user http://example.com/a?b=c&d=e "
         "user@example.com C++ C# F# .NET node.js").split()

ASCII_PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

ACCENTED = ("é è ê ë à â ä ô ö û ü ç ñ í ó ú ý ÿ É È À Ç Ñ Å å ø Ø æ Æ œ Œ ą ę ł ń ś ź ż č ď ě ň ř š "
            "ť ů ž ő ű Ő Ű ǅ ǆ Ǆ ǈ ǋ ǲ ḕ ẽ ỹ ǖ Ǘ ṩ ắ ặ Ω Å ﬁ ﬂ Ⅻ ½ ² ℃ ㎏").split()
DECOMPOSED = ["e\u0301", "a\u0300", "o\u0308", "n\u0303", "c\u0327", "A\u030a", "i\u0307",
              "I\u0307", "u\u0308\u0301", "e\u0323\u0302", "a\u0316\u0301", "x\u0301\u0316",
              "\u0301", "\u0301\u0301\u0301", "e\u20dd", "\u0345\u0301"]
# marks of different canonical classes (NFD reorders them), some not Mn
MARKS = ["\u0301", "\u0316", "\u0345", "\u0327", "\u05b0", "\u0e38", "\u0f71", "\u0f72",
         "\u0f73", "\u0f75", "\u0344", "\u0340", "\U0001d165", "\U0001d166", "\U0001d16d",
         "\u302e", "\u093c", "\u094d", "\u0903", "\u20dd", "\u1ab0", "\u1dc0", "\u0e48",
         "\u1ac0", "\u0898", "\U00011938", "\U00016ff0", "\u1715", "\u1734", "\u0300",
         "\u0308", "\u0323", "\u0331", "\u035c", "\u0361"]

CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
# look alike but are not "Chinese characters" for BERT
NOT_CJK = [(0x2B820, 0x2B91F), (0x30000, 0x3134A), (0x3040, 0x309F), (0x30A0, 0x30FF),
           (0xAC00, 0xD7A3), (0x2E80, 0x2EFF), (0x3000, 0x303F), (0xFF00, 0xFFEF),
           (0x2CEB0, 0x2EBE0), (0x31350, 0x323AF)]

CONTROL = [chr(c) for c in list(range(0x00, 0x09)) + [0x0B, 0x0C] + list(range(0x0E, 0x20))
           + [0x7F] + list(range(0x80, 0xA0))]
FORMAT = ["\u00ad", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060", "\u2061",
          "\u2062", "\u2063", "\u2064", "\ufeff", "\u061c", "\u180e", "\u202a", "\u202e",
          "\u2066", "\u2069", "\u206a", "\u206f", "\ufff9", "\ufffb", "\U000e0001",
          "\U000e0020", "\U000e007f", "\U0001bca0", "\U0001d173", "\u0600", "\u06dd", "\u070f",
          # Cf today, unknown to tokenizers' tables: kept
          "\u0890", "\u0891", "\u08e2", "\U000110cd", "\U00013430", "\U00013438", "\U0001343f"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
WHITESPACE = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85",
              "\xa0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005",
              "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f",
              "\u205f", "\u3000", "\u180e", "\u200b"]
UNI_PUNCT = list("¡¿«»“”‘’‚„‹›—–―‐‑‒…·•‰‱′″‴‵〈〉「」『』【】〔〕、。〃〜！？，；：（）［］｛｝"
                 "¶§⁂‽⁇⁈⁉※‼⸘⸮⹀⹁⹂⁅⁆⁽⁾₍₎❨❩❪❫⟨⟩⦃⦄︐︑︒︓︔︕︖︗︘﹐﹑﹒﹔﹕﹖﹗＂＇＿｟｠")
# punctuation today, unknown (or not punctuation) to tokenizers' tables
PUNCT_CHANGED = ["\u061d", "\u09fd", "\u0a76", "\u0c77", "\u0c84", "\u166d", "\u1b7d", "\u2e43",
                 "\u2e4f", "\u2e52", "\u2e5d", "\U00010ead", "\U00010f55", "\U000111c9",
                 "\U0001144b", "\U00011660", "\U0001e95e", "\u2e42", "\u2e3b", "\u2e40"]
SYMBOLS = list("€©®™°±×÷∞≠≈√∑∏∫₹¥£$¢₩₽₿¤¦¨¯´¸¬µ℗℠№℮⅍⌘⌚⏰☀☂☃★☆♠♣♥♦♪♫⚽⚾✓✔✗✘❤➡⬆") + [
    "😀", "😂", "👍", "👍🏽", "❤️", "🇺🇸", "👨‍👩‍👧", "🤖", "🥰", "🫠", "🧑🏿‍🚀", "🏳️‍🌈", "🔥", "💯",
    "\U0001f600\U0001f601", "\u2764\ufe0f", "\ufe0f", "\ufe0e", "\U0001f3fb", "\u20e3", "1\ufe0f\u20e3"]
SPECIAL = ["[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[cls]", "[sep]", "[mask]", "[unk]",
           "[pad]", "[Cls]", "[CLS", "CLS]", "[ CLS ]", "[[CLS]]", "[CLS][SEP]", "a[SEP]b",
           "x[MASK]y", "[MASK][MASK]", "[UNK][UNK]", "##", "##ing", "[unused0]", "[unused1]",
           "[CL\u200bS]", "[\u00adSEP]", "[SEP\u0301]"]
TURKISH = ["İ", "ı", "İstanbul", "ISTANBUL", "istanbul", "İİİ", "Iı", "i̇", "DİYARBAKIR", "ılık",
           "İ\u0301", "I\u0307\u0301", "İ\u0316"]
GERMAN = ["ß", "ẞ", "Straße", "STRASSE", "Fußball", "GROẞ", "Maß", "ßß", "Weiß-Bier"]
GREEK = ["Σ", "σ", "ς", "ΣΑΣ", "ΌΣΟΣ", "ὈΔΥΣΣΕΎΣ", "ὀδυσσεύς", "Ἀθῆναι", "ΐ", "ΰ", "ᾼ", "ᾳ",
         "ϐ", "ϑ", "ϒ", "ϓ", "ϔ", "ϕ", "Ϊ", "Ά", "ά", "ΆΆ", "ς.", "Σ'", "Ω", "µ"]
SCRIPTS = ["Привет", "ПРИВЕТ", "Ёлка", "мир", "مرحبا", "السلام", "שלום", "नमस्ते", "क्षत्रिय",
           "สวัสดี", "ภาษาไทย", "Բարեւ", "ԲԱՐԵՒ", "ᲒᲐᲛᲐᲠᲯᲝᲑᲐ", "გამარჯობა", "Ꭰ", "ᏣᎳᎩ", "ꮳꮃꭹ",
           "𐐀𐐨", "𐐔𐐯𐑅𐐨𐑉𐐯𐐻", "ⰀⰁⰂ", "ⰰⰱ", "𞤀𞤢", "𞤀𞤵𞥄", "ᚠᛇᚻ", "ሰላም", "ᐊᐃᑉᐱᖅ",
           "안녕하세요", "こんにちは", "カタカナ", "ｶﾀｶﾅ", "ＡＢＣａｂｃ", "ﬀ", "ǈ", "ᾈ", "ﬆ", "ŉ", "ǰ",
           "ẖ", "ﬓ", "ﾟ", "ヷ", "ポ", "ポ", "ⅷ", "Ⅷ", "ⓐⒶ", "𝐀𝐚", "𝔄", "ℌ", "Ⓒ", "㈜", "㍻"]
UNASSIGNED = ["\u0378", "\u0379", "\u03a2", "\u05c8", "\u0ecf",
              "\U000e0080", "\U0002fffd", "\U000dffff", "\ufffe", "\uffff", "\U0010ffff",
              "\U0003fffe", "\U0001fbfa", "\u2b74", "\u1c89"]
PRIVATE = ["\ue000", "\uf8ff", "\U000f0000", "\U000ffffd", "\U00100000", "\U0010fffd"]
UNK_WORDS = ["ᚠᛇᚻ᛫ᛒᛦᚦ", "ꡀꡁꡂ", "𓀀𓀁", "⠁⠃⠉", "ꙮ", "𒀀𒀁", "ᏣᎳᎩ", "𝕬𝖇𝖈", "ǂǃ"]


def _letters(rng, n, alphabet="abcdefghijklmnopqrstuvwxyz"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def long_words(rng):
    """Words around the 100-code-point limit (it counts normalized code points)."""
    out = []
    for n in (99, 100, 101, 120, 150, 300):
        out.append(_letters(rng, n))
    out += ["a" * 100, "a" * 101, "é" * 100, "é" * 101, "e\u0301" * 50, "e\u0301" * 51,
            "E\u0301" * 60, "İ" * 50, "İ" * 51, "İ" * 100, "ab" * 50 + ".", "x" * 100 + "\u0301",
            "\u0301" * 150 + "a", "ß" * 101, "ﬁ" * 101, "中" * 150, "a" + "\u200b" * 200 + "b",
            "abc" * 40, ("unaffable" * 12)[:100], ("unaffable" * 12)[:101], "Ⅻ" * 101]
    return out


def _cp(rng, ranges):
    lo, hi = rng.choice(ranges)
    return chr(rng.randint(lo, hi))


def item(rng):
    """One random fragment of text from a random class."""
    k = rng.random()
    if k < 0.30:
        w = rng.choice(WORDS)
        r = rng.random()
        return w.upper() if r < 0.1 else w.capitalize() if r < 0.25 else w
    if k < 0.36:
        return str(rng.randint(0, 10 ** rng.randint(1, 9)))
    if k < 0.42:
        return "".join(rng.choice(ASCII_PUNCT) for _ in range(rng.randint(1, 3)))
    if k < 0.48:
        return "".join(rng.choice(ACCENTED + DECOMPOSED) for _ in range(rng.randint(1, 4))) + (
            _letters(rng, rng.randint(0, 4)))
    if k < 0.52:
        return "".join(_cp(rng, CJK_RANGES) for _ in range(rng.randint(1, 4)))
    if k < 0.54:
        return "".join(_cp(rng, NOT_CJK) for _ in range(rng.randint(1, 3)))
    if k < 0.57:
        return _letters(rng, 2) + rng.choice(CONTROL) + _letters(rng, 2)
    if k < 0.60:
        return _letters(rng, 2) + rng.choice(FORMAT + ZERO_WIDTH) + _letters(rng, 2)
    if k < 0.62:
        return rng.choice(["\ufffd", "a\ufffdb", "\ufffd\ufffd", "[\ufffd]"])
    if k < 0.66:
        return "".join(rng.choice(UNI_PUNCT + PUNCT_CHANGED) for _ in range(rng.randint(1, 3)))
    if k < 0.70:
        return rng.choice(SYMBOLS) + (rng.choice(WORDS) if rng.random() < 0.3 else "")
    if k < 0.74:
        return rng.choice(SPECIAL)
    if k < 0.77:
        return rng.choice(TURKISH + GERMAN)
    if k < 0.80:
        return rng.choice(GREEK)
    if k < 0.84:
        base = rng.choice(["a", "e", "o", "x", "İ", "ß", "中", "1", "!", "", "ε", "и"])
        return base + "".join(rng.choice(MARKS) for _ in range(rng.randint(1, 5)))
    if k < 0.90:
        return rng.choice(SCRIPTS)
    if k < 0.92:
        return rng.choice(UNASSIGNED + PRIVATE)
    if k < 0.94:
        return rng.choice(UNK_WORDS)
    if k < 0.95:
        return rng.choice(long_words(rng))
    if k < 0.97:
        return "".join(chr(rng.randint(0x80, 0x2FFF)) for _ in range(rng.randint(1, 3)))
    cp = rng.randint(0x10000, 0x10FFFF)
    return chr(cp) if not 0xD800 <= cp < 0xE000 else "?"


SEPARATORS = ["", " ", " ", " ", " ", "  ", "\t", "\n", "\r\n", "\xa0", "\u3000", "\u2028",
              "\u200b", "-", ", ", ". ", "\u2029", "\x0b"]


def random_text(rng, max_items=30):
    n = rng.randint(0, max_items)
    parts = []
    for _ in range(n):
        parts.append(item(rng))
        parts.append(rng.choice(SEPARATORS))
    return "".join(parts)


def hand_cases():
    """One or more cases per rule of SPEC.md's tokenizer section."""
    cases = [
        "", " ", "   ", "\t\n\r", "a", "A", "Hello, world!", "HELLO WORLD", "hello  world",
        "unaffable", "UNAFFABLE", "Unaffable", "tokenization", "don't stop", "it's", "I'm",
        "U.S.A.", "e-mail", "3.14", "1,000", "$100", "100%", "#1", "@user", "a.b.c", "...",
        "!!!", "?!", "(parenthesis)", "[brackets]", "{braces}", "<tag>", "a/b\\c", "a|b", "~x~",
        "`code`", "^caret^", "_under_score_", "snake_case_name", "CamelCaseWord",
        # rule 1: special tokens in text, case-sensitive
        "[CLS] hello [SEP] world [SEP]", "[cls] hello [sep]", "[MASK] is masked", "a[MASK]b",
        "[UNK] [PAD] [pad] [unk]", "[[MASK]]", "[CLS][CLS]", "[SEP]", "[PAD][PAD][PAD]",
        "[CLS", "CLS]", "[ MASK ]", "[Mask]", "x [MASK]. [MASK], [MASK]!",
        "[CL\u200bS]", "\u200b[CLS]\u200b", "\u00e9[SEP]\u00e9",
        # rule 2: cleaning
        "a\x00b", "a\ufffdb", "\ufffd", "a\u200bb", "a\u200cb\u200dc", "soft\u00adhyphen",
        "\ufeffBOM", "a\x01b\x02c", "a\x7fb", "a\x85b", "a\x9fb", "tab\there", "new\nline",
        "cr\rhere", "crlf\r\nhere", "vt\x0bhere", "ff\x0chere", "fs\x1chere", "us\x1fhere",
        "nbsp\xa0here", "thin\u2009space", "ideo\u3000space", "line\u2028sep", "para\u2029sep",
        "ogham\u1680space", "narrow\u202fnbsp", "math\u205fspace", "mongolian\u180evowel",
        "a\u2060b", "a\u061cb", "rtl\u200fmark", "a\ue000b", "a\U000f0000b", "a\u0378b",
        "a\U000e0001b", "a\u0890b", "a\U00013430b",
        # rule 3: CJK
        "中文", "中文字符", "我爱北京天安门", "漢字かな交じり文", "日本語のテキスト", "한국어 텍스트",
        "a中b", "中a中", "\u4e00\u9fff\u3400\u4dbf", "\U00020000\U0002a6df", "\U0002a700\U0002b73f",
        "\U0002b740\U0002b81f", "\U0002b820\U0002b91f", "\U0002b920\U0002ceaf", "\uf900\ufaff",
        "\uf900\ufa0e\ufa6d", "\U0002f800\U0002fa1d", "\U00030000\U0003134a", "ⅠⅡ中",
        "中。文，字！", "全角ＡＢＣ１２３", "「引用」", "中\u0301", "\u0301中",
        # rule 4/5: whitespace split, lowercase, accents
        "Café", "CAFÉ", "café", "cafe\u0301", "naïve", "résumé", "Ångström", "Å", "Å",
        "Crème Brûlée", "Ærøskøbing", "Łódź", "Dvořák", "Ça va", "São Paulo", "Zoë", "Noël",
        "İstanbul", "ISTANBUL", "ıi İI", "İ", "i̇", "Straße", "STRASSE", "ẞ", "ΣΑΣ", "ΌΣΟΣ",
        "Σίσυφος", "ὈΔΥΣΣΕΎΣ", "ǅemal", "ǄEMAL", "ǈ", "ﬁne", "ﬂow", "Ⅻ", "½", "x²", "℃",
        "ＡＢＣ", "Ω", "\u212b", "µ", "ſ", "ẛ", "ϕ", "ϐ", "ǰ", "ŉ",
        "a\u0301\u0316b", "a\u0316\u0301b", "x\u0301\U0001d165y", "xe\u0301\U0001d165\u0301y",
        "x\u1e15\u0301\U0001d165\u0301\U0001d165y", "\u0f73\u0f71", "\u0301\u0f73",
        "\u0344\u0345", "a\u0345\u0301", "e\u0301\u0301\u0301", "\u0301", "\u0301a",
        # rule 6: punctuation
        "¡Hola!", "¿Qué?", "«quote»", "“smart”", "‘single’", "em—dash", "en–dash", "ellipsis…",
        "middle·dot", "bullet•point", "per‰mille", "prime′s", "§1", "¶", "‽", "、。", "‹›",
        "a\u2e43b", "a\u2e42b", "a\u166db", "a\u061db", "a\U000111c9b", "a\u1fefb", "a\u037eb",
        "a\u0387b", "\u1fef", "\u1fed\u1fee",
        "€100", "©2024", "®", "™", "°C", "±5", "×", "÷", "∞", "√2", "5€", "a€b", "a©b",
        "😀", "I ❤️ NY", "👍🏽 good", "👨‍👩‍👧 family", "🇺🇸🇫🇷", "a😀b", "1️⃣", "🥰", "🫠",
        # rule 7: WordPiece
        "unbelievably", "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
        "a" * 99, "a" * 100, "a" * 101, "é" * 100, "é" * 101, "e\u0301" * 51, "İ" * 51,
        "xyzzyqqqq", "qwxzv", "ᚠᛇᚻ", "ꙮ", "𓀀", "⠁⠃", "Привет мир", "مرحبا بالعالم",
        "नमस्ते दुनिया", "สวัสดีชาวโลก", "გამარჯობა", "Ꭰ Ꮳ ꭰ", "𐐀𐐨 𐐔", "Ⰰⰰ", "𞤀𞤢",
        # misc
        "<br /><br />This movie was great.<br /><br />10/10",
        "The quick brown fox jumps over the lazy dog. " * 3,
        "http://www.example.com/path?query=1&b=2#frag", "user.name+tag@example.co.uk",
        "C++ and C# and F#", "node.js vs. deno", "3.14159265358979", "2024-01-02T03:04:05Z",
        "rock'n'roll", "o'clock", "ca n't", "can't", "won't", "y'all'd've",
        "\u00a0\u00a0leading and trailing\u3000\u3000", "\n\n\nmany\n\n\nnewlines\n\n",
        "\U0010ffff", "\ufffe\uffff", "\U000e0100", "\ufe0f\ufe0e", "\u034f", "\u115f\u1160",
        "\u3164", "\uffa0", "\u2800", "\U0001d173\U0001d17a",
    ]
    cases += long_words(random.Random(7))
    return cases


def hand_pairs():
    return [
        ("What is the capital of France?", "Paris is the capital and most populous city of France."),
        ("", "only second"), ("only first", ""), ("", ""), ("[CLS]", "[SEP]"),
        ("Who wrote Hamlet?", "Hamlet was written by William Shakespeare between 1599 and 1601."),
        ("中文问题？", "中文答案。"), ("Café?", "CAFÉ!"), ("a\tb", "c\nd"),
        ("İstanbul", "istanbul"), ("x" * 120, "y" * 120), ("unaffable", "UNAFFABLE"),
    ]


def corpus(seed, n_random):
    rng = random.Random(seed)
    return hand_cases() + [random_text(rng) for _ in range(n_random)]


def pairs(seed, n_random):
    rng = random.Random(seed)
    out = list(hand_pairs())
    for _ in range(n_random):
        out.append((random_text(rng, 12), random_text(rng, 40)))
    return out


def squad_like(seed, n):
    """Question/context pairs whose contexts span several windows."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25))) + "?"
        if rng.random() < 0.3:
            q = "  " + q  # run_qa strips leading whitespace; the tokenizer must not care
        ctx = []
        for _ in range(rng.randint(20, 400)):
            ctx.append(rng.choice(WORDS) if rng.random() < 0.9 else item(rng))
            ctx.append(rng.choice([" ", " ", " ", ", ", ". ", "\n"]))
        out.append((q, "".join(ctx)))
    return out


def imdb_like(seed, n, words=230):
    """Synthetic movie reviews: ~230 words with <br /><br /> inside, as IMDB has."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for k in range(max(1, int(rng.gauss(words, words / 4)))):
            w = rng.choice(WORDS)
            if k % 17 == 0:
                w = w.capitalize()
            parts.append(w)
            r = rng.random()
            if r < 0.05:
                parts.append(". ")
            elif r < 0.08:
                parts.append(", ")
            elif r < 0.085:
                parts.append(".<br /><br />")
            elif r < 0.09:
                parts.append("! ")
            else:
                parts.append(" ")
        out.append("".join(parts).strip())
    return out


def fuzz_seeds():
    """Short seeds for tests/fuzz/fuzz_tokenizer.c: three option bytes (see
    there), then a text, or "text<TAB>pair" when the pair bit is set."""
    hand = [c.encode("utf-8") for c in hand_cases() if len(c.encode("utf-8")) < 160]
    texts = hand[::2]  # every rule is among them, half of the cases is plenty
    texts += [(a + "\t" + b).encode("utf-8") for a, b in hand_pairs()]
    rng = random.Random(3)
    texts += [random_text(rng, 8).encode("utf-8") for _ in range(20)]
    texts += [b"\xff\xfe", b"a\xe2\x82b", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xc0\xaf",
              b"\xf4\x90\x80\x80"]
    headers = [bytes([0, 0, 0]), bytes([0x84, 12, 2]), bytes([0x9c, 20, 4]), bytes([0x31, 9, 1]),
               bytes([0x05, 6, 0]), bytes([0xd2, 16, 3]), bytes([0x8b, 5, 1])]
    return [headers[i % len(headers)] + t for i, t in enumerate(texts)]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--write-fuzz-seeds":
        d = sys.argv[2]
        os.makedirs(d, exist_ok=True)
        for i, s in enumerate(fuzz_seeds()):
            with open(os.path.join(d, "seed_%03d" % i), "wb") as f:
                f.write(s)
        print("wrote %d seeds to %s" % (len(fuzz_seeds()), d))
        return
    for t in corpus(1, 10):
        print(repr(t))


if __name__ == "__main__":
    main()
