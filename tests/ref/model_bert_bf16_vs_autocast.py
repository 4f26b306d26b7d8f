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
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from transformers import BertConfig, BertForSequenceClassification
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
torch.set_num_threads(2)

top_builddir = os.environ.get("top_builddir", ".")
DRIVER = os.path.join(top_builddir, "tests", "model_bert_driver")
STEPS = 10
LR = 1e-3
WD = 0.01
passed = failed = 0
worst = {}


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)
    return ok


def rel_elementwise(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def close(kind, r, tol, where):
    if kind not in worst or r > worst[kind][0]:
        worst[kind] = (r, where)
    return check(r <= tol, "%s: %s %.3g > %g" % (where, kind, r, tol))


def run_driver(work, cfg_text, batch, matmul):
    cfg = os.path.join(work, "run.cfg")
    with open(cfg, "w") as f:
        f.write(cfg_text)
    bpath = os.path.join(work, "batch.safetensors")
    save_file({k: np.ascontiguousarray(v, dtype=np.int32) for k, v in batch.items()}, bpath)
    out = os.path.join(work, "out-%s.safetensors" % matmul)
    cmd = [DRIVER, "--config", cfg, "--batch", bpath, "--out", out, "--steps", str(STEPS),
           "--lr", str(LR), "--weight-decay", str(WD), "--matmul", matmul]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (load_file(out) if p.returncode == 0 else None), p.stderr.strip()


def adamw_for(model):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if ("bias" in n or "LayerNorm" in n) else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                              {"params": no_decay, "weight_decay": 0.0}], lr=LR, eps=1e-8)


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
    torch.manual_seed(3000 + idx)
    rng = np.random.default_rng(4000 + idx)
    config = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3,
                        **cfg)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hf_dir = os.path.join(work, name, "hf")
    model.save_pretrained(hf_dir)
    ids = np.zeros((B, S), np.int32)
    mask = np.zeros((B, S), np.int32)
    for r, n in enumerate(lengths):
        ids[r, :n] = rng.integers(1, cfg["vocab_size"], n)
        mask[r, :n] = 1
    batch = {"input_ids": ids, "attention_mask": mask,
             "labels": rng.integers(0, 3, B).astype(np.int32)}
    cfg_text = 'model = { pretrained = "%s"; task = "classification"; };\n' % hf_dir
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
    tb = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
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
    for kind, (v, where) in sorted(worst.items()):
        print("worst %-40s %.3g (%s)" % (kind, v, where))
    print("model_bert_bf16_vs_autocast: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
