#!/usr/bin/env python3
"""Writes tests/golden/kquant_rmse.json: the reconstruction error of llama.cpp's own K-quant
reference quantizers (quantize_row_qX_K_ref, the path llama-quantize takes without an importance
matrix) on the dataset of tools/kquant_dataset.py. Our quantizers must do at least as well.

The oracle is llama.cpp as built into the PyPI wheel `xllamacpp`, whose extension module exports
the ggml C symbols; we call them through ctypes, so no llama.cpp code enters this repository.
Dequantization is gguf-py's (numpy, independent of both quantizers).

Setup (outside the repository, never in CI):
  pip download --no-deps xllamacpp==2026.10.11549 -d /work/.cache-oracle
  unzip the wheel into /work/.cache-oracle/xl
Usage: .venv/bin/python tools/kquant_reference.py [--lib PATH/xllamacpp.abi3.so] [--check]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, quants
from gguf.constants import GGML_QUANT_SIZES

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kquant_dataset as ds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "kquant_rmse.json"
DEFAULT_LIB = Path("/work/.cache-oracle/xl/xllamacpp/xllamacpp.abi3.so")
# xllamacpp versions are <year>.<month>.<llama.cpp build number>; the wheel carries no commit.
ORACLE = {
    "package": "xllamacpp 2026.10.11549 (PyPI wheel, manylinux2014 x86_64)",
    "llama_cpp": "build b11549 (xllamacpp revision 64fbe0fe7c407d5d6418bc794d89cf553736d9e3)",
    "functions": "quantize_row_{q2,q3,q4,q5,q6}_K_ref",
}


def quantize_with_llama(lib: ctypes.CDLL, qtype: str, x: np.ndarray) -> np.ndarray:
    """[rows, cols] float32 -> [rows, bytes_per_row] uint8 with llama.cpp's reference quantizer."""
    block_elems, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[qtype]]
    rows, cols = x.shape
    out = np.zeros((rows, cols // block_elems * block_bytes), dtype=np.uint8)
    fn = getattr(lib, f"quantize_row_{qtype.lower()[:2]}_K_ref")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    fn(x.ctypes.data, out.ctypes.data, x.size)  # rows are contiguous: one call quantizes all
    return out


def errors(x: np.ndarray, blocks: np.ndarray, qtype: str) -> dict[str, float]:
    """rmse over all values, and nrmse: per-row RMSE divided by the row's RMS, averaged in
    quadrature, so small-magnitude rows count as much as large ones."""
    y = quants.dequantize(blocks, GGMLQuantizationType[qtype]).reshape(x.shape)
    diff = x.astype(np.float64) - y.astype(np.float64)
    row_ms = np.mean(x.astype(np.float64) ** 2, axis=1)
    nrmse = float(np.sqrt(np.mean(np.mean(diff * diff, axis=1) / row_ms)))
    return {"rmse": ds.rmse(x, y), "nrmse": nrmse}


def measure(lib: ctypes.CDLL) -> dict:
    results: dict[str, dict] = {}
    for qtype in ds.K_TYPES:
        results[qtype] = {}
        for name in ds.DATASETS:
            x = ds.dataset(name)
            results[qtype][name] = errors(x, quantize_with_llama(lib, qtype, x), qtype)
    return {
        "about": "llama.cpp reference K-quant reconstruction error; written by tools/kquant_reference.py",
        "oracle": ORACLE,
        "dequantizer": "gguf-py quants.dequantize (gguf==0.19.0)",
        "dataset": {"rows": ds.ROWS, "cols": ds.COLS, "recipe": ds.RECIPE},
        "llama_cpp": results,
    }


def rounded(value):
    """Seven significant digits: stable across numpy versions' summation order, still strict."""
    if isinstance(value, float):
        return float(f"{value:.7g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", type=Path, default=DEFAULT_LIB)
    parser.add_argument("--check", action="store_true", help="compare with the committed golden")
    args = parser.parse_args()
    lib = ctypes.CDLL(str(args.lib))
    golden = rounded(measure(lib))
    text = json.dumps(golden, indent=1) + "\n"
    if args.check:
        if GOLDEN.read_text() != text:
            print(f"{GOLDEN} is stale; rerun without --check", file=sys.stderr)
            return 1
        return 0
    GOLDEN.write_text(text)
    for qtype, per_set in golden["llama_cpp"].items():
        print(qtype, " ".join(f"{k}={v['nrmse']:.5f}" for k, v in per_set.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
