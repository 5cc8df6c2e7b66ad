"""Bit-exact parity of quant/'s reference kernels with gguf-py (itself bit-exact with ggml).

Every dequantizable type: random blocks (scale fields forced finite) through the C++ harness,
compared as uint32 with gguf.quants.dequantize, or, for types gguf-py lacks, with a numpy or
ml_dtypes definition. Every quantizable type gguf-py can also produce: random and edge-case
floats, compared byte for byte with gguf.quants.quantize.
"""
from __future__ import annotations

import os
import sys
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402
from gguf import quants  # noqa: E402

ml_dtypes = pytest.importorskip("ml_dtypes")

BUILD_DIR = Path(os.environ.get("SLUICE_BUILD_DIR", "build"))
HARNESS = BUILD_DIR / "harness" / "quant_harness"
N_BLOCKS = 512

pytestmark = pytest.mark.skipif(not HARNESS.exists(), reason=f"{HARNESS} not built")


def run(args: list[str], data: bytes) -> bytes:
    proc = subprocess.run([str(HARNESS), *args], input=data, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def harness_dequant(name: str, raw: np.ndarray) -> np.ndarray:
    return np.frombuffer(run(["dequant", name], raw.tobytes()), dtype=np.float32)


def finite_halves(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random half bit patterns (zeros, subnormals, negatives, up to 65504), never inf/NaN."""
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    return np.where((h & 0x7C00) == 0x7C00, h & ~np.uint16(0x4000), h).astype(np.uint16)


# Byte offsets of the IEEE-half scale fields in each block (gguf-py's block layouts).
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q8_1: [0, 2],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0],
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.TQ1_0: [52], T.TQ2_0: [64], T.Q1_0: [0],
}
Q8_1_BYTES = 36  # ggml's block_q8_1; gguf-py 0.19's size table says 40


def random_blocks(qtype: T, rng: np.random.Generator) -> np.ndarray:
    type_size = Q8_1_BYTES if qtype == T.Q8_1 else GGML_QUANT_SIZES[qtype][1]
    blocks = rng.integers(0, 256, size=(N_BLOCKS, type_size), dtype=np.uint8)
    for offset in HALF_FIELDS.get(qtype, []):
        blocks[:, offset : offset + 2] = finite_halves(rng, N_BLOCKS).view(np.uint8).reshape(-1, 2)
    if qtype == T.IQ1_M:
        # The block's half scale is spread over the top nibbles of the four uint16 scale words.
        d = finite_halves(rng, N_BLOCKS)
        words = blocks[:, 48:56].copy().view(np.uint16)
        for k in range(4):
            nibble = (d >> np.uint16(4 * k)) & np.uint16(0xF)
            words[:, k] = (words[:, k] & np.uint16(0x0FFF)) | (nibble << np.uint16(12))
        blocks[:, 48:56] = words.view(np.uint8)
    if qtype == T.MXFP4:
        # E8M0 exponents: the subnormal cases 0 and 1, then a sane range (2^(e-127) * 6 finite).
        e = rng.integers(90, 170, size=N_BLOCKS, dtype=np.uint8)
        e[:4] = [0, 1, 2, 127]
        blocks[:, 0] = e
    if qtype == T.NVFP4:
        # UE4M3 sub-block scales are all finite; pin the special codes: zero, the NaN code 0x7F
        # (read as 0), the smallest subnormal, bit 7 set (ignored), the largest finite.
        blocks[0, 0:4] = [0x00, 0x7F, 0x01, 0x80]
        blocks[1, 0:4] = [0xFF, 0x7E, 0x38, 0x08]
    if qtype == T.Q8_K:
        d = (rng.standard_normal(N_BLOCKS) * np.exp2(rng.uniform(-20, 20, N_BLOCKS))).astype(np.float32)
        blocks[:, 0:4] = d.view(np.uint8).reshape(-1, 4)
    return blocks


BLOCK_TYPES = [
    T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K,
    T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS, T.IQ3_S, T.IQ1_S, T.IQ1_M, T.IQ4_NL, T.IQ4_XS,
    T.TQ1_0, T.TQ2_0, T.MXFP4, T.NVFP4,
]


def assert_bit_equal(got: np.ndarray, want: np.ndarray) -> None:
    want = np.ascontiguousarray(want, dtype=np.float32).ravel()
    assert got.shape == want.shape
    assert not np.isnan(want).any(), "test data should never produce NaN"
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert diff.size == 0, f"{diff.size} mismatches, first at {diff[0]}: {got[diff[0]]!r} vs {want[diff[0]]!r}"


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda t: t.name)
def test_dequantize_matches_gguf(qtype: T) -> None:
    rng = np.random.default_rng(1000 + int(qtype))
    blocks = random_blocks(qtype, rng)
    assert_bit_equal(harness_dequant(qtype.name, blocks), quants.dequantize(blocks, qtype))


def test_dequantize_q8_1_and_q8_k_by_definition() -> None:
    # gguf-py has no Q8_1 / Q8_K: their definition is d * q (ggml's dequantize_row_q8_K).
    rng = np.random.default_rng(7)
    blocks = random_blocks(T.Q8_1, rng)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    want = d * blocks[:, 4:].view(np.int8).astype(np.float32)
    assert_bit_equal(harness_dequant("Q8_1", blocks), want)

    blocks = random_blocks(T.Q8_K, rng)
    d = blocks[:, 0:4].copy().view(np.float32)
    want = d * blocks[:, 4:260].view(np.int8).astype(np.float32)
    assert_bit_equal(harness_dequant("Q8_K", blocks), want)


def test_dequantize_q1_0_by_definition() -> None:
    # gguf-py 0.19 defines Q1_0's size but no dequantizer: ggml's dequantize_row_q1_0 gives d for
    # a set bit (bit j % 8 of byte j / 8) and -d for a clear one.
    blocks = random_blocks(T.Q1_0, np.random.default_rng(41))
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    bits = np.unpackbits(blocks[:, 2:], axis=-1, bitorder="little").astype(bool)
    assert_bit_equal(harness_dequant("Q1_0", blocks), np.where(bits, d, -d))


def finite_bits(rng: np.random.Generator, dtype, n: int) -> np.ndarray:
    bits = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}[dtype]
    raw = rng.integers(0, np.iinfo(bits).max, size=n, dtype=bits, endpoint=True).view(dtype)
    return np.where(np.isnan(raw), dtype(1.5), raw).astype(dtype)


def test_dequantize_plain_floats() -> None:
    rng = np.random.default_rng(11)
    f32 = finite_bits(rng, np.float32, 4096)
    assert_bit_equal(harness_dequant("F32", f32), quants.dequantize(f32.view(np.uint8), T.F32))
    f16 = finite_bits(rng, np.float16, 4096)  # infinities included
    got = harness_dequant("F16", f16)
    want = quants.dequantize(f16.view(np.uint8), T.F16)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    bf16 = rng.integers(0, 1 << 16, size=4096, dtype=np.uint16)
    bf16 = np.where((bf16 & 0x7F80) == 0x7F80, bf16 & ~np.uint16(0x0080), bf16).astype(np.uint16)
    assert_bit_equal(harness_dequant("BF16", bf16), quants.dequantize(bf16.view(np.uint8), T.BF16))
    f64 = np.concatenate([finite_bits(rng, np.float64, 2048),
                          rng.standard_normal(2048) * np.exp2(rng.uniform(-140, 140, 2048))])
    with np.errstate(over="ignore"):
        want = f64.astype(np.float32)  # out-of-range doubles become infinities on both sides
    got = harness_dequant("F64", f64)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name,dtype", [("I8", np.int8), ("I16", np.int16), ("I32", np.int32),
                                        ("I64", np.int64), ("U8", np.uint8)])
def test_dequantize_integers(name: str, dtype) -> None:
    rng = np.random.default_rng(17)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size=4096, dtype=dtype, endpoint=True)
    values[:4] = [info.min, info.max, 0, 1]
    assert_bit_equal(harness_dequant(name, values), values.astype(np.float32))


def test_dequantize_bool() -> None:
    values = np.array([0, 1, 1, 0, 2, 255], dtype=np.uint8)
    assert_bit_equal(harness_dequant("BOOL", values), np.array([0, 1, 1, 0, 1, 1], np.float32))


@pytest.mark.parametrize("name,dtype", [("F8_E4M3", ml_dtypes.float8_e4m3fn),
                                        ("F8_E5M2", ml_dtypes.float8_e5m2)])
def test_dequantize_fp8_every_code(name: str, dtype) -> None:
    codes = np.arange(256, dtype=np.uint8)
    got = harness_dequant(name, codes)
    want = codes.view(dtype).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("rows,cols,block", [(256, 384, 128), (200, 300, 128), (7, 33, 16)])
def test_fp8_block_scaled_matches_ml_dtypes(rows: int, cols: int, block: int) -> None:
    rng = np.random.default_rng(rows * cols)
    weight = rng.standard_normal((rows, cols)).astype(ml_dtypes.float8_e4m3fn)
    srows, scols = -(-rows // block), -(-cols // block)
    scale_inv = (rng.uniform(0.5, 2.0, (srows, scols)) * 1e-3).astype(np.float32)
    args = ["fp8_block_scaled", str(rows), str(cols)] + ([] if block == 128 else [str(block)] * 2)
    got = np.frombuffer(run(args, weight.view(np.uint8).tobytes() + scale_inv.tobytes()), np.float32)
    expanded = np.repeat(np.repeat(scale_inv, block, axis=0), block, axis=1)[:rows, :cols]
    assert_bit_equal(got, weight.astype(np.float32) * expanded)


# ---------------------------------------------------------------------------- quantization --

QUANT_TYPES = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.MXFP4,
               T.TQ1_0, T.TQ2_0]


def quant_inputs(rng: np.random.Generator) -> np.ndarray:
    """Rows of 256 floats: random blocks at many scales, then edge cases."""
    blocks = []
    for _ in range(64):  # one 256-wide row per scale, so each block of 32 shares a magnitude
        blocks.append(rng.standard_normal(256) * np.exp2(rng.uniform(-30, 30)))
    blocks.append(rng.uniform(-1, 1, 256))
    edge = np.zeros((8, 32))
    edge[1, :] = rng.standard_normal(32)
    edge[1, 5] = 1e4  # one huge value
    edge[2, :] = rng.standard_normal(32)
    edge[2, 9] = -50.0  # negative extreme
    edge[3, :] = np.arange(-16, 16) + 0.5  # halves: ties for every rounding step
    edge[4, :] = np.arange(32) / 4.0 - 4.0
    edge[5, :] = 3.0  # constant block
    edge[6, :] = rng.standard_normal(32)
    edge[6, 0], edge[6, 1] = 7.0, -7.0  # equal magnitudes: the first wins
    edge[7, :] = [2.0 ** k for k in range(-16, 16)]  # powers of two: exact MXFP4 exponents
    blocks.append(edge.ravel())
    near = np.nextafter(np.float32(np.exp2(np.arange(-8, 24, dtype=np.float32))), np.float32(0))
    blocks.append(np.concatenate([near, -near[::-1], rng.standard_normal(192)]))
    return np.concatenate(blocks).astype(np.float32)


@pytest.mark.parametrize("qtype", QUANT_TYPES, ids=lambda t: t.name)
def test_quantize_matches_gguf(qtype: T) -> None:
    data = quant_inputs(np.random.default_rng(2000 + int(qtype)))
    got = run(["quant", qtype.name], data.tobytes())
    with np.errstate(over="ignore"):
        want = np.ascontiguousarray(quants.quantize(data.reshape(-1, 256), qtype)).view(np.uint8)
    got_arr = np.frombuffer(got, dtype=np.uint8)
    assert got_arr.size == want.size
    diff = np.flatnonzero(got_arr != want.ravel())
    assert diff.size == 0, f"{diff.size} byte mismatches, first at byte {diff[0]}"


def test_iq_tables_are_current() -> None:
    """src/quant/iq_tables*.cpp are what tools/gen_iq_tables.py makes from the installed gguf."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "tools" / "gen_iq_tables.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
