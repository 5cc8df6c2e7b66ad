"""`sluice convert` of FP8 block-scaled checkpoints (DeepSeek V3/R1, Qwen3 "-FP8", GLM): every
linear weight float8 e4m3 with "<name>_scale_inv" holding one float per block of
quantization_config.weight_block_size. Each GGUF value must be the e4m3 value times its block's
scale, rounded once to float32 — what llama.cpp's converter computes — with e4m3 decoded by
ml_dtypes (an implementation we did not write). The tiny qwen3 and qwen3moe snapshots of
tools/tiny_hf_models.py are quantized here with blocks of 32 × 48, so rows and columns both
cross block edges and the last column block is partial (64 = 48 + 16).
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import tiny_hf_models  # noqa: E402

SLUICE_BIN = os.environ.get("SLUICE_BIN")
if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)
gguf = pytest.importorskip("gguf")
ml_dtypes = pytest.importorskip("ml_dtypes")

BLOCK = (32, 48)
E4M3_MAX = 448.0


def run(*args, check=True):
    result = subprocess.run([SLUICE_BIN, *map(str, args)], capture_output=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def quantize(w):
    """w [rows, cols] float32 → (e4m3 [rows, cols], scales [ceil(rows/32), ceil(cols/48)])."""
    rows, cols = w.shape
    br, bc = BLOCK
    scales = np.zeros((-(-rows // br), -(-cols // bc)), dtype=np.float32)
    q = np.zeros(w.shape, dtype=ml_dtypes.float8_e4m3fn)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            block = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
            scale = np.float32(max(float(np.abs(block).max()), 1e-12) / E4M3_MAX)
            scales[i, j] = scale
            q[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = (block / scale).astype(q.dtype)
    return q, scales


def dequantize(q, scales):
    br, bc = BLOCK
    full = np.repeat(np.repeat(scales, br, axis=0), bc, axis=1)[:q.shape[0], :q.shape[1]]
    return q.astype(np.float32) * full  # one float32 rounding, as the converter's


def fp8_snapshot(name, out, drop_scale=None):
    """The tiny snapshot `name` with every projection FP8; returns hf name → expected float32."""
    cfg = tiny_hf_models.config(name)
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                  "activation_scheme": "dynamic", "weight_block_size": list(BLOCK)}
    tensors, expected = {}, {}
    for hf_name, w in tiny_hf_models.weights(name).items():
        if hf_name.endswith("_proj.weight"):
            q, scales = quantize(w)
            tensors[hf_name] = ("F8_E4M3", q.view(np.uint8))
            if hf_name != drop_scale:
                tensors[hf_name + "_scale_inv"] = ("F32", scales)
            expected[hf_name] = dequantize(q, scales)
        else:
            tensors[hf_name] = ("F32", w)
            expected[hf_name] = w
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    (out / "tokenizer.json").write_text(json.dumps(tiny_hf_models.tokenizer_json(cfg["vocab_size"])))
    tiny_hf_models.write_safetensors(out / "model.safetensors",
                                     {name: x for name, (_, x) in tensors.items()},
                                     {name: kind for name, (kind, _) in tensors.items()})
    return expected


def gguf_tensors(path):
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(str(path)).tensors}


PROJECTIONS = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def test_dense_fp8_weights_dequantize_as_the_converter_does(tmp_path):
    expected = fp8_snapshot("qwen3", tmp_path / "qwen3-fp8")
    out = tmp_path / "qwen3-fp8.gguf"
    run("convert", tmp_path / "qwen3-fp8", "-o", out, "--type", "F32")
    got = gguf_tensors(out)
    n_checked, n_layer = 0, tiny_hf_models.config("qwen3")["num_hidden_layers"]
    for il in range(n_layer):
        for hf, ours in PROJECTIONS.items():
            want = expected[f"model.layers.{il}.{hf}.weight"]
            np.testing.assert_array_equal(got[f"blk.{il}.{ours}.weight"], want, f"{il} {hf}")
            n_checked += 1
    assert n_checked == 7 * n_layer
    assert not [n for n in got if "scale" in n]


def test_moe_fp8_experts_dequantize_per_expert(tmp_path):
    expected = fp8_snapshot("qwen3moe", tmp_path / "moe-fp8")
    out = tmp_path / "moe-fp8.gguf"
    run("convert", tmp_path / "moe-fp8", "-o", out, "--type", "F32")
    got = gguf_tensors(out)
    cfg = tiny_hf_models.config("qwen3moe")
    for il in range(cfg["num_hidden_layers"]):
        for part in ("gate", "up", "down"):
            stack = np.stack([expected[f"model.layers.{il}.mlp.experts.{e}.{part}_proj.weight"]
                              for e in range(cfg["num_experts"])])
            np.testing.assert_array_equal(got[f"blk.{il}.ffn_{part}_exps.weight"], stack)
        np.testing.assert_array_equal(got[f"blk.{il}.attn_q.weight"],
                                      expected[f"model.layers.{il}.self_attn.q_proj.weight"])
    # The converted model runs: Sluice evaluates it like any GGUF.
    run("eval", "--model", out, "--tokens", "1,5,9")


@pytest.mark.parametrize("name", ["qwen3moe", "deepseek3", "mixtral"])
def test_fp8_converts_as_its_dequantized_float32_snapshot(tmp_path, name):
    """Whatever the converter does to a weight — stack experts, permute llama's Q/K rows, cut
    deepseek's kv_b_proj per head and transpose its K part — an FP8 weight must come out as the
    float32 snapshot holding ml_dtypes' dequantization of it would."""
    expected = fp8_snapshot(name, tmp_path / "fp8")
    plain = tmp_path / "f32"
    plain.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (plain / f).write_text((tmp_path / "fp8" / f).read_text())
    cfg = json.loads((plain / "config.json").read_text())
    del cfg["quantization_config"]
    (plain / "config.json").write_text(json.dumps(cfg))
    tiny_hf_models.write_safetensors(plain / "model.safetensors", expected, "F32")
    run("convert", tmp_path / "fp8", "-o", tmp_path / "fp8.gguf", "--type", "F32")
    run("convert", plain, "-o", tmp_path / "f32.gguf", "--type", "F32")
    got, want = gguf_tensors(tmp_path / "fp8.gguf"), gguf_tensors(tmp_path / "f32.gguf")
    assert set(got) == set(want)
    for tensor_name, values in want.items():
        np.testing.assert_array_equal(got[tensor_name], values, tensor_name)


def test_running_an_fp8_snapshot_directly_is_refused_with_the_way_out(tmp_path):
    fp8_snapshot("qwen3", tmp_path / "qwen3-fp8")
    result = run("eval", "--model", tmp_path / "qwen3-fp8", "--tokens", "1", check=False)
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, lines
    assert "FP8" in lines[0] and "sluice convert" in lines[0]


def test_missing_scale_is_refused_and_nothing_written(tmp_path):
    fp8_snapshot("qwen3", tmp_path / "bad", drop_scale="model.layers.1.mlp.up_proj.weight")
    out = tmp_path / "bad.gguf"
    result = run("convert", tmp_path / "bad", "-o", out, check=False)
    message = result.stderr.decode()
    assert result.returncode != 0
    assert "model.layers.1.mlp.up_proj.weight_scale_inv" in message
    assert not out.exists() and not list(tmp_path.glob("bad.gguf*"))
