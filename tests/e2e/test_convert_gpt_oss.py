"""`sluice convert` on gpt-oss snapshots, in both layouts of the routed experts:
- as transformers 5 saves them (tools/tiny_hf_models.py's "gptoss": gate_up_proj
  [n_expert, n_embd, 2 n_ff] with gate and up columns interleaved, down_proj [n_expert, n_ff,
  n_embd], both transposed relative to GGUF): the F32 GGUF's tensors must be byte for byte
  tools/tiny_hf_gguf.py's gguf-py statement of llama.cpp's converter, and its logits the
  transformers golden's;
- as the Hub ships openai/gpt-oss-20b/120b: experts as MXFP4 `*_blocks` (U8 [n_expert, rows,
  n/32, 16], value 2i in the low nibble of byte i) and `*_scales` (U8 E8M0 [n_expert, rows,
  n/32]), gate/up rows interleaved. The tiny one is built here from the same F32 weights with
  gguf-py's MXFP4 quantizer; the converted expert stacks must be byte for byte that quantizer's
  output in GGUF order (the blocks are repacked, never requantized, whatever --type says).
llama.cpp (xllamacpp, when installed) must agree with Sluice on each converted file."""
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
if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)
gguf = pytest.importorskip("gguf")

NAME = "gptoss"
GOLDEN = json.loads((ROOT / "tests" / "golden" / "transformers_tiny" / f"{NAME}.json").read_text())
PROMPT = tiny_hf_models.PROMPT
# F32 weights, F32 KV: Sluice on the converted GGUF against transformers (the golden); the same
# bound as tests/e2e/test_transformers_tiny.py's F32 one.
GOLDEN_TOLERANCE = 1e-4
# Sluice against llama.cpp b11549 on the same GGUF, F32 KV, no flash attention: two summation
# orders (tests/e2e/test_convert.py's bounds for F32 and for quantized files).
LLAMACPP_TOLERANCE = 1e-3
QUANTIZED_LLAMACPP_TOLERANCE = 1e-4
EXPERT_STACKS = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def run(*args, check=True):
    result = subprocess.run([SLUICE_BIN, *map(str, args)], capture_output=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def convert(snapshot, out, *extra):
    run("convert", snapshot, "-o", out, *extra)
    return out


def sluice_eval(model, *extra):
    out = run("eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--all-positions",
              "--json", "--kv", "f32", "--greedy", str(tiny_hf_models.GREEDY_STEPS), *extra)
    return json.loads(out.stdout)


def read(path):
    reader = gguf.GGUFReader(str(path))
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("GGUF.")}
    return fields, {t.name: t for t in reader.tensors}


def gguf_experts(weights, layer):
    """llama.cpp's ffn_{gate,up,down}_exps of one layer as [n_expert, rows, n] float32."""
    p = f"model.layers.{layer}.mlp.experts."
    gate_up = weights[p + "gate_up_proj"].transpose(0, 2, 1)  # [n_expert, 2 n_ff, n_embd]
    return {"ffn_gate_exps.weight": np.ascontiguousarray(gate_up[:, ::2]),
            "ffn_up_exps.weight": np.ascontiguousarray(gate_up[:, 1::2]),
            "ffn_down_exps.weight": np.ascontiguousarray(weights[p + "down_proj"].transpose(0, 2, 1))}


def hub_mxfp4(ggml_blocks):
    """gguf-py's MXFP4 rows [.., n/32 * 17] (per block: E8M0 byte, then value j low and j + 16
    high in byte j) → the Hub's (values [.., n/32, 16] with value 2i low in byte i, scales)."""
    blocks = ggml_blocks.reshape(*ggml_blocks.shape[:-1], -1, 17)
    scales, qs = blocks[..., 0], blocks[..., 1:]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # [.., 32] in order
    return (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8), scales.copy()


FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def transformers_dequantize(values, scales):
    """transformers' convert_moe_packed_tensors (before its final transpose): the low nibble of
    byte i is value 2i, the high one 2i + 1, each times 2^(scale - 127)."""
    out = np.empty((*values.shape[:-1], 32), dtype=np.float32)
    out[..., 0::2], out[..., 1::2] = FP4_VALUES[values & 0x0F], FP4_VALUES[values >> 4]
    out *= np.ldexp(np.float32(1), scales.astype(np.int32) - 127)[..., None]
    return out.reshape(*values.shape[:-2], -1)


def write_mxfp4_snapshot(out):
    """The gptoss weights with the experts quantized by gguf-py and laid out as on the Hub;
    returns {GGUF expert name: gguf-py's MXFP4 bytes}."""
    from gguf.quants import quantize
    tiny_hf_models.write_snapshot(NAME, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn",
                                                             "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    weights = tiny_hf_models.weights(NAME)
    tensors, expected = {}, {}
    for name, x in weights.items():
        if not name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            tensors[name] = x
            continue
        if name.endswith("down_proj"):
            continue  # written beside gate_up_proj, in the Hub's order
        layer = int(name.split(".")[2])
        p = f"model.layers.{layer}.mlp.experts."
        q = {part: quantize(x, gguf.GGMLQuantizationType.MXFP4)
             for part, x in gguf_experts(weights, layer).items()}
        for part, blocks in q.items():
            expected[f"blk.{layer}.{part}"] = blocks
        for part, blocks in q.items():  # the Hub layout means what transformers reads
            np.testing.assert_array_equal(
                transformers_dequantize(*hub_mxfp4(blocks)),
                gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.MXFP4), part)
        gate, gate_scales = hub_mxfp4(q["ffn_gate_exps.weight"])
        up, up_scales = hub_mxfp4(q["ffn_up_exps.weight"])
        values = np.empty((gate.shape[0], 2 * gate.shape[1], *gate.shape[2:]), dtype=np.uint8)
        values[:, 0::2], values[:, 1::2] = gate, up
        scales = np.empty(values.shape[:-1], dtype=np.uint8)
        scales[:, 0::2], scales[:, 1::2] = gate_scales, up_scales
        tensors[p + "gate_up_proj_blocks"], tensors[p + "gate_up_proj_scales"] = values, scales
        down, down_scales = hub_mxfp4(q["ffn_down_exps.weight"])
        tensors[p + "down_proj_blocks"], tensors[p + "down_proj_scales"] = down, down_scales
    tiny_hf_models.write_safetensors(
        out / "model.safetensors", tensors,
        {name: "U8" if x.dtype == np.uint8 else "F32" for name, x in tensors.items()})
    return expected


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt_oss") / NAME
    digest = tiny_hf_models.write_snapshot(NAME, out)
    assert digest == GOLDEN["safetensors_sha256"], "numpy generated other weights than the golden's"
    return out


@pytest.fixture(scope="module")
def converted(snapshot, tmp_path_factory):
    return convert(snapshot, tmp_path_factory.mktemp("gpt_oss_gguf") / f"{NAME}.gguf",
                   "--type", "F32")


@pytest.fixture(scope="module")
def mxfp4(tmp_path_factory):
    """(snapshot dir, {expert name: gguf-py MXFP4 bytes}, --type F32 GGUF, --type Q8_0 GGUF)."""
    root = tmp_path_factory.mktemp("gpt_oss_mxfp4")
    expected = write_mxfp4_snapshot(root / "hub")
    return (root / "hub", expected, convert(root / "hub", root / "f32.gguf", "--type", "F32"),
            convert(root / "hub", root / "q8_0.gguf", "--type", "Q8_0"))


def llama_cpp_logits(path):
    pytest.importorskip("xllamacpp")
    import llamacpp_oracle
    lib = llamacpp_oracle.Llama()
    with lib.load(path) as model:
        assert model.n_vocab == 320
        with model.context(n_ctx=64, kv_type=llamacpp_oracle.GGML_TYPE_F32,
                           flash_attn=llamacpp_oracle.FLASH_ATTN_DISABLED) as ctx:
            return ctx.decode(PROMPT, all_logits=True).astype(np.float64)


def test_tensors_equal_gguf_py_reference_conversion(converted, tmp_path):
    """The experts transposed, gate/up picked from interleaved columns, biases split the same
    way, sinks and router as llama.cpp names them: every tensor byte for byte gguf-py's."""
    import tiny_hf_gguf
    reference = tmp_path / "reference.gguf"
    tiny_hf_gguf.write_gguf(NAME, reference)
    _, want = read(reference)
    _, got = read(converted)
    assert set(got) == set(want)
    for name, tensor in want.items():
        assert got[name].tensor_type == gguf.GGMLQuantizationType.F32, name
        assert list(got[name].shape) == list(tensor.shape), name
        np.testing.assert_array_equal(np.array(got[name].data), np.array(tensor.data), name)


def test_llama_cpp_keys(converted):
    fields, _ = read(converted)
    cfg = tiny_hf_models.config(NAME)
    assert fields["general.architecture"] == "gpt-oss"
    assert not [k for k in fields if k.startswith("sluice.")]
    want = {"expert_count": 8, "expert_used_count": 2, "expert_feed_forward_length": 32,
            "attention.sliding_window": 4, "attention.head_count": 4,
            "attention.head_count_kv": 2, "attention.key_length": 16, "rope.freq_base": 150000.0,
            "rope.scaling.type": "yarn", "rope.scaling.factor": 32.0,
            "rope.scaling.original_context_length": 4096,
            "context_length": cfg["max_position_embeddings"]}
    for key, value in want.items():
        assert fields[f"gpt-oss.{key}"] == value, key


def check_golden(out):
    logits = np.array(out["logits"])
    expected = np.array(GOLDEN["logits"])
    assert logits.shape == expected.shape == (len(PROMPT), GOLDEN["n_vocab"])
    worst = float(np.abs(logits - expected).max())
    print(f"{NAME}: max abs converted GGUF vs transformers {worst:.3g}")
    assert worst <= GOLDEN_TOLERANCE
    assert out["greedy_tokens"] == GOLDEN["greedy_continuation"]


def test_converted_gguf_matches_transformers(converted):
    check_golden(sluice_eval(converted))


def test_config_saved_by_transformers_5(snapshot, tmp_path):
    """transformers 5 writes rope_parameters (rope_theta inside) instead of rope_scaling."""
    shutil.copytree(snapshot, tmp_path / NAME)
    (tmp_path / NAME / "config.json").write_text(json.dumps(GOLDEN["config_saved_by_transformers"]))
    check_golden(sluice_eval(convert(tmp_path / NAME, tmp_path / "saved.gguf", "--type", "F32")))


def test_llama_cpp_agrees_with_sluice(converted):
    theirs = llama_cpp_logits(converted)
    worst = float(np.abs(np.array(sluice_eval(converted)["logits"]) - theirs).max())
    print(f"{NAME} F32: max abs Sluice vs llama.cpp {worst:.3g}")
    assert worst <= LLAMACPP_TOLERANCE


def test_mxfp4_experts_are_repacked_not_requantized(mxfp4, converted):
    """The Hub's blocks become GGUF MXFP4 blocks equal to gguf-py's quantization of the same
    experts in GGUF order, whatever --type; every other tensor is the F32 conversion's (F32),
    or --type's Q8_0 with biases, norms, sinks and the router F32."""
    _, expected, f32_file, q8_file = mxfp4
    _, f32 = read(converted)
    for path, matrix_type in ((f32_file, "F32"), (q8_file, "Q8_0")):
        _, got = read(path)
        assert set(got) == set(f32)
        for name, blocks in expected.items():
            assert got[name].tensor_type.name == "MXFP4", name
            assert list(got[name].shape) == list(f32[name].shape), name
            np.testing.assert_array_equal(np.array(got[name].data).reshape(blocks.shape), blocks,
                                          name)
        assert got["blk.0.attn_q.weight"].tensor_type.name == matrix_type
        for name in ("blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_exps.bias",
                     "blk.0.attn_sinks.weight", "blk.0.attn_q.bias"):
            assert got[name].tensor_type.name == "F32", name
        if matrix_type == "F32":
            for name, tensor in f32.items():
                if name not in expected:
                    np.testing.assert_array_equal(np.array(got[name].data),
                                                  np.array(tensor.data), name)


@pytest.mark.parametrize("which", ["F32", "Q8_0"])
def test_llama_cpp_agrees_on_mxfp4(mxfp4, which):
    path = mxfp4[2] if which == "F32" else mxfp4[3]
    theirs = llama_cpp_logits(path)
    ours = sluice_eval(path)
    worst = float(np.abs(np.array(ours["logits"]) - theirs).max())
    print(f"{NAME} MXFP4 experts, {which} rest: max abs Sluice vs llama.cpp {worst:.3g}")
    assert worst <= QUANTIZED_LLAMACPP_TOLERANCE


def test_mxfp4_streamed_experts_match(mxfp4):
    """The converted file's MXFP4 experts read through a 3-slot cache give the resident numbers."""
    resident = sluice_eval(mxfp4[2])
    streamed = sluice_eval(mxfp4[2], "--stream-experts", "--expert-cache", "3")
    assert streamed["logits"] == resident["logits"]


def one_line_refusal(snapshot, out_dir, *extra):
    out_dir.mkdir()
    result = run("convert", snapshot, "-o", out_dir / "model.gguf", *extra, check=False)
    assert result.returncode != 0
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert list(out_dir.iterdir()) == []
    return lines[0]


def test_requantizing_mxfp4_experts_is_refused(mxfp4, tmp_path):
    line = one_line_refusal(mxfp4[0], tmp_path / "out", "--expert-type", "Q4_K")
    assert "--expert-type Q4_K" in line and "MXFP4" in line


@pytest.mark.parametrize("change", [{"layer_types": ["full_attention", "sliding_attention"]},
                                    {"swiglu_limit": 10.0},
                                    {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}])
def test_what_llama_cpp_cannot_compute_is_refused(snapshot, tmp_path, change):
    shutil.copytree(snapshot, tmp_path / NAME)
    cfg = json.loads((tmp_path / NAME / "config.json").read_text())
    cfg.update(change)
    (tmp_path / NAME / "config.json").write_text(json.dumps(cfg))
    line = one_line_refusal(tmp_path / NAME, tmp_path / "out")
    assert next(iter(change)) in line or "dynamic" in line


@pytest.mark.parametrize("layout", ["transformers", "hub-mxfp4"])
def test_running_a_snapshot_equals_running_its_conversion(snapshot, mxfp4, converted, layout):
    """`sluice eval` on the snapshot itself converts it to a temporary GGUF in its own float type
    (the MXFP4 experts as they are) and computes exactly what the --type F32 conversion does."""
    source, gguf_file = (snapshot, converted) if layout == "transformers" else (mxfp4[0], mxfp4[2])
    direct = run("eval", "--model", source, "--tokens", ",".join(map(str, PROMPT)),
                 "--all-positions", "--json", "--kv", "f32")
    assert f"sluice convert {source} -o MODEL.gguf" in direct.stderr.decode()
    assert json.loads(direct.stdout)["logits"] == sluice_eval(gguf_file)["logits"]


TOKENIZER = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", ROOT.parent / "shared" / "testdata")) / "tokenizers" / "gptoss"
TEXTS = ["Hello world", " Hello  world\n\nfoo", "<|start|>user<|message|>Hi there!<|end|>",
         "12345 tokens… ünïcödé 日本語", "    indented\tcode()  ", "don't I'M we'll 3.14159"]


def test_real_tokenizer_gives_the_same_ids(tmp_path):
    """gpt-oss's o200k_harmony tokenizer.json around the tiny model: the GGUF gives
    tokenizer.json's ids, in Sluice and in llama.cpp."""
    import lzma
    if not TOKENIZER.is_dir():
        pytest.skip(f"{TOKENIZER} is missing")
    snap = tmp_path / "snap"
    snap.mkdir()
    text = lzma.open(TOKENIZER / "tokenizer.json.xz").read().decode()
    (snap / "tokenizer.json").write_text(text)
    shutil.copy(TOKENIZER / "tokenizer_config.json", snap / "tokenizer_config.json")
    tok = json.loads(text)
    cfg = tiny_hf_models.config(NAME)
    cfg["vocab_size"] = 1 + max(max(tok["model"]["vocab"].values()),
                                max((t["id"] for t in tok["added_tokens"]), default=0))
    (snap / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(7)
    tensors = {name: (0.1 * rng.standard_normal(shape, dtype=np.float32))
               for name, shape, _ in tiny_hf_models._tensor_specs(cfg)}
    tiny_hf_models.write_safetensors(snap / "model.safetensors", tensors, "F16")
    out = convert(snap, tmp_path / "tok.gguf")
    lines = run("inspect", out).stdout.decode().splitlines()
    fields = {line.split()[0]: line.split()[-1] for line in lines
              if "tokenizer.ggml.model" in line or "tokenizer.ggml.pre" in line}
    assert fields["tokenizer.ggml.model"] == '"gpt2"'
    # llama.cpp's converter names it gpt-4o by a hash of its output; Sluice picks the name whose
    # regex and merge rule are the tokenizer.json's (o200k with ignore_merges, which llama.cpp's
    # gpt-4o entry lacks), so the ids stay tokenizer.json's in both engines.
    assert fields["tokenizer.ggml.pre"] == '"granite-embed-multi-97m"'
    flags = ["--add-special", "--jsonl", "--parse-special"]
    lines_in = "\n".join(json.dumps(t) for t in TEXTS).encode()
    ids = {}
    for model in (snap, out):
        result = subprocess.run([SLUICE_BIN, "tokenize", "-m", str(model), *flags],
                                capture_output=True, input=lines_in, timeout=120)
        assert result.returncode == 0, result.stderr.decode()
        ids[model] = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert ids[out] == ids[snap]
    try:
        import llamacpp_oracle
        lib = llamacpp_oracle.Llama()
    except (ImportError, RuntimeError):
        return  # xllamacpp is not installed
    with lib.load(out, vocab_only=True) as model:
        for text, got in zip(TEXTS, ids[out]):
            assert model.tokenize(text, True, True) == got, text
