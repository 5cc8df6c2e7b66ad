"""Hugging Face snapshots load directly and compute what transformers computes: each tiny model of
tools/tiny_hf_models.py (dense, and MoE: qwen3_moe, mixtral, olmoe, glm4_moe, deepseek_v3, with
experts stored per expert as on the Hub or fused as transformers 5 holds them; gpt_oss, whose
experts cannot be read in place, through the temporary GGUF sluice converts at load) is rebuilt here with numpy
(byte-identical to the one transformers ran, by its sha256), and `sluice eval` must give the
logits of tests/golden/transformers_tiny (from tools/make_transformers_tiny.py) at every position
and the same greedy tokens — the snapshot as the Hub writes config.json, as transformers 5 saves
it back, and converted to GGUF. Bad snapshots are refused with one line."""
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
# Snapshots only checked through their GGUF copy (none: gpt_oss, whose experts are stored
# transposed with gate and up interleaved, runs through a temporary conversion at load).
GGUF_ONLY = set()
DIRECT_NAMES = [n for n in NAMES if n not in GGUF_ONLY]
F32_NAMES = [n for n in NAMES if tiny_hf_models.MODELS[n][1] == "F32"]
GGUF_NAMES = [n for n in F32_NAMES if n not in tiny_hf_models.FUSED_EXPERTS]
# F32 weights: both sides compute in float32 (measured max abs 2.6e-6 .. 4.2e-6 dense, 2.8e-6 ..
# 5.1e-6 MoE, directly and from the GGUF copies). The MoE goldens' closest routing choices are
# 2.4e-4 (qwen3moe) and above 1e-2 (mixtral, olmoe) apart in router logits, so a flipped expert
# would show far above the bound. F16 / BF16: sluice dots the weights against activations rounded
# to the weight type, as llama.cpp does, while the golden is transformers in float32 on the same
# rounded weights; measured 2.1e-3 (F16) and 2.6e-2 .. 3.2e-2 (BF16; qwen3moe-bf16 2.6e-2), so the
# bounds keep a 3-5x margin. Each golden's greedy steps have top-2 margins above its bound
# (qwen2-f16's smallest is 0.03, the dense BF16 ones' 0.3) but qwen3moe-bf16's: 0.046 (the best
# of six seeds, chosen for its router margin of 0.089), still above the 2.6e-2 measured.
TOLERANCE = {"F32": 1e-4, "F16": 1e-2, "BF16": 1e-1}
GGUF_GELU_TABLE_TOLERANCE = 1e-2

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)


def golden(name):
    return json.loads((GOLDEN / f"{name}.json").read_text())


def sluice_eval(model, *extra):
    args = [SLUICE_BIN, "eval", "--model", str(model), "--tokens",
            ",".join(map(str, tiny_hf_models.PROMPT)), "--all-positions", "--json", "--kv", "f32",
            "--greedy", str(tiny_hf_models.GREEDY_STEPS), *extra]
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


@pytest.mark.parametrize("name", DIRECT_NAMES)
def test_snapshot_matches_transformers(snapshots, name):
    ref = golden(name)
    check(sluice_eval(snapshots[name]), ref, TOLERANCE[ref["weight_dtype"]])


@pytest.mark.parametrize("name", [n for n in F32_NAMES if n in DIRECT_NAMES])
def test_config_saved_by_transformers_5(snapshots, tmp_path, name):
    """transformers 5 writes rope_parameters (per layer type for gemma3) instead of rope_theta."""
    ref = golden(name)
    shutil.copytree(snapshots[name], tmp_path / name)
    (tmp_path / name / "config.json").write_text(json.dumps(ref["config_saved_by_transformers"]))
    check(sluice_eval(tmp_path / name), ref, TOLERANCE["F32"])


@pytest.mark.parametrize("name", GGUF_NAMES)
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


MOE_NAMES = [n for n in DIRECT_NAMES if tiny_hf_models.is_moe(tiny_hf_models.config(n))]


@pytest.mark.parametrize("name", MOE_NAMES)
def test_streamed_experts_match(snapshots, name):
    """Experts read from the snapshot's files through a 3-slot cache (offset + e * stride, the
    fused gate/up halves every other matrix) give the resident numbers bit for bit."""
    resident = sluice_eval(snapshots[name])
    streamed = sluice_eval(snapshots[name], "--stream-experts", "--expert-cache", "3")
    assert streamed["logits"] == resident["logits"]
    assert streamed["greedy_tokens"] == resident["greedy_tokens"]


@pytest.mark.parametrize("change", [{"bias": 0}, {"n_group": 1, "topk_group": 1},
                                    {"routed_scaling_factor": 1.0}, {"norm_topk_prob": False}])
def test_glm4moe_golden_depends_on_its_routing(snapshots, tmp_path, change):
    """Each DeepSeekMoE routing setting moves glm4moe's logits far past the tolerance (measured
    1.6 .. 3.3), so matching the golden shows each is honoured."""
    if "bias" in change:
        weights = tiny_hf_models.weights("glm4moe")
        for key in weights:
            if key.endswith("e_score_correction_bias"):
                weights[key] = np.zeros_like(weights[key])
        model = tmp_path / "glm4moe"
        shutil.copytree(snapshots["glm4moe"], model)
        tiny_hf_models.write_safetensors(model / "model.safetensors", weights, "F32")
    else:
        model = edited(snapshots, tmp_path, "glm4moe", **change)
    logits = np.array(sluice_eval(model)["logits"])
    assert np.abs(logits - np.array(golden("glm4moe")["logits"])).max() > 0.5


def test_fused_experts_golden_is_the_per_expert_one():
    """transformers computed the same numbers from the fused and the per-expert layout of the same
    weights: the fused snapshot tests the layout, not other weights."""
    fused, per_expert = golden("qwen3moe-fused"), golden("qwen3moe")
    assert fused["safetensors_sha256"] != per_expert["safetensors_sha256"]
    assert fused["logits"] == per_expert["logits"]
    assert fused["greedy_continuation"] == per_expert["greedy_continuation"]


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


def test_gpt_oss_snapshot_runs_through_a_temporary_conversion(snapshots, tmp_path):
    """Its experts cannot be read in place: the load converts it to a temporary GGUF (saying so,
    with the command that does it once) and removes that file when the process ends."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    result = subprocess.run([SLUICE_BIN, "eval", "--model", str(snapshots["gptoss"]), "--tokens",
                             "1,5,9"], capture_output=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr.decode()
    assert f"sluice convert {snapshots['gptoss']} -o MODEL.gguf" in result.stderr.decode()
    assert list(tmp_path.iterdir()) == []


def test_unknown_model_type_is_refused(snapshots, tmp_path):
    line = refused(edited(snapshots, tmp_path, "llama", model_type="mamba"))
    assert "model_type 'mamba' is not supported" in line and "qwen3" in line


def test_unsupported_rope_scaling_is_refused(snapshots, tmp_path):
    scaling = {"rope_type": "dynamic", "factor": 8.0}
    line = refused(edited(snapshots, tmp_path, "llama", rope_scaling=scaling))
    assert "RoPE type 'dynamic'" in line


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


def test_moe_layers_without_experts_are_refused(snapshots, tmp_path):
    line = refused(edited(snapshots, tmp_path, "qwen3moe", mlp_only_layers=[1]))
    assert "mlp_only_layers" in line


def test_experts_in_safetensors_name_order(snapshots, tmp_path):
    """safetensors (and so transformers' save_pretrained) writes tensors sorted by name: experts
    0, 1, 10, 11, 2 … and each expert's down, gate, up. Expert e of a part is then at no fixed
    stride; its own offset is used, and the numbers are the golden's."""
    weights = tiny_hf_models.weights("qwen3moe")
    renamed = {}
    for key, value in weights.items():  # as if there were 16 experts: "10".."15" sort before "2"
        renamed[key.replace(".experts.7.", ".experts.1x.")] = value
    ordered = {key.replace(".experts.1x.", ".experts.7."): renamed[key] for key in sorted(renamed)}
    model = tmp_path / "qwen3moe"
    shutil.copytree(snapshots["qwen3moe"], model)
    tiny_hf_models.write_safetensors(model / "model.safetensors", ordered, "F32")
    ref = golden("qwen3moe")
    check(sluice_eval(model), ref, TOLERANCE["F32"])
    check(sluice_eval(model, "--stream-experts", "--expert-cache", "3"), ref, TOLERANCE["F32"])


def test_experts_split_across_shards(snapshots, tmp_path):
    """A sharded snapshot (model.safetensors.index.json) may cut a layer's experts between two
    files; each expert is read from its own file, resident and streamed."""
    weights = tiny_hf_models.weights("olmoe")
    names = list(weights)
    cut = names.index("model.layers.1.mlp.experts.4.gate_proj.weight")
    model = tmp_path / "olmoe"
    shutil.copytree(snapshots["olmoe"], model)
    (model / "model.safetensors").unlink()
    weight_map = {}
    for shard, part in (("model-00001-of-00002.safetensors", names[:cut]),
                        ("model-00002-of-00002.safetensors", names[cut:])):
        tiny_hf_models.write_safetensors(model / shard, {n: weights[n] for n in part}, "F32")
        weight_map.update({n: shard for n in part})
    (model / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))
    ref = golden("olmoe")
    check(sluice_eval(model), ref, TOLERANCE["F32"])
    check(sluice_eval(model, "--stream-experts", "--expert-cache", "3"), ref, TOLERANCE["F32"])


def test_missing_expert_is_refused(snapshots, tmp_path):
    weights = tiny_hf_models.weights("mixtral")
    del weights["model.layers.0.block_sparse_moe.experts.7.w2.weight"]
    model = tmp_path / "mixtral"
    shutil.copytree(snapshots["mixtral"], model)
    tiny_hf_models.write_safetensors(model / "model.safetensors", weights, "F32")
    assert "blk.0.ffn_down.7.weight" in refused(model)


def test_glm4moe_nextn_layers_are_dropped(snapshots, tmp_path):
    """GLM-4.5 snapshots carry their multi-token-prediction layer after the decoder's
    (model.layers.<num_hidden_layers>.*: eh_proj, enorm, hnorm, shared_head, a whole decoder
    layer), which transformers does not run: neither does sluice, and the numbers stay."""
    weights = tiny_hf_models.weights("glm4moe")
    n = tiny_hf_models.config("glm4moe")["num_hidden_layers"]
    for key in list(weights):
        if key.startswith(f"model.layers.{n - 1}."):
            weights[key.replace(f"layers.{n - 1}.", f"layers.{n}.")] = weights[key]
    for extra, shape in (("eh_proj.weight", (64, 128)), ("enorm.weight", (64,)),
                         ("hnorm.weight", (64,)), ("shared_head.norm.weight", (64,))):
        weights[f"model.layers.{n}.{extra}"] = np.ones(shape, dtype=np.float32)
    model = edited(snapshots, tmp_path, "glm4moe", num_nextn_predict_layers=1)
    tiny_hf_models.write_safetensors(model / "model.safetensors", weights, "F32")
    check(sluice_eval(model), golden("glm4moe"), TOLERANCE["F32"])
