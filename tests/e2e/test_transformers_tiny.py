"""Hugging Face snapshots load directly and compute what transformers computes: each tiny model of
tools/tiny_hf_models.py is rebuilt here with numpy (byte-identical to the one transformers ran, by
its sha256), and `sluice eval` must give the logits of tests/golden/transformers_tiny (from
tools/make_transformers_tiny.py) at every position and the same greedy tokens — the snapshot as the
Hub writes config.json, as transformers 5 saves it back, and converted to GGUF. Bad snapshots are
refused with one line."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import tiny_hf_models  # noqa: E402

SLUICE_BIN = os.environ.get("SLUICE_BIN")
GOLDEN = ROOT / "tests" / "golden" / "transformers_tiny"
NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))
F32_NAMES = [n for n in NAMES if tiny_hf_models.MODELS[n][1] == "F32"]
# F32 weights: both sides compute in float32 (measured max abs 2.6e-6 .. 4.2e-6). F16 / BF16:
# sluice dots the weights against activations rounded to the weight type, as llama.cpp does, while
# the golden is transformers in float32 on the same rounded weights; measured 2.1e-3 (F16) and
# 2.6e-2 .. 3.2e-2 (BF16), so the bounds keep a 3-5x margin. Each golden's greedy steps have
# top-2 margins above its bound (qwen2-f16's smallest is 0.03, the BF16 ones' 0.3).
TOLERANCE = {"F32": 1e-4, "F16": 1e-2, "BF16": 1e-1}
GGUF_GELU_TABLE_TOLERANCE = 1e-2

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)


def golden(name):
    return json.loads((GOLDEN / f"{name}.json").read_text())


def sluice_eval(model):
    args = [SLUICE_BIN, "eval", "--model", str(model), "--tokens",
            ",".join(map(str, tiny_hf_models.PROMPT)), "--all-positions", "--json", "--kv", "f32",
            "--greedy", str(tiny_hf_models.GREEDY_STEPS)]
    result = subprocess.run(args, capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def check(out, ref, tolerance):
    logits = np.array(out["logits"])
    expected = np.array(ref["logits"])
    assert logits.shape == expected.shape == (len(tiny_hf_models.PROMPT), ref["n_vocab"])
    worst = float(np.abs(logits - expected).max())
    assert worst <= tolerance, f"max abs {worst:.3g} > {tolerance}"
    assert out["greedy_tokens"] == ref["greedy_continuation"]


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    """name → a freshly generated snapshot directory; its weights must be the golden's."""
    root = tmp_path_factory.mktemp("tiny_hf")
    made = {}
    for name in NAMES:
        assert tiny_hf_models.config(name) == golden(name)["config"], f"{name}: config drifted"
        digest = tiny_hf_models.write_snapshot(name, root / name)
        assert digest == golden(name)["safetensors_sha256"], (
            f"{name}: numpy generated other weights than the golden's (numpy {np.__version__})")
        made[name] = root / name
    return made


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_matches_transformers(snapshots, name):
    ref = golden(name)
    check(sluice_eval(snapshots[name]), ref, TOLERANCE[ref["weight_dtype"]])


@pytest.mark.parametrize("name", F32_NAMES)
def test_config_saved_by_transformers_5(snapshots, tmp_path, name):
    """transformers 5 writes rope_parameters (per layer type for gemma3) instead of rope_theta."""
    ref = golden(name)
    shutil.copytree(snapshots[name], tmp_path / name)
    (tmp_path / name / "config.json").write_text(json.dumps(ref["config_saved_by_transformers"]))
    check(sluice_eval(tmp_path / name), ref, TOLERANCE["F32"])


@pytest.mark.parametrize("name", F32_NAMES)
def test_converted_gguf(tmp_path, name):
    """The same weights converted as llama.cpp converts them (llama's Q/K rows permuted for
    adjacent-pair RoPE, gemma's norms + 1) give the same numbers."""
    pytest.importorskip("gguf")
    import tiny_hf_gguf

    path = tmp_path / f"{name}.gguf"
    tiny_hf_gguf.write_gguf(name, path)
    # A GGUF file is computed as llama.cpp computes it: for gemma3 that means GELU read from a
    # half-precision table (input and output rounded to half), 1.8e-3 from transformers here.
    tolerance = GGUF_GELU_TABLE_TOLERANCE if name.startswith("gemma3") else TOLERANCE["F32"]
    check(sluice_eval(path), golden(name), tolerance)


def refused(model):
    result = subprocess.run([SLUICE_BIN, "eval", "--model", str(model), "--tokens", "1,2,3"],
                            capture_output=True, timeout=60)
    assert result.returncode > 0, result
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sluice: error: "), result.stderr
    return lines[0]


def edited(snapshots, tmp_path, name, **changes):
    shutil.copytree(snapshots[name], tmp_path / name)
    config = json.loads((tmp_path / name / "config.json").read_text())
    config.update(changes)
    (tmp_path / name / "config.json").write_text(json.dumps(config))
    return tmp_path / name


def test_unknown_model_type_is_refused(snapshots, tmp_path):
    line = refused(edited(snapshots, tmp_path, "llama", model_type="mamba"))
    assert "model_type 'mamba' is not supported" in line and "qwen3" in line


def test_unsupported_rope_scaling_is_refused(snapshots, tmp_path):
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    line = refused(edited(snapshots, tmp_path, "llama", rope_scaling=scaling))
    assert "RoPE type 'llama3'" in line


def test_gemma_query_scale_other_than_head_dim_is_refused(snapshots, tmp_path):
    line = refused(edited(snapshots, tmp_path, "gemma3", query_pre_attn_scalar=64))
    assert "query_pre_attn_scalar" in line


def test_missing_config_is_refused(snapshots, tmp_path):
    shutil.copytree(snapshots["qwen3"], tmp_path / "qwen3")
    (tmp_path / "qwen3" / "config.json").unlink()
    assert "no config.json" in refused(tmp_path / "qwen3")


def test_untied_head_missing_is_refused(snapshots, tmp_path):
    """A config whose head is not tied needs lm_head.weight; qwen2's tied snapshot has none."""
    model = edited(snapshots, tmp_path, "qwen2", tie_word_embeddings=False)
    assert "lm_head.weight is missing" in refused(model)


def test_unknown_tensor_is_refused(snapshots, tmp_path):
    weights = tiny_hf_models.weights("qwen3")
    weights["model.layers.0.mlp.gate_proj.bias"] = np.zeros(128, dtype=np.float32)
    model = tmp_path / "qwen3"
    shutil.copytree(snapshots["qwen3"], model)
    tiny_hf_models.write_safetensors(model / "model.safetensors", weights, "F32")
    assert "model.layers.0.mlp.gate_proj.bias" in refused(model)
