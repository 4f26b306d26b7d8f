#!/usr/bin/env python3
"""squad_eval_vs_hf: `tfcore squad-eval` against the official SQuAD evaluation.

The official scripts (evaluate-v1.1.py, evaluate-v2.0.py) are not on PyPI.
transformers' data/metrics/squad_metrics.py carries the v2 script's functions
(normalize_answer, compute_exact, compute_f1, get_raw_scores,
apply_no_ans_threshold, make_eval_dict, merge_eval, find_all_best_thresh);
the v2 script's main() and the v1.1 script's evaluate() are short and are
transcribed below around them. For random SQuAD v1.1 and v2.0 files (unicode,
punctuation, articles, empty and multiple gold answers, unanswerable and
repeated questions, missing predictions, no-answer probabilities with ties and
integers, several thresholds) the test checks that the binary prints exactly
the script's text, byte for byte, and writes exactly json.dump()'s with --out.

Through ctypes it also checks libtfcore's tf_squad_normalize_answer against
normalize_answer for every code point Python's Unicode database assigns (in
contexts that exercise lowercasing, the final-sigma rule, whitespace, word
boundaries and punctuation) and tf_squad_repr_double against repr(float).

Environment: $top_builddir (the binary is $top_builddir/core/tfcore, or
$TFCORE_BIN), $top_srcdir. Exit 0 pass, 1 fail, 77 skip.
"""
import collections
import ctypes
import glob
import json
import math
import os
import random
import string
import struct
import subprocess
import sys
import tempfile
import unicodedata

import tally
from tally import check

tally.show_at_most = 30

NAME = "squad_eval_vs_hf"

try:
    from transformers.data.metrics import squad_metrics as sm
except ImportError:  # removed in transformers 5.0: the reference is gone, not equal
    import transformers
    print(f"SKIP: {NAME}: transformers {transformers.__version__} has no "
          "transformers.data.metrics.squad_metrics (removed in 5.0)")
    sys.exit(77)
top_builddir = os.environ.get("top_builddir", ".")
TFCORE = os.environ.get("TFCORE_BIN", os.path.join(top_builddir, "core", "tfcore"))

# ---- the official scripts, around transformers' copies of their functions ----

class Example:  # what sm.get_raw_scores reads from a SquadExample
    def __init__(self, qa):
        self.qas_id = qa["id"]
        self.answers = qa["answers"]


def official_v2(dataset_json, preds, na_probs=None, na_prob_thresh=1.0):
    """evaluate-v2.0.py main(), minus the file handling and the plots."""
    dataset = dataset_json["data"]
    have_na_file = na_probs is not None
    if na_probs is None:
        na_probs = {k: 0.0 for k in preds}
    qid_to_has_ans = {}
    examples = []
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid_to_has_ans[qa["id"]] = bool(qa["answers"])
                examples.append(Example(qa))
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = sm.get_raw_scores(examples, preds)
    exact_thresh = sm.apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = sm.apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = sm.make_eval_dict(exact_thresh, f1_thresh)
    if has_ans_qids:
        has_ans_eval = sm.make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids)
        sm.merge_eval(out_eval, has_ans_eval, "HasAns")
    if no_ans_qids:
        no_ans_eval = sm.make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids)
        sm.merge_eval(out_eval, no_ans_eval, "NoAns")
    if have_na_file:
        sm.find_all_best_thresh(out_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
    return out_eval


def v1_f1_score(prediction, ground_truth):
    prediction_tokens = sm.normalize_answer(prediction).split()
    ground_truth_tokens = sm.normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def v1_exact_match_score(prediction, ground_truth):
    return sm.normalize_answer(prediction) == sm.normalize_answer(ground_truth)


def official_v1(dataset_json, predictions):
    """evaluate-v1.1.py evaluate()."""
    f1 = exact_match = total = 0
    for article in dataset_json["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                ground_truths = [x["text"] for x in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += max(v1_exact_match_score(prediction, g) for g in ground_truths)
                f1 += max(v1_f1_score(prediction, g) for g in ground_truths)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ---- random SQuAD files -------------------------------------------------------------

WORDS = [
    "the", "The", "THE", "a", "A", "an", "An", "AN", "cat", "Cat", "sat", "mat", "theory",
    "another", "ant", "apple", "Ölçü", "İstanbul", "straße", "STRASSE", "ΟΔΥΣΣΕΥΣ", "ΣΑΣ", "Σ",
    "σοφός", "naïve", "café", "cafe\u0301", "the\u0301", "日本", "北京大学", "é", "x_y", "the_",
    "1,000", "3.14", "1999", "½", "²", "Ⅻ", "ⅻ", "ǅ", "K", "\u212a", "ﬁ", "o'clock", "rock'n'roll",
    "U.S.", "e.g.", "—", "–", "...", "«quote»", "“smart”", "‘single’", "(paren)", "[b]", "{c}",
    "50%", "$5", "#1", "@home", "a-b", "C++", "¿qué?", "¡sí!", "🙂", "x\u200by", "Ǆ", "ΐ",
]
SPACES = [" ", " ", " ", " ", "  ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\u0085", "\u001c",
          "\u2028", "\u202f"]
PUNCT = list(string.punctuation) + ["", "", "", ""]


def random_text(rng, n):
    out = []
    for i in range(n):
        if i:
            out.append(rng.choice(SPACES))
        w = rng.choice(WORDS)
        if rng.random() < 0.15:
            w = rng.choice(PUNCT) + w + rng.choice(PUNCT)
        out.append(w)
    return "".join(out)


def mutate(rng, s):
    """A prediction near the gold answer."""
    r = rng.random()
    words = s.split(" ")
    if r < 0.25:
        return s
    if r < 0.35:
        return s.upper()
    if r < 0.45:
        return "the " + s + rng.choice(["!", ".", "", " a"])
    if r < 0.6 and len(words) > 1:
        return " ".join(words[rng.randrange(len(words)):])
    if r < 0.7:
        return s + " " + random_text(rng, rng.randint(1, 3))
    if r < 0.8:
        return ""
    if r < 0.85:
        return rng.choice(["the", "a", "!!", " ", "An"])
    return random_text(rng, rng.randint(1, 5))


def make_dataset(rng, v2, n_articles=3, dup_ids=False):
    data = []
    qn = 0
    all_ids = []
    for a in range(n_articles):
        paragraphs = []
        for _ in range(rng.randint(1, 3)):
            ctx = random_text(rng, rng.randint(5, 40))
            qas = []
            for _ in range(rng.randint(1, 6)):
                qid = f"q{qn:04x}"
                qn += 1
                if dup_ids and all_ids and rng.random() < 0.15:
                    qid = rng.choice(all_ids)
                all_ids.append(qid)
                impossible = v2 and rng.random() < 0.35
                answers = []
                if not impossible:
                    for _ in range(rng.randint(1, 4)):
                        i = rng.randrange(len(ctx))
                        j = min(len(ctx), i + rng.randint(0, 25))
                        text = ctx[i:j]
                        if rng.random() < 0.1:
                            text = rng.choice(["the", "!", "a an", ""])  # normalizes to ""
                            i = ctx.find(text) if ctx.find(text) >= 0 else 0
                        answers.append({"text": text, "answer_start": i})
                qa = {"id": qid, "question": random_text(rng, 4) + "?", "answers": answers}
                if v2:
                    qa["is_impossible"] = impossible
                    if impossible and rng.random() < 0.5:
                        qa["plausible_answers"] = [{"text": ctx[:5], "answer_start": 0}]
                qas.append(qa)
            paragraphs.append({"context": ctx, "qas": qas})
        data.append({"title": f"Article {a}", "paragraphs": paragraphs})
    return {"version": "v2.0" if v2 else "1.1", "data": data}


def qas_of(ds):
    for art in ds["data"]:
        for p in art["paragraphs"]:
            for qa in p["qas"]:
                yield qa


def make_preds(rng, ds, missing):
    preds = {}
    for qa in qas_of(ds):
        if rng.random() < missing:
            continue
        gold = qa["answers"][rng.randrange(len(qa["answers"]))]["text"] if qa["answers"] else ""
        preds[qa["id"]] = mutate(rng, gold)
    preds["not-a-question"] = "ignored"
    return preds


def make_na_probs(rng, preds):
    na = {}
    for k in preds:
        r = rng.random()
        if r < 0.2:
            na[k] = rng.choice([0, 1])  # integers print as integers
        elif r < 0.5:
            na[k] = round(rng.random(), 1)  # ties
        else:
            na[k] = rng.random()
    keys = list(na)
    rng.shuffle(keys)  # the order matters for ties: keep it random
    return {k: na[k] for k in keys}


# ---- running the binary ---------------------------------------------------------------

def run_cli(tmp, ds, preds, na=None, thresh=None):
    dpath, ppath, npath = (os.path.join(tmp, n) for n in ("data.json", "pred.json", "na.json"))
    opath = os.path.join(tmp, "out.json")
    with open(dpath, "w", encoding="utf-8") as f:
        json.dump(ds, f, ensure_ascii=bool(random.getrandbits(1)))
    with open(ppath, "w", encoding="utf-8") as f:
        json.dump(preds, f, ensure_ascii=False)
    args = [TFCORE, "squad-eval", dpath, ppath]
    if na is not None:
        with open(npath, "w", encoding="utf-8") as f:
            json.dump(na, f)
        args += ["--na-prob", npath]
    if thresh is not None:
        args += ["--na-prob-thresh", repr(thresh)]
    r1 = subprocess.run(args, capture_output=True)
    if os.path.exists(opath):
        os.unlink(opath)
    r2 = subprocess.run(args + ["--out", opath], capture_output=True)
    out_file = open(opath, "rb").read() if os.path.exists(opath) else None
    return r1, r2, out_file


def compare_v2(tmp, ds, preds, na, thresh, label):
    expected = official_v2(ds, preds, na, 1.0 if thresh is None else thresh)
    r1, r2, out_file = run_cli(tmp, ds, preds, na, thresh)
    want_stdout = (json.dumps(expected, indent=2) + "\n").encode()
    want_file = json.dumps(expected).encode()
    check(r1.returncode == 0 and r1.stdout == want_stdout,
          f"{label}: stdout differs (rc {r1.returncode})\n--- tfcore\n{r1.stdout.decode()}"
          f"{r1.stderr.decode()}--- official\n{want_stdout.decode()}")
    check(r2.returncode == 0 and r2.stdout == b"" and out_file == want_file,
          f"{label}: --out file differs: {out_file!r} vs {want_file!r}")


def compare_v1(tmp, ds, preds, label):
    expected = official_v1(ds, preds)
    r1, r2, out_file = run_cli(tmp, ds, preds)
    want = json.dumps(expected).encode()
    check(r1.returncode == 0 and r1.stdout == want + b"\n",
          f"{label}: stdout {r1.stdout!r} {r1.stderr.decode()} vs {want!r}")
    check(r2.returncode == 0 and out_file == want, f"{label}: --out {out_file!r} vs {want!r}")
    n_missing = sum(1 for qa in qas_of(ds) if qa["id"] not in preds)
    if n_missing:
        check(b"Unanswered question" in r1.stderr, f"{label}: no 'Unanswered question' warning")


def cli_tests(rng):
    with tempfile.TemporaryDirectory() as tmp:
        for it in range(60):
            ds = make_dataset(rng, v2=True, n_articles=rng.randint(1, 4), dup_ids=it % 5 == 4)
            preds = make_preds(rng, ds, missing=0.0)
            na = make_na_probs(rng, preds) if it % 3 else None
            thresh = [None, 0.5, 0.0, -1.0, 0.3, 1.0][it % 6]
            compare_v2(tmp, ds, preds, na, thresh, f"v2 #{it}")
        for it in range(40):
            ds = make_dataset(rng, v2=False, n_articles=rng.randint(1, 4), dup_ids=it % 5 == 4)
            preds = make_preds(rng, ds, missing=0.2 if it % 2 else 0.0)
            compare_v1(tmp, ds, preds, f"v1.1 #{it}")
        # v2 with missing predictions: the official script prints "Missing prediction for
        # ID" and then stops (KeyError in make_eval_dict); tfcore scores the predicted
        # questions only, i.e. the official result on the dataset restricted to them.
        for it in range(10):
            ds = make_dataset(rng, v2=True, n_articles=3)
            preds = make_preds(rng, ds, missing=0.3)
            na = make_na_probs(rng, preds)
            missing = [qa["id"] for qa in qas_of(ds) if qa["id"] not in preds]
            sub = json.loads(json.dumps(ds))
            for art in sub["data"]:
                for p in art["paragraphs"]:
                    p["qas"] = [qa for qa in p["qas"] if qa["id"] in preds]
            expected = official_v2(sub, preds, na, 1.0)
            r1, _, _ = run_cli(tmp, ds, preds, na)
            check(r1.returncode == 0 and r1.stdout == (json.dumps(expected, indent=2) + "\n").encode(),
                  f"v2 missing #{it}: {r1.stdout.decode()} {r1.stderr.decode()} vs {expected}")
            if missing:
                check(f"Missing prediction for {missing[0]}".encode() in r1.stderr,
                      f"v2 missing #{it}: no warning for {missing[0]}")
        # error paths of the verb
        ds = make_dataset(rng, v2=True)
        dpath = os.path.join(tmp, "d.json")
        json.dump(ds, open(dpath, "w"))
        ppath = os.path.join(tmp, "p.json")
        json.dump({"x": 1}, open(ppath, "w"))
        cases = [
            ([], 2), ([dpath], 2), ([dpath, ppath, "extra"], 2), ([dpath, ppath, "--bogus"], 2),
            ([dpath, ppath, "--na-prob-thresh", "abc"], 2), ([dpath, ppath, "--out"], 2),
            ([dpath, ppath], 5), ([dpath, os.path.join(tmp, "nope.json")], 5), (["--help"], 0),
        ]
        for args, rc in cases:
            r = subprocess.run([TFCORE, "squad-eval"] + args, capture_output=True)
            check(r.returncode == rc, f"squad-eval {args}: exit {r.returncode}, expected {rc}")


# ---- the library through ctypes ------------------------------------------------------------

def load_lib():
    for pat in ("core/.libs/libtfcore.so*", "core/libtfcore.so*"):
        for path in sorted(glob.glob(os.path.join(top_builddir, pat))):
            try:
                lib = ctypes.CDLL(path)
                lib.tf_squad_normalize_answer  # noqa: B018  (present?)
                return lib
            except (OSError, AttributeError):
                continue
    return None


def unicode_tests(lib):
    lib.tf_squad_normalize_answer.restype = ctypes.c_void_p
    lib.tf_squad_normalize_answer.argtypes = [ctypes.c_char_p]
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]

    def c_norm(s):
        p = lib.tf_squad_normalize_answer(s.encode("utf-8"))
        r = ctypes.string_at(p).decode("utf-8")
        libc.free(p)
        return r

    bad = []
    for cp in range(1, 0x110000):  # U+0000 cannot be in a C string (nor pass jansson)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if unicodedata.category(c) == "Cn":  # unassigned in Python's Unicode (14.0)
            continue
        for s in (f"A{c}Σ the{c}a{c}Σ", f"{c}Σ", f"Σ{c}", f"ΑΣ{c}Β", f"x{c}the", f"{c}an{c}"):
            if c_norm(s) != sm.normalize_answer(s):
                bad.append(cp)
                break
    check(not bad, f"normalize_answer differs for {len(bad)} code points: "
                   f"{[hex(b) for b in bad[:20]]}")
    rng = random.Random(7)
    n_bad = 0
    for _ in range(20000):
        s = random_text(rng, rng.randint(0, 12))
        if c_norm(s) != sm.normalize_answer(s):
            n_bad += 1
            if n_bad < 5:
                print(f"  normalize {s!r}: {c_norm(s)!r} vs {sm.normalize_answer(s)!r}")
    check(n_bad == 0, f"normalize_answer differs on {n_bad} random texts")


def repr_tests(lib):
    lib.tf_squad_repr_double.restype = ctypes.c_char_p
    lib.tf_squad_repr_double.argtypes = [ctypes.c_double, ctypes.c_char_p]
    buf = ctypes.create_string_buffer(32)
    rng = random.Random(11)
    values = [0.0, -0.0, 1.0, 100.0, 50.0, 66.66666666666667, 1e16, 1e15, 1234567890123456.0,
              9999999999999998.0, 1e-4, 1e-5, 0.0001, 0.00012345, 5e-324, 2.2250738585072014e-308,
              1.7976931348623157e308, 0.1, 0.2, 0.30000000000000004, 1 / 3, 2 / 3, 123456.789,
              math.inf, -math.inf, math.nan]
    values += [100.0 * k / n for n in range(1, 400) for k in range(0, n + 1)]
    values += [2.0 ** e for e in range(-1074, 1024)]
    values += [rng.random() for _ in range(100000)]
    values += [rng.uniform(-1e20, 1e20) for _ in range(20000)]
    while len(values) < 400000:
        v = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(v):
            values.append(v)
    n_bad = 0
    for v in values:
        want = json.dumps(v)
        got = lib.tf_squad_repr_double(v, buf).decode()
        if got != want:
            n_bad += 1
            if n_bad < 5:
                print(f"  repr {v!r}: {got} vs {want}")
    check(n_bad == 0, f"repr differs for {n_bad} of {len(values)} doubles")


def fixture_tests():
    """The expected outputs stored in tests/data/squad are the official ones."""
    d = os.path.join(os.environ.get("top_srcdir", "."), "tests", "data", "squad")

    def load(name):
        with open(os.path.join(d, name), encoding="utf-8") as f:
            return json.load(f)

    def text(name):
        with open(os.path.join(d, name), encoding="utf-8") as f:
            return f.read()

    v2, p2, n2 = load("mini-v2.0.json"), load("mini-v2.0.pred.json"), load("mini-v2.0.na.json")
    e = official_v2(v2, p2, n2, 1.0)
    check(text("mini-v2.0.expected.txt") == json.dumps(e, indent=2) + "\n", "mini-v2.0.expected.txt")
    check(text("mini-v2.0.expected-out.json") == json.dumps(e), "mini-v2.0.expected-out.json")
    e = official_v2(v2, p2, None, 0.4)
    check(text("mini-v2.0.expected-nona-t0.4.txt") == json.dumps(e, indent=2) + "\n",
          "mini-v2.0.expected-nona-t0.4.txt")
    e = official_v1(load("mini-v1.1.json"), load("mini-v1.1.pred.json"))
    check(text("mini-v1.1.expected.txt") == json.dumps(e) + "\n", "mini-v1.1.expected.txt")


def main():
    if not os.access(TFCORE, os.X_OK):
        print(f"{NAME}: FAIL: {TFCORE} not built")
        return 1
    r = subprocess.run([TFCORE, "squad-eval", "--help"], capture_output=True)
    if r.returncode != 0:
        print(f"{NAME}: FAIL: '{TFCORE} squad-eval --help' exits {r.returncode}: "
              f"{r.stderr.decode().strip()}")
        return 1
    random.seed(1)
    fixture_tests()
    cli_tests(random.Random(2024))
    lib = load_lib()
    if lib is None:
        check(False, f"libtfcore with tf_squad_normalize_answer not found under {top_builddir}/core")
    else:
        unicode_tests(lib)
        repr_tests(lib)
    print(f"{NAME}: {tally.passed} passed, {tally.failed} failed")
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
