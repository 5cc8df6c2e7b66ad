"""The other forms llama.cpp's GGUF files give routed experts, checked against the plain form.

- Fused `ffn_gate_up_exps` ([n_embd, 2 n_ff, n_expert], each expert's gate rows then its up rows,
  as newer llama.cpp converters write Qwen3.5/GLM/DeepSeek experts): the same model with each
  layer's gate and up stacks joined into one must give bit-identical logits and greedy tokens —
  every output row is the same dot product either way — resident and streamed at the cache floor.
- Per-expert output scales (`ffn_*_exps.scale`, [n_expert]: Gemma 4's down scale): scales of
  1, 2 and 4 must give bit-identical logits to the model whose expert matrices were multiplied by
  the same powers of two instead (Q4_K's two f16 super-block scales doubled: exact, and so is a
  float product by a power of two). Gemma 4's tiny llama.cpp file checks the scale against
  llama.cpp itself (test_llamacpp_tiny.py).

The base model is `sluice synth --geometry tiny-moe` (qwen3moe, Q4_K experts), so this always runs.
"""
import json
import os
import subprocess

import gguf
import numpy as np
import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
PROMPT = [1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27]

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)


def run(args):
    done = subprocess.run([SLUICE_BIN] + [str(a) for a in args], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done


def evaluate(model, tmp_path, tag, placement=()):
    logits = tmp_path / f"{tag}.bin"
    out = run(["eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--all-positions",
               "--logits-out", logits, "--greedy", "8", *placement])
    return logits.read_bytes(), out.stdout.decode().strip().splitlines()[-1]


def rewrite(source, target, transform):
    """Copies GGUF `source` to `target`, each tensor replaced by what transform(name, tensor)
    returns: a list of (name, numpy array as the reader gives it, GGML type)."""
    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(target), arch)  # writes general.architecture itself
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)
    for tensor in reader.tensors:
        for name, data, qtype in transform(tensor.name, tensor):
            float_type = qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
            writer.add_tensor(name, np.ascontiguousarray(data),
                              raw_dtype=None if float_type else qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def floor_of(model):
    info = run(["eval", "--model", model, "--tokens", "1", "--stream-experts", "--explain"])
    return int(info.stderr.decode().split("the floor is ")[1].split(" ")[0])


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    path = tmp_path_factory.mktemp("forms") / "plain.gguf"
    run(["synth", "--geometry", "tiny-moe", "-o", path, "--seed", "11"])
    return path


def test_fused_gate_up_stacks_give_the_same_logits(plain, tmp_path):
    reader = gguf.GGUFReader(plain)
    gates = {t.name: t for t in reader.tensors if t.name.endswith("ffn_gate_exps.weight")}
    assert gates, "the synthetic model has no expert stacks"

    def fuse(name, tensor):
        if name.endswith("ffn_up_exps.weight"):
            return []
        if name in gates:
            up = next(t for t in reader.tensors if t.name == name.replace("_gate_", "_up_"))
            joined = np.concatenate([tensor.data, up.data], axis=1)  # per expert: gate rows, up rows
            return [(name.replace("ffn_gate_exps", "ffn_gate_up_exps"), joined, tensor.tensor_type)]
        return [(name, tensor.data, tensor.tensor_type)]

    fused = tmp_path / "fused.gguf"
    rewrite(plain, fused, fuse)
    assert any("gate_up_exps" in t.name for t in gguf.GGUFReader(fused).tensors)
    expected = evaluate(plain, tmp_path, "plain")
    assert evaluate(fused, tmp_path, "fused") == expected
    streamed = evaluate(fused, tmp_path, "fused-streamed",
                        ["--stream-experts", "--expert-cache", str(floor_of(fused))])
    assert streamed == expected


def test_per_expert_down_scales_equal_scaled_weights(plain, tmp_path):
    reader = gguf.GGUFReader(plain)
    n_expert = next(t for t in reader.tensors if t.name.endswith("ffn_down_exps.weight")).data.shape[0]
    scales = np.array([2.0 ** (e % 3) for e in range(n_expert)], dtype=np.float32)

    def with_scale_tensor(name, tensor):
        out = [(name, tensor.data, tensor.tensor_type)]
        if name.endswith("ffn_down_exps.weight"):
            out.append((name.replace(".weight", ".scale"), scales, gguf.GGMLQuantizationType.F32))
        return out

    def with_scaled_weights(name, tensor):
        if not name.endswith("ffn_down_exps.weight"):
            return [(name, tensor.data, tensor.tensor_type)]
        assert tensor.tensor_type == gguf.GGMLQuantizationType.Q4_K
        blocks = tensor.data.copy().reshape(n_expert, -1, 144)  # Q4_K block: d, dmin (f16), ...
        halves = blocks[:, :, :4].copy().view(np.float16)       # [n_expert, n_blocks, 2]
        halves *= scales.astype(np.float16)[:, None, None]
        assert np.isfinite(halves).all()
        blocks[:, :, :4] = halves.view(np.uint8)
        return [(name, blocks.reshape(tensor.data.shape), tensor.tensor_type)]

    scaled, baked = tmp_path / "scaled.gguf", tmp_path / "baked.gguf"
    rewrite(plain, scaled, with_scale_tensor)
    rewrite(plain, baked, with_scaled_weights)
    expected = evaluate(baked, tmp_path, "baked")
    assert expected != evaluate(plain, tmp_path, "plain"), "the scales changed nothing"
    assert evaluate(scaled, tmp_path, "scaled") == expected
    streamed = evaluate(scaled, tmp_path, "scaled-streamed",
                        ["--stream-experts", "--expert-cache", str(floor_of(scaled))])
    assert streamed == expected


def test_layers_of_mixed_expert_types_share_the_cache_by_size(plain, tmp_path):
    """A "boosted layer" mix: layer 0's experts Q8_0 (requantized with gguf-py), the others Q4_K.
    The cache keeps one pool per slot size; streamed at its floor (one token's experts in each
    pool) and at twice it, the logits equal the resident ones bit for bit, and the bytes it says
    it read are each layer's misses times that layer's expert size."""
    from gguf.quants import dequantize, quantize
    q8 = gguf.GGMLQuantizationType.Q8_0

    def boost_layer_0(name, tensor):
        if name.startswith("blk.0.") and "_exps." in name:
            values = dequantize(tensor.data, tensor.tensor_type)
            return [(name, quantize(values, q8), q8)]
        return [(name, tensor.data, tensor.tensor_type)]

    mixed = tmp_path / "mixed.gguf"
    rewrite(plain, mixed, boost_layer_0)
    reader = gguf.GGUFReader(mixed)
    expert_bytes = {}
    for t in reader.tensors:
        if "_exps." in t.name:
            layer = int(t.name.split(".")[1])
            expert_bytes[layer] = expert_bytes.get(layer, 0) + int(t.n_bytes) // int(t.shape[-1])
    assert len(set(expert_bytes.values())) == 2

    explain = run(["eval", "--model", mixed, "--tokens", "1", "--stream-experts", "--explain"])
    assert "for each of 2 expert sizes" in explain.stderr.decode()
    floor = floor_of(mixed)
    resident = evaluate(mixed, tmp_path, "resident")
    for slots in (floor, 2 * floor):
        stats = tmp_path / f"stats-{slots}.json"
        streamed = evaluate(mixed, tmp_path, f"streamed-{slots}",
                            ["--stream-experts", "--expert-cache", str(slots), "--no-prefetch",
                             "--stats-json", stats])
        assert streamed == resident, f"{slots} slots"
        counters = json.loads(stats.read_text())
        want = sum(m * expert_bytes[layer] for layer, m in enumerate(counters["layer_misses"])
                   if layer in expert_bytes)
        assert counters["bytes_read"] == want
        assert counters["experts_read"] == sum(counters["layer_misses"])
