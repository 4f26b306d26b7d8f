"""model_bert_harness: what the reference tests of tests/model_bert_driver
against transformers share (tests/ref/model_bert_vs_hf.py in fp32,
tests/ref/model_bert_bf16_vs_autocast.py in bf16): the worst error of each
kind and the summary, one driver run, a random-init BERT with every
parameter perturbed and saved where the driver loads it, a padded batch, and
the Trainer's AdamW parameter groups. Checks count in tests/ref/tally.py.

Imported from the test's own folder (Python puts a script's folder first on
sys.path); importing it quiets transformers' logging and holds torch to 2
threads, as both tests run.
"""
import os
import subprocess

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from transformers import BertConfig
from transformers.utils import logging as hf_logging

import tally

hf_logging.set_verbosity_error()
torch.set_num_threads(2)

top_builddir = os.environ.get("top_builddir", ".")
DRIVER = os.path.join(top_builddir, "tests", "model_bert_driver")
LR = 1e-3
WD = 0.01

worst = {}  # kind -> (worst value, where)


def note_worst(kind, value, where):
    if kind not in worst or value > worst[kind][0]:
        worst[kind] = (value, where)


def rel_elementwise(a, b):
    """max |a-b| / max(1, |b|) elementwise, in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def report(prog, label):
    """Prints "worst <label(kind)> <value> (<where>)" for every kind, sorted,
    then "<prog>: N passed, M failed"; returns the exit status (0 / 1)."""
    for kind, (v, where) in sorted(worst.items()):
        print("worst %s %.3g (%s)" % (label(kind), v, where))
    print("%s: %d passed, %d failed" % (prog, tally.passed, tally.failed))
    return 0 if tally.failed == 0 else 1


def run_driver(work, cfg_text, batch, args, out_name="out.safetensors"):
    """tests/model_bert_driver on cfg_text and batch (int32 arrays), both
    written to the folder work, with lr LR and weight decay WD and the extra
    args: (the output tensors, or None when it failed; the finished process,
    whose args and stderr say why)."""
    cfg = os.path.join(work, "run.cfg")
    with open(cfg, "w") as f:
        f.write(cfg_text)
    bpath = os.path.join(work, "batch.safetensors")
    save_file({k: np.ascontiguousarray(v, dtype=np.int32) for k, v in batch.items()}, bpath)
    out = os.path.join(work, out_name)
    cmd = [DRIVER, "--config", cfg, "--batch", bpath, "--out", out,
           "--lr", str(LR), "--weight-decay", str(WD)] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (load_file(out) if p.returncode == 0 else None), p


def perturbed_model(hf_cls, cfg, num_labels, seed):
    """hf_cls on BertConfig(**cfg) without dropout, initialised from torch
    seed `seed`, then every parameter moved by 0.05 N(0, 1): random-init
    biases are 0 and LayerNorms 1/0, and the perturbation makes the bias
    epilogues, LayerNorm affine terms and biases really tested."""
    torch.manual_seed(seed)
    config = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        num_labels=num_labels, **cfg)
    model = hf_cls(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def save_for_driver(model, folder, task):
    """model.save_pretrained(folder/hf); the driver's config text loading it."""
    hf_dir = os.path.join(folder, "hf")
    model.save_pretrained(hf_dir)
    return 'model = { pretrained = "%s"; task = "%s"; };\n' % (hf_dir, task)


def make_batch(rng, task, V, B, S, lengths, num_labels=2, pairs=True, token_types=True):
    """B rows of S tokens, row r holding lengths[r] random ids in [1, V) then
    padding (attention_mask 0); with pairs, the second half of a row longer
    than 3 is token type 1; token_types=False leaves token_type_ids out.
    Labels for classification; start/end positions for QA, with one start
    past the end and one end below 0 when B > 2 (both clamped)."""
    ids = np.zeros((B, S), np.int32)
    types = np.zeros((B, S), np.int32)
    mask = np.zeros((B, S), np.int32)
    for r, n in enumerate(lengths):
        ids[r, :n] = rng.integers(1, V, n)
        mask[r, :n] = 1
        if pairs and n > 3:
            types[r, n // 2:n] = 1
    batch = {"input_ids": ids, "attention_mask": mask}
    if token_types:
        batch["token_type_ids"] = types
    if task == "classification":
        batch["labels"] = rng.integers(0, num_labels, B).astype(np.int32)
    else:
        st = rng.integers(0, S, B).astype(np.int32)
        en = np.minimum(st + rng.integers(0, 4, B), S - 1).astype(np.int32)
        if B > 2:
            st[-1] = S + 7   # clamped to S = ignore_index
            en[-2] = -3      # clamped to 0
        batch["start_positions"] = st
        batch["end_positions"] = en
    return batch


def torch_batch(batch):
    return {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}


def adamw_for(model):
    """Trainer's parameter groups: no decay on biases and LayerNorm parameters."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if ("bias" in n or "LayerNorm" in n) else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                              {"params": no_decay, "weight_decay": 0.0}], lr=LR, eps=1e-8)
