#!/usr/bin/env python3
"""Write what tests/test_datasets.sh serves from tests/dataset_server.py:

  ROOT/honest/aclImdb_v1.tar.gz   a small aclImdb: reviews in train/{pos,neg}
                                  and test/{pos,neg}; its tree (one path a
                                  line, sorted) goes to ROOT/honest.tree
  ROOT/<case>/aclImdb_v1.tar.gz   hostile archives, one attack each:
      traversal  a file named aclImdb/../../../escaped-traversal
      absolute   a file named /tmp/.../escaped-absolute (under ROOT)
      symlink    a link aclImdb/out -> ../../../.. and a file written through it
      through    a link aclImdb/in -> train (inside), then a file aclImdb/in/x
                 (written through a link: refused even when the link stays inside)
      hardlink   a hard link aclImdb/h -> ../../../escaped-hardlink
      device     a character device aclImdb/null (1, 3)
      fifo       a FIFO aclImdb/pipe
      bomb       aclImdb/big: 2,000,000 zero bytes (a few kB compressed)
      entries    5,000 empty files
  ROOT/squad/{train,dev}-v1.1.json and {train,dev}-v2.0.json   small SQuAD files
Usage: dataset_fixture.py ROOT SRCDIR
"""
import io
import os
import shutil
import sys
import tarfile

root, srcdir = sys.argv[1], sys.argv[2]

REVIEWS = {
    "train/pos": ["a very good film", "great movie and great acting", "i liked it a lot"],
    "train/neg": ["a bad film", "awful and boring", "i did not like it"],
    "test/pos": ["good and great", "the best film"],
    "test/neg": ["bad and awful", "the worst film"],
}


def add_file(tar, name, data, **kw):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    for k, v in kw.items():
        setattr(ti, k, v)
    tar.addfile(ti, io.BytesIO(data))


def add_dir(tar, name):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mode = 0o755
    tar.addfile(ti)


def add_special(tar, name, typ, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = typ
    for k, v in kw.items():
        setattr(ti, k, v)
    tar.addfile(ti)


def honest_entries(tar, tree):
    add_dir(tar, "aclImdb")
    tree.append("aclImdb")
    for split in ("train", "test"):
        add_dir(tar, "aclImdb/" + split)
        tree.append("aclImdb/" + split)
        for label in ("pos", "neg"):
            folder = "%s/%s" % (split, label)
            add_dir(tar, "aclImdb/" + folder)
            tree.append("aclImdb/" + folder)
            for i, text in enumerate(REVIEWS[folder]):
                rating = 8 if label == "pos" else 2
                name = "aclImdb/%s/%d_%d.txt" % (folder, i, rating)
                add_file(tar, name, text.encode())
                tree.append(name)


def archive(case, build):
    os.makedirs(os.path.join(root, case), exist_ok=True)
    with tarfile.open(os.path.join(root, case, "aclImdb_v1.tar.gz"), "w:gz", format=tarfile.GNU_FORMAT) as tar:
        build(tar)


tree = []
archive("honest", lambda t: honest_entries(t, tree))
with open(os.path.join(root, "honest.tree"), "w") as f:
    f.write("\n".join(sorted(tree)) + "\n")


def hostile(case, attack):
    def build(tar):
        honest_entries(tar, [])
        attack(tar)
    archive(case, build)


hostile("traversal", lambda t: add_file(t, "aclImdb/../../../escaped-traversal", b"x"))
hostile("absolute", lambda t: add_file(t, os.path.abspath(os.path.join(root, "escaped-absolute")), b"x"))


def symlink_escape(t):
    add_special(t, "aclImdb/out", tarfile.SYMTYPE, linkname="../../../..")
    add_file(t, "aclImdb/out/escaped-symlink", b"x")


hostile("symlink", symlink_escape)


def through_link(t):
    add_special(t, "aclImdb/in", tarfile.SYMTYPE, linkname="train")
    add_file(t, "aclImdb/in/x", b"x")


hostile("through", through_link)
hostile("hardlink", lambda t: add_special(t, "aclImdb/h", tarfile.LNKTYPE, linkname="../../../escaped-hardlink"))
hostile("device", lambda t: add_special(t, "aclImdb/null", tarfile.CHRTYPE, devmajor=1, devminor=3, mode=0o666))
hostile("fifo", lambda t: add_special(t, "aclImdb/pipe", tarfile.FIFOTYPE, mode=0o644))
hostile("bomb", lambda t: add_file(t, "aclImdb/big", bytes(2000000)))


def many(t):
    for i in range(5000):
        add_file(t, "aclImdb/e/%d" % i, b"")


hostile("entries", many)

squad = os.path.join(root, "squad")
os.makedirs(squad, exist_ok=True)
for version in ("v1.1", "v2.0"):
    src = os.path.join(srcdir, "tests", "data", "squad", "mini-%s.json" % version)
    for split in ("train", "dev"):
        shutil.copyfile(src, os.path.join(squad, "%s-%s.json" % (split, version)))
