"""length_grouped_vs_transformers — training.group_by_length's order against
transformers' get_length_grouped_indices (trainer_pt_utils, what the Trainer's
LengthGroupedSampler iterates).

transformers draws its permutation with torch.randperm (the global generator
that set_seed seeds, in Trainer); tfcore draws its own from (seed, epoch)
(sampler.c) and does not reproduce torch's Mersenne-Twister stream. So the
comparison is given the same permutation: tests/length_group_tool prints
tfcore's permutation and its grouped order, and the reference runs
get_length_grouped_indices with torch.randperm replaced by that permutation.
The orders must be equal element for element: megabatch size (50 batches, or
fewer for 4 megabatches), the stable sort by length (ties in permutation
order), the longest row swapped to the front. The tool's third line (the
shards of W workers) must be the global order sliced as the plain sampler
slices it: rank r takes positions r, r+W, ... of the grouped order.
"""
import os
import random
import subprocess
import sys

import torch
from transformers import trainer_pt_utils

import tally
from tally import check

top_builddir = os.environ["top_builddir"]
tool = os.path.join(top_builddir, "tests", "length_group_tool")
def case(n, batch, seed, epoch, world, lengths, what):
    text = f"{n} {batch} {seed} {epoch} {world}\n" + " ".join(map(str, lengths)) + "\n"
    out = subprocess.run([tool], input=text, capture_output=True, text=True, check=True).stdout.splitlines()
    perm, ours, shards = ([int(x) for x in line.split()] for line in out)
    check(sorted(perm) == list(range(n)), f"{what}: the permutation is not one")
    real = torch.randperm
    torch.randperm = lambda k, generator=None: torch.tensor(perm[:k], dtype=torch.long)
    try:
        ref = trainer_pt_utils.get_length_grouped_indices(lengths, batch)
    finally:
        torch.randperm = real
    check(ours == ref, f"{what}: order differs from transformers' at position "
          f"{next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), None)}")
    # rank r's rows: positions r, r+W, ... of the global order, wrapped to a multiple of W
    padded = ours + ours[: (-n) % world]
    want = [padded[p] for r in range(world) for p in range(r, len(padded), world)]
    check(shards == want, f"{what}: the shards of {world} workers are not the global order's slices")


rng = random.Random(5)
# IMDB-like lengths, one megabatch short (n < 4 * batch: mult 1), ties everywhere, exact multiples
case(1000, 16, 42, 0, 2, [rng.randint(64, 512) for _ in range(1000)], "1000 rows, batch 16")
case(1000, 16, 42, 1, 2, [rng.randint(64, 512) for _ in range(1000)], "1000 rows, batch 16, epoch 1")
case(5000, 8, 7, 3, 4, [rng.randint(20, 300) for _ in range(5000)], "5000 rows, batch 8 (mult 50)")
case(37, 16, 1, 0, 3, [rng.randint(5, 40) for _ in range(37)], "37 rows, batch 16 (mult 1)")
case(640, 32, 9, 2, 2, [rng.choice([10, 20, 30]) for _ in range(640)], "640 rows of three lengths (ties)")
case(256, 4, 3, 0, 1, [100] * 256, "all rows of one length")
case(1, 8, 0, 0, 1, [12], "one row")

print(f"length_grouped_vs_transformers: {tally.passed} passed, {tally.failed} failed "
      f"(transformers {__import__('transformers').__version__}, torch {torch.__version__})")
sys.exit(1 if tally.failed else 0)
