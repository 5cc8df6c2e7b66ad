"""tools/routing_trace.py: the realised statistics of generated traces follow their parameters
(next-token repeat, per-layer Zipf skew, DeepSeek V4 Flash's coverage, co-activation clusters),
the file round-trips, and bad parameters are one-line errors."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import routing_trace as rt  # noqa: E402


def test_qwen_preset_repeat_fraction_and_skew():
    p = dict(rt.PRESETS["qwen3-30b-a3b"], n_layer=6, tokens=300)
    trace, shape = rt.generate(**p, seed=3, model_seed=0)
    s = rt.realised_stats(trace, shape)
    assert abs(s["repeat_fraction"] - 0.45) < 0.03, s
    # Zipf 0.9 over 128 experts: the top 10% take far more than the uniform 10%.
    assert s["top10pct_share"] > 0.25, s
    # Clusters of 8: two experts of a token share one far more often than at random (7/127).
    assert s["same_cluster_pairs"] > 3 * 7 / 127, s
    # Every token's choice is n_used distinct experts.
    assert all(len(set(row)) == p["n_used"] for row in trace.reshape(-1, p["n_used"]).tolist())


def test_repeat_parameter_takes_effect():
    base = dict(rt.PRESETS["qwen3-30b-a3b"], n_layer=3, tokens=200)
    low = rt.realised_stats(rt.generate(**dict(base, repeat=0.1), seed=1, model_seed=0)[0])
    high = rt.realised_stats(rt.generate(**dict(base, repeat=0.8), seed=1, model_seed=0)[0])
    assert abs(low["repeat_fraction"] - 0.1) < 0.03 and abs(high["repeat_fraction"] - 0.8) < 0.03


def test_uniform_has_no_skew():
    p = dict(rt.PRESETS["qwen3-30b-a3b"], n_layer=3, tokens=300, zipf=0.0, affinity=0.0)
    s = rt.realised_stats(rt.generate(**p, seed=2, model_seed=0)[0])
    assert s["top10pct_share"] < 0.18, s  # 10% plus sampling noise of 2400 draws


def test_deepseek_v4_flash_coverage():
    p = rt.PRESETS["deepseek-v4-flash"]
    trace, shape = rt.generate(**p, seed=1, model_seed=0)
    s = rt.realised_stats(trace, shape)
    assert 240 <= s["coverage_median"] <= 248, s
    assert trace.shape == (512, 43, 6)


def test_layers_differ_and_model_seed_is_the_shape():
    shape_a = rt.ModelShape(4, 64, 0.9, 8, model_seed=0)
    shape_b = rt.ModelShape(4, 64, 0.9, 8, model_seed=0)
    assert np.argmax(shape_a.popularity[0]) != np.argmax(shape_a.popularity[1]) or \
        np.argmax(shape_a.popularity[1]) != np.argmax(shape_a.popularity[2])
    assert all((a == b).all() for a, b in zip(shape_a.popularity, shape_b.popularity))


def test_cli_writes_and_reads_back(tmp_path):
    out = tmp_path / "t.txt"
    run = subprocess.run([sys.executable, str(ROOT / "tools/routing_trace.py"), "--preset",
                          "qwen3-30b-a3b", "--n-layer", "2", "--tokens", "20", "--seed", "5",
                          "-o", str(out)], capture_output=True, text=True, check=True)
    printed = json.loads(run.stdout)
    assert printed["params"]["repeat"] == 0.45 and printed["params"]["seed"] == 5
    header, trace = rt.read_trace(str(out))
    assert header["n_expert"] == 128 and trace.shape == (20, 2, 8)
    again = subprocess.run([sys.executable, str(ROOT / "tools/routing_trace.py"), "--stats",
                            str(out)], capture_output=True, text=True, check=True)
    assert json.loads(again.stdout)["realised"]["coverage_max"] <= 128


def test_bad_parameters_are_one_line_errors(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "tools/routing_trace.py"), "--preset",
                          "qwen3-30b-a3b", "--n-used", "500", "-o", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.count("\n") == 1 and "n_used" in run.stderr
    with pytest.raises(ValueError):
        rt.generate(**dict(rt.PRESETS["qwen3-30b-a3b"], repeat=1.5), seed=1, model_seed=0)
