"""Synthetic models of the newest MoE families (`sluice synth --geometry tiny-deepseek4 |
tiny-glm-dsa | tiny-qwen35moe`) and of the dense `llama` (tiny-llama, the small sibling of the
llama-3.1-8b roofline geometry): random weights in the exact layout llama.cpp's converter writes
for `deepseek4`, `glm-dsa`, `qwen35moe` and `llama`.

- Layout: the tensor names (layer numbers aside), tensor ranks and the architecture's metadata
  keys are those of the llama.cpp-made tiny model of the same design in
  ../shared/testdata/llamacpp-tiny (same layer pattern: compress ratios 0, 4, 128, 4 with two
  hash-routed layers; a dense first layer and indexers on layers 0 and 2; three DeltaNet layers
  then attention; three dense llama layers), read with the `gguf` package. Skips when that
  folder is absent.
- The dense tiny-llama (Q4_K, its default type) evaluates: finite logits with a real spread, the
  same greedy continuation twice.
- Streaming (the MoE geometries): the logits of every position and the greedy continuation are bit-identical between
  the resident model and experts streamed at the cache floor, with prefetch on and off
  (DESIGN.md, "Invariants"); the telemetry adds up.
- llama.cpp loads the same file: with every tensor F32 (`--type F32`), its logits at every
  position match ours within 1e-4 against its F32-KV, no-flash-attention run (the bound
  test_llamacpp_tiny.py uses for F32 files), and the greedy continuation is the same. Skips when
  the xllamacpp wheel is absent.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", ROOT.parent / "shared" / "testdata"))
TINY = TESTDATA / "llamacpp-tiny"
PROMPT = [1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27, 200, 301, 44, 18, 99, 123, 7, 250]
# geometry -> (general.architecture, the llama.cpp tiny model of the same layer pattern)
GEOMETRIES = {
    "tiny-deepseek4": ("deepseek4", "deepseek4-moe.gguf"),
    "tiny-glm-dsa": ("glm-dsa", "glmdsa-moe.gguf"),
    "tiny-qwen35moe": ("qwen35moe", "qwen35moe-hybrid.gguf"),
    "tiny-llama": ("llama", "llama-dense.gguf"),
}
DENSE = {"tiny-llama"}  # no routed experts: nothing to stream
MOE = [name for name in GEOMETRIES if name not in DENSE]

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)


def run(args):
    done = subprocess.run([SLUICE_BIN] + [str(a) for a in args], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synth")
    made = {}
    for name in GEOMETRIES:
        made[name] = folder / f"{name}.gguf"
        run(["synth", "--geometry", name, "-o", made[name], "--seed", "3"])
    return made


def layout(path):
    from gguf import GGUFReader
    reader = GGUFReader(str(path))
    arch = reader.fields["general.architecture"].contents()
    keys = {k for k in reader.fields if k.startswith(arch + ".")}
    tensors = {(re.sub(r"^blk\.\d+\.", "blk.N.", t.name), len(t.shape)) for t in reader.tensors}
    per_layer = {}
    for t in reader.tensors:
        m = re.match(r"blk\.(\d+)\.(.*)", t.name)
        if m:
            per_layer.setdefault(int(m.group(1)), set()).add(m.group(2))
    return arch, keys, tensors, per_layer


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_layout_is_llama_cpps(synthetic, name):
    pytest.importorskip("gguf")
    arch, reference = GEOMETRIES[name]
    if not (TINY / reference).exists():
        pytest.skip(f"{TINY / reference} is absent")
    ours, theirs = layout(synthetic[name]), layout(TINY / reference)
    assert ours[0] == theirs[0] == arch
    assert ours[1] == theirs[1], f"keys: ours only {ours[1] - theirs[1]}, llama.cpp only {theirs[1] - ours[1]}"
    assert ours[2] == theirs[2], f"tensors: ours only {ours[2] - theirs[2]}, llama.cpp only {theirs[2] - ours[2]}"
    assert ours[3] == theirs[3], "the tensors of some layer differ"


def evaluate(model, tmp_path, placement, tag):
    logits, stats = tmp_path / f"{tag}.bin", tmp_path / f"{tag}.json"
    out = run(["eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--all-positions",
               "--logits-out", logits, "--greedy", "8", "--stats-json", stats] + placement)
    greedy = out.stdout.decode().strip().splitlines()[-1]
    return logits.read_bytes(), greedy, json.loads(stats.read_text())


@pytest.mark.parametrize("name", sorted(DENSE))
def test_dense_model_evaluates(synthetic, tmp_path, name):
    logits, greedy, stats = evaluate(synthetic[name], tmp_path, [], "dense")
    assert stats["streaming"] is False
    values = np.frombuffer(logits, dtype=np.float32)
    assert values.size == len(PROMPT) * 512, f"{name}: {values.size} logits"
    assert np.isfinite(values).all() and values.std() > 1e-3, f"{name}: degenerate logits"
    again, greedy_again, _ = evaluate(synthetic[name], tmp_path, [], "dense-again")
    assert again == logits and greedy_again == greedy


@pytest.mark.parametrize("name", MOE)
def test_streamed_at_the_floor_is_bit_identical_to_resident(synthetic, tmp_path, name):
    model = synthetic[name]
    resident, resident_greedy, resident_stats = evaluate(model, tmp_path, [], "resident")
    assert resident_stats["streaming"] is False
    logits = np.frombuffer(resident, dtype=np.float32)
    assert np.isfinite(logits).all() and logits.std() > 1e-3, f"{name}: degenerate logits"
    info = run(["eval", "--model", model, "--tokens", "1", "--stream-experts", "--explain"]).stderr.decode()
    floor = int(info.split("the floor is ")[1].split(" ")[0])
    for label, extra in [("floor", []), ("floor-no-prefetch", ["--no-prefetch"])]:
        got, greedy, stats = evaluate(model, tmp_path, ["--stream-experts", "--expert-cache", str(floor)] + extra,
                                      label)
        assert stats["streaming"] is True, label
        assert got == resident, f"{name} [{label}]: streamed logits differ from resident"
        assert greedy == resident_greedy, f"{name} [{label}]: greedy {greedy} vs {resident_greedy}"
        assert stats["hits"] + stats["misses"] == resident_stats["hits"], label
        assert stats["misses"] > 0 and 0 < stats["bytes_read"] <= stats["experts_read"] * stats["slot_bytes"], label


ORACLE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import llamacpp_oracle as o
prompt = json.loads(sys.argv[3])
llama = o.Llama()
with llama.load(sys.argv[2]) as model:
    with model.context(n_ctx=256, n_threads=1, kv_type=o.GGML_TYPE_F32, flash_attn=o.FLASH_ATTN_DISABLED) as ctx:
        logits = ctx.decode(prompt, all_logits=True)
    with model.context(n_ctx=256, n_threads=1, kv_type=o.GGML_TYPE_F32, flash_attn=o.FLASH_ATTN_DISABLED) as ctx:
        _, greedy, _ = o.greedy(ctx, prompt, 8, stop_at_eog=False)
print(json.dumps({"logits": logits.tolist(), "greedy": greedy}))
"""


@pytest.mark.parametrize("name", list(GEOMETRIES))
def test_llama_cpp_gives_the_same_logits(tmp_path, name):
    pytest.importorskip("xllamacpp")
    model = tmp_path / f"{name}-f32.gguf"
    run(["synth", "--geometry", name, "-o", model, "--seed", "3", "--type", "F32"])
    done = subprocess.run([sys.executable, "-c", ORACLE, str(ROOT / "tools"), str(model), json.dumps(PROMPT)],
                          capture_output=True, timeout=600)
    if name == "tiny-deepseek4" and done.returncode == -8:
        # llama.cpp b11549 (xllamacpp) dies with SIGFPE right after creating its DSV4 KV cache for
        # this geometry, while it runs its own deepseek4 tiny files; our side of the layout check
        # above holds. Kept as an xfail so a fixed wheel shows up as XPASS.
        pytest.xfail("llama.cpp b11549 crashes (SIGFPE) creating the DSV4 KV cache of this geometry")
    assert done.returncode == 0, f"llama.cpp could not run {name}: {done.stderr.decode(errors='replace')[-2000:]}"
    reference = json.loads(done.stdout.decode().strip().splitlines()[-1])
    out = run(["eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--all-positions", "--json",
               "--greedy", "8", "--kv", "f32"])
    ours = json.loads(out.stdout)
    got, expected = np.asarray(ours["logits"], np.float32), np.asarray(reference["logits"], np.float32)
    assert got.shape == expected.shape
    diff = np.abs(got - expected).max()
    print(f"{name}: max|d| {diff:.2e} over {got.shape}, logit spread {expected.std():.2f}")
    assert diff <= 1e-4, f"{name}: max|d| {diff:.3e} > 1e-4 (per row {np.round(np.abs(got - expected).max(1), 6).tolist()})"
    assert ours["greedy_tokens"] == reference["greedy"]
