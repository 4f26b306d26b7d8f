#!/usr/bin/env python3
"""model_bert_bf16_vs_autocast: precision bf16 on backend-cpu (f32
activations, GEMM inputs rounded to bf16, fp32 accumulation; through
tests/model_bert_driver --matmul bf16) against transformers'
BertForSequenceClassification under torch.autocast("cpu", dtype=torch.bfloat16),
the recipe a PyTorch CPU user runs.

Two sides that each round to bf16 (8 significant bits, a relative step of
2^-8 = 0.0039) differ by bf16 noise, not by a fixed amount, so each check is
stated against that noise:
  1. logits of a training forward (dropout 0):
     |tfcore - autocast| <= 0.01 * max(1, |autocast|)
  2. the loss: within 0.005 * max(1, loss)
  3. every parameter's gradient: max|a-b| <= 0.06 * max|b| over the tensor
  4. 10 AdamW steps (lr 1e-3): every step's loss within 0.01 * max(1, loss)
  5. tfcore bf16 is no further from fp32 transformers than autocast is
     (logits and loss: tfcore's distance <= 1.5x autocast's + 1e-3), so the
     agreement in 1-4 is not two wrong answers agreeing
  (worst seen on a Xeon with AMX, oneDNN 2.6, torch 1.13: logits 0.0023,
  loss 0.0003, gradients 0.020, step losses 0.0011, distance ratio 1.03)
  6. and it is really bf16: tfcore's bf16 logits differ from tfcore's fp32
     logits by more than 1e-5 (the fp32 reference test's bound)
On a CPU or build without bf16 GEMMs the driver is refused: exit 77.
Prints the worst error of each kind, then
"model_bert_bf16_vs_autocast: N passed, M failed"; exit 0 / 1 (77: skipped).
"""
import os
import sys
import tempfile

import numpy as np
import torch
from transformers import BertForSequenceClassification

import model_bert_harness as harness
from model_bert_harness import (DRIVER, adamw_for, make_batch, note_worst, perturbed_model,
                                rel_elementwise, save_for_driver, torch_batch)
from tally import check

STEPS = 10


def close(kind, r, tol, where):
    note_worst(kind, r, where)
    return check(r <= tol, "%s: %s %.3g > %g" % (where, kind, r, tol))


def run_driver(work, cfg_text, batch, matmul):
    tf, p = harness.run_driver(work, cfg_text, batch, ["--steps", str(STEPS), "--matmul", matmul],
                               out_name="out-%s.safetensors" % matmul)
    return tf, p.stderr.strip()


def hf_run(model, tb, autocast):
    """step-1 logits, loss and gradients, and every step's loss, as the
    Trainer runs with bf16=True on the CPU (autocast around forward and loss;
    backward outside it; fp32 master weights and AdamW)."""
    opt = adamw_for(model)
    losses, first = [], None
    for step in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(**tb)
        out.loss.backward()
        losses.append(out.loss.item())
        if step == 0:
            first = (out.logits.float().detach().numpy(), out.loss.item(),
                     {n: (p.grad.detach().float().clone().numpy() if p.grad is not None else np.zeros(p.shape))
                      for n, p in model.named_parameters()})
        opt.step()
    return first, losses


CASES = [
    # name, config, B, S, lengths
    ("cls-gelu", dict(vocab_size=211, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=256, hidden_act="gelu", max_position_embeddings=40),
     4, 32, [32, 20, 11, 5]),
    ("cls-gelu_new", dict(vocab_size=97, hidden_size=96, num_hidden_layers=3,
                          num_attention_heads=3, intermediate_size=192, hidden_act="gelu_new",
                          max_position_embeddings=24),
     3, 24, [24, 13, 24]),
]


def run_case(work, idx, case):
    name, cfg, B, S, lengths = case
    model = perturbed_model(BertForSequenceClassification, cfg, 3, 3000 + idx)
    rng = np.random.default_rng(4000 + idx)
    cfg_text = save_for_driver(model, os.path.join(work, name), "classification")
    batch = make_batch(rng, "classification", cfg["vocab_size"], B, S, lengths, num_labels=3,
                       pairs=False, token_types=False)
    tf16, why = run_driver(os.path.join(work, name), cfg_text, batch, "bf16")
    if tf16 is None:
        if "no bf16 GEMMs" in why:
            print("SKIP: backend-cpu has no bf16 GEMMs here: " + why)
            sys.exit(77)
        check(False, "%s: driver --matmul bf16 failed: %s" % (name, why))
        return
    tf32, why = run_driver(os.path.join(work, name), cfg_text, batch, "fp32")
    if not check(tf32 is not None, "%s: driver --matmul fp32 failed: %s" % (name, why)):
        return
    tb = torch_batch(batch)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    (ac_logits, ac_loss, ac_grads), ac_losses = hf_run(model, tb, True)
    model.load_state_dict(state)
    (fp_logits, fp_loss, _), _ = hf_run(model, tb, False)

    close("logits", rel_elementwise(tf16["logits"], ac_logits), 0.01, name + " logits")
    close("loss", rel_elementwise(tf16["loss"][0], ac_loss), 0.005, name + " loss")
    for n, g in ac_grads.items():
        key = "grad." + n
        if not check(key in tf16, "%s: no gradient for %s" % (name, n)):
            continue
        scale = float(np.max(np.abs(g)))
        if scale == 0.0 or n.endswith("attention.self.key.bias"):
            continue  # exactly 0 in exact arithmetic: both sides are noise
        r = float(np.max(np.abs(tf16[key].astype(np.float64) - g))) / scale
        close("grad", r, 0.06, "%s grad %s" % (name, n))
    for i, (a, b) in enumerate(zip(tf16["step_losses"], ac_losses)):
        close("step loss", rel_elementwise(a, b), 0.01, "%s step %d loss" % (name, i + 1))
    # no further from fp32 than autocast is
    d_tf = rel_elementwise(tf16["logits"], fp_logits)
    d_ac = rel_elementwise(ac_logits, fp_logits)
    close("logits distance to fp32 / autocast's", d_tf / max(d_ac, 1e-12), 1.5 + 1e-3 / max(d_ac, 1e-12),
          name + " logits vs fp32")
    d_tf = rel_elementwise(tf16["loss"][0], fp_loss)
    d_ac = rel_elementwise(ac_loss, fp_loss)
    check(d_tf <= 1.5 * d_ac + 1e-3,
          "%s loss: tfcore bf16 is %.3g from fp32, autocast %.3g" % (name, d_tf, d_ac))
    # really bf16
    check(rel_elementwise(tf16["logits"], tf32["logits"]) > 1e-5,
          "%s: bf16 logits equal fp32 logits: the GEMMs did not round" % name)


def main():
    if not os.path.exists(DRIVER):
        print("SKIP: no " + DRIVER)
        return 77
    with tempfile.TemporaryDirectory() as work:
        for i, case in enumerate(CASES):
            os.makedirs(os.path.join(work, case[0]))
            run_case(work, i, case)
    return harness.report("model_bert_bf16_vs_autocast", lambda kind: "%-40s" % kind)


if __name__ == "__main__":
    sys.exit(main())
