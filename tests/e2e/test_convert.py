"""`sluice convert`: a Hugging Face snapshot becomes a GGUF with llama.cpp's names, keys and
numbers. The tiny snapshots of tools/tiny_hf_models.py (dense and MoE, and a tiny qwen3moe made
here, per expert and fused as transformers 5 saves it) are converted; Sluice must compute the same logits from the
GGUF as from the snapshot, llama.cpp (xllamacpp, when installed) the same as Sluice, and bad
snapshots are refused with one line and no output file."""
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

DENSE = ["llama", "llama31", "qwen2", "qwen3", "gemma3"]
# The MoE snapshots of tools/tiny_hf_models.py: llama.cpp's per-expert stacks, mixtral as llama
# (Q/K permuted), glm4moe's partial rotary and shared experts, deepseek3's MLA (kv_b_proj split
# into attn_k_b, transposed per head, and attn_v_b).
MOE = ["mixtral", "olmoe", "glm4moe", "deepseek3"]
PROMPT = tiny_hf_models.PROMPT
# F32 in, F32 out: the snapshot and the GGUF run the same kernels on the same floats (qwen2 and
# qwen3 bit-identical), except llama's Q/K rows, permuted by the converter and rotated pairwise
# instead of by halves: the same products, but q·k sums the head's dimensions in another order
# (measured 1.3e-6, 1.1e-6 with biases).
F32_TOLERANCE = 1e-4
# gemma3: a GGUF is computed as llama.cpp computes it, GELU read from a half-precision table
# (test_transformers_tiny.py says the same); measured 1.8e-3 from the snapshot's exact GELU.
GEMMA_GGUF_TOLERANCE = 1e-2
# Sluice against llama.cpp on the same GGUF (F32 KV cache, llama.cpp without flash attention,
# whose CPU kernel rounds through F16 and parts by 3e-3 .. 1e-1 here): two implementations'
# summation orders; measured 1.2e-6 .. 2.0e-6, gemma3 3.3e-4.
LLAMACPP_TOLERANCE = 1e-3
# Quantized weights: Sluice follows ggml's block and activation-quantization order, and runs at
# the oracle build's instruction set (same_isa_env: the wheel has no AVX-512); measured
# 5e-9 (the printed precision) for the block-32 types, 4.8e-7 F16, 1.2e-7 BF16, 1.7e-6 k-quants.
QUANTIZED_LLAMACPP_TOLERANCE = 1e-4


def run(*args, check=True, env=None):
    result = subprocess.run([SLUICE_BIN, *map(str, args)], capture_output=True, timeout=300,
                            env={**os.environ, **(env or {})})
    if check:
        assert result.returncode == 0, result.stderr.decode()
    return result


def convert(snapshot, out, *extra):
    run("convert", snapshot, "-o", out, *extra)
    return out


def sluice_logits(model, env=None):
    """env: for a comparison with llama.cpp, its Llama.same_isa_env() (the same kernels' order)."""
    out = run("eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--all-positions",
              "--json", "--kv", "f32", env=env)
    return np.array(json.loads(out.stdout)["logits"], dtype=np.float64)


def moe_config(fused):
    return {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True,
        "vocab_size": 320, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "float32", "transformers_version": "5.0.0" if fused else "4.51.0",
    }


def write_moe_snapshot(out, fused, seed=4242):
    """A tiny random qwen3moe: rows of 256 so that the k-quants apply to every matrix."""
    cfg = moe_config(fused)
    rng = np.random.default_rng(seed)
    d, v, e, ff = cfg["hidden_size"], cfg["vocab_size"], cfg["num_experts"], cfg["moe_intermediate_size"]
    dq, dkv, hd = 4 * 64, 2 * 64, 64

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    t = {"model.embed_tokens.weight": mat(v, d)}
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        t[p + "input_layernorm.weight"] = norm(d)
        t[p + "self_attn.q_proj.weight"] = mat(dq, d)
        t[p + "self_attn.k_proj.weight"] = mat(dkv, d)
        t[p + "self_attn.v_proj.weight"] = mat(dkv, d)
        t[p + "self_attn.q_norm.weight"] = norm(hd)
        t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "self_attn.o_proj.weight"] = mat(d, dq)
        t[p + "post_attention_layernorm.weight"] = norm(d)
        t[p + "mlp.gate.weight"] = mat(e, d)
        gate = [mat(ff, d) for _ in range(e)]
        up = [mat(ff, d) for _ in range(e)]
        down = [mat(d, ff) for _ in range(e)]
        if fused:
            t[p + "mlp.experts.gate_up_proj"] = np.stack(
                [np.concatenate([g, u]) for g, u in zip(gate, up)])
            t[p + "mlp.experts.down_proj"] = np.stack(down)
        else:
            for x in range(e):
                t[p + f"mlp.experts.{x}.gate_proj.weight"] = gate[x]
                t[p + f"mlp.experts.{x}.up_proj.weight"] = up[x]
                t[p + f"mlp.experts.{x}.down_proj.weight"] = down[x]
    t["model.norm.weight"] = norm(d)
    t["lm_head.weight"] = mat(v, d)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    (out / "tokenizer.json").write_text(json.dumps(tiny_hf_models.tokenizer_json(v)))
    tiny_hf_models.write_safetensors(out / "model.safetensors", t, "F32")
    return out


def write_llama_with_biases(out):
    """The tiny llama with Q/K/V biases (attention_bias): llama.cpp permutes Q/K biases too."""
    tiny_hf_models.write_snapshot("llama", out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["attention_bias"] = True
    (out / "config.json").write_text(json.dumps(cfg))
    tensors = tiny_hf_models.weights("llama")
    rng = np.random.default_rng(5)
    for il in range(cfg["num_hidden_layers"]):
        for proj, n in (("q", 64), ("k", 32), ("v", 32)):
            tensors[f"model.layers.{il}.self_attn.{proj}_proj.bias"] = (
                0.3 * rng.standard_normal(n)).astype(np.float32)
    tiny_hf_models.write_safetensors(out / "model.safetensors", tensors, "F32")
    return out


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert_hf")
    made = {}
    for name in DENSE + MOE:
        tiny_hf_models.write_snapshot(name, root / name)
        made[name] = root / name
    made["llama-bias"] = write_llama_with_biases(root / "llama-bias")
    made["qwen3moe"] = write_moe_snapshot(root / "qwen3moe", fused=False)
    made["qwen3moe-fused"] = write_moe_snapshot(root / "qwen3moe-fused", fused=True)
    return made


@pytest.fixture(scope="module")
def converted(snapshots, tmp_path_factory):
    """name → the F32 GGUF of that snapshot."""
    root = tmp_path_factory.mktemp("converted")
    return {name: convert(path, root / f"{name}.gguf", "--type", "F32")
            for name, path in snapshots.items()}


@pytest.mark.parametrize("name", DENSE + MOE + ["llama-bias"])
def test_f32_gguf_computes_what_the_snapshot_computes(snapshots, converted, name):
    want = sluice_logits(snapshots[name])
    got = sluice_logits(converted[name])
    assert got.shape == want.shape == (len(PROMPT), 320)
    worst = float(np.abs(got - want).max())
    print(f"{name}: max abs snapshot vs GGUF {worst:.3g}")
    assert worst <= (GEMMA_GGUF_TOLERANCE if name == "gemma3" else F32_TOLERANCE)


@pytest.mark.parametrize("name", DENSE + MOE)
def test_tensors_equal_gguf_py_reference_conversion(converted, tmp_path, name):
    """tools/tiny_hf_gguf.py writes the same snapshot as llama.cpp's converter would, with gguf-py:
    every tensor must be there with the same bytes."""
    import tiny_hf_gguf
    reference = tmp_path / f"{name}.gguf"
    tiny_hf_gguf.write_gguf(name, reference)
    _, want = read(reference)
    _, got = read(converted[name])
    assert set(got) == set(want)
    for tensor_name, tensor in want.items():
        assert list(got[tensor_name].shape) == list(tensor.shape), tensor_name
        np.testing.assert_array_equal(np.array(got[tensor_name].data), np.array(tensor.data),
                                      tensor_name)


EXPECTED_TENSORS = {
    "llama": {"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_norm.weight",
              "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
              "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight",
              "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"},
    "llama31": {"rope_freqs.weight"},
    "qwen2": {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"},
    "qwen3": {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight", "output.weight"},
    "gemma3": {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"},
    "qwen3moe": {"blk.1.ffn_gate_inp.weight", "blk.1.ffn_gate_exps.weight",
                 "blk.1.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"},
}


def read(path):
    reader = gguf.GGUFReader(str(path))
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("GGUF.")}
    tensors = {t.name: t for t in reader.tensors}
    return fields, tensors


@pytest.mark.parametrize("name", DENSE + ["qwen3moe"])
def test_llama_cpp_names_and_keys(converted, name):
    fields, tensors = read(converted[name])
    arch = {"llama31": "llama"}.get(name, name)
    assert fields["general.architecture"] == arch
    assert not [k for k in fields if k.startswith("sluice.")]
    assert EXPECTED_TENSORS[name] <= set(tensors)
    for key in ("block_count", "embedding_length", "attention.head_count", "context_length",
                "attention.layer_norm_rms_epsilon", "rope.freq_base"):
        assert f"{arch}.{key}" in fields, key
    assert fields["tokenizer.ggml.model"] == "gpt2"
    assert fields["tokenizer.ggml.pre"] == "gpt-2"
    assert len(fields["tokenizer.ggml.tokens"]) == 320
    assert len(fields["tokenizer.ggml.merges"]) > 0
    assert fields["tokenizer.ggml.bos_token_id"] == 1
    assert fields["tokenizer.ggml.eos_token_id"] == 2
    for tensor_name, tensor in tensors.items():
        assert tensor.tensor_type == gguf.GGMLQuantizationType.F32, tensor_name
    if name == "qwen3moe":
        assert fields["qwen3moe.expert_count"] == 8
        assert fields["qwen3moe.expert_used_count"] == 2
        assert fields["qwen3moe.expert_feed_forward_length"] == 256
        assert list(tensors["blk.0.ffn_gate_exps.weight"].shape) == [256, 256, 8]
        assert list(tensors["blk.0.ffn_down_exps.weight"].shape) == [256, 256, 8]


def test_llama_qk_rows_are_permuted_as_llama_cpp_does(snapshots, converted):
    """HF rotate_half pairs i with i + d/2; llama.cpp's converter reorders rows so pairs are
    adjacent. tools/tiny_hf_gguf.py's _permute_rows is the gguf-py-side statement of it."""
    from tiny_hf_gguf import _permute_rows
    weights = tiny_hf_models.weights("llama")
    _, tensors = read(converted["llama"])
    q = weights["model.layers.1.self_attn.q_proj.weight"]
    np.testing.assert_array_equal(np.array(tensors["blk.1.attn_q.weight"].data), _permute_rows(q, 4))
    k = weights["model.layers.1.self_attn.k_proj.weight"]
    np.testing.assert_array_equal(np.array(tensors["blk.1.attn_k.weight"].data), _permute_rows(k, 2))
    v = weights["model.layers.1.self_attn.v_proj.weight"]
    np.testing.assert_array_equal(np.array(tensors["blk.1.attn_v.weight"].data), v)


def test_gemma_norms_store_one_plus_w(converted):
    weights = tiny_hf_models.weights("gemma3")
    _, tensors = read(converted["gemma3"])
    w = weights["model.layers.0.self_attn.q_norm.weight"]
    np.testing.assert_array_equal(np.array(tensors["blk.0.attn_q_norm.weight"].data),
                                  w + np.float32(1))


def test_fused_experts_convert_to_the_same_tensors(converted):
    _, per_expert = read(converted["qwen3moe"])
    _, fused = read(converted["qwen3moe-fused"])
    assert set(per_expert) == set(fused)
    for name, tensor in per_expert.items():
        np.testing.assert_array_equal(np.array(tensor.data), np.array(fused[name].data), name)


QUANTIZED = {  # --type → what the dense tiny models' rows of 64 and 128 get
    "Q8_0": "Q8_0", "Q4_0": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "F16": "F16",
    "BF16": "BF16"}


@pytest.fixture(scope="module")
def quantized(snapshots, tmp_path_factory):
    """type → the qwen2 GGUF of that --type; "moe" → qwen3moe in Q6_K with Q4_K experts,
    "moe-q5k" all Q5_K: the k-quants themselves on rows of 256."""
    root = tmp_path_factory.mktemp("quantized")
    made = {asked: convert(snapshots["qwen2"], root / f"qwen2-{asked}.gguf", "--type", asked)
            for asked in QUANTIZED}
    made["moe"] = convert(snapshots["qwen3moe"], root / "moe.gguf", "--type", "Q6_K",
                          "--expert-type", "Q4_K")
    made["moe-q5k"] = convert(snapshots["qwen3moe"], root / "moe-q5k.gguf", "--type", "Q5_K")
    made["moe-mxfp4"] = convert(snapshots["qwen3moe"], root / "moe-mxfp4.gguf", "--type", "Q8_0",
                                "--expert-type", "MXFP4")
    return made


def test_quantized_types_and_fallbacks(snapshots, converted, quantized):
    """Rows of 64/128 (the dense tiny models) take llama-quantize's substitutes for the k-quants;
    the MoE's rows of 256 take the k-quants themselves. Norms, biases and the router stay F32.
    The logits only have to stay sane here (random weights of unit scale are hard on 4-bit
    types); that both engines read the same bytes the same way is the llama.cpp test below."""
    reference = sluice_logits(snapshots["qwen2"])
    for asked, written in QUANTIZED.items():
        _, tensors = read(quantized[asked])
        assert tensors["blk.0.attn_q.weight"].tensor_type.name == written, asked
        assert tensors["blk.0.attn_q.bias"].tensor_type.name == "F32"
        assert tensors["blk.0.attn_norm.weight"].tensor_type.name == "F32"
        worst = float(np.abs(sluice_logits(quantized[asked]) - reference).max())
        print(f"qwen2 {asked}: max abs vs F32 snapshot {worst:.3g} (logit std {reference.std():.3g})")
        assert worst < 5 * reference.std(), asked
    fields, tensors = read(quantized["moe"])
    assert tensors["blk.0.ffn_gate_exps.weight"].tensor_type.name == "Q4_K"
    assert tensors["blk.0.ffn_down_exps.weight"].tensor_type.name == "Q4_K"
    assert tensors["blk.0.attn_q.weight"].tensor_type.name == "Q6_K"
    assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type.name == "F32"
    assert fields["general.file_type"] == 18
    _, tensors = read(quantized["moe-q5k"])
    assert tensors["blk.0.ffn_up_exps.weight"].tensor_type.name == "Q5_K"
    assert tensors["blk.0.attn_output.weight"].tensor_type.name == "Q5_K"
    f32 = sluice_logits(converted["qwen3moe"])
    worst = float(np.abs(sluice_logits(quantized["moe"]) - f32).max())
    print(f"qwen3moe Q6_K + Q4_K experts: max abs vs F32 {worst:.3g} (logit std {f32.std():.3g})")
    assert worst < 5 * f32.std()


def test_default_type_follows_the_snapshot(snapshots, tmp_path):
    out = convert(snapshots["qwen3"], tmp_path / "qwen3.gguf")
    _, tensors = read(out)
    assert tensors["blk.0.attn_q.weight"].tensor_type.name == "F16"


@pytest.mark.parametrize("problem", ["no_config", "unknown_type", "no_tokenizer", "bad_type"])
def test_bad_snapshot_one_line_and_no_file(snapshots, tmp_path, problem):
    snap = tmp_path / "snap"
    tiny_hf_models.write_snapshot("qwen3", snap)
    extra = []
    if problem == "no_config":
        (snap / "config.json").unlink()
    elif problem == "unknown_type":
        cfg = json.loads((snap / "config.json").read_text())
        cfg["model_type"] = "mamba"
        (snap / "config.json").write_text(json.dumps(cfg))
    elif problem == "no_tokenizer":
        (snap / "tokenizer.json").unlink()
    else:
        extra = ["--type", "Q3_K"]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = run("convert", snap, "-o", out_dir / "model.gguf", *extra, check=False)
    assert result.returncode != 0
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert {"no_config": "config.json", "unknown_type": "mamba", "no_tokenizer": "tokenizer.json",
            "bad_type": "Q3_K"}[problem] in lines[0]
    assert list(out_dir.iterdir()) == []


@pytest.fixture(scope="module")
def llama_cpp():
    pytest.importorskip("xllamacpp")
    import llamacpp_oracle
    return llamacpp_oracle


# Not olmoe: the tiny snapshot has 4 query heads over 2 KV heads, so its k_norm spans 32 values;
# llama.cpp's olmoe loader wants n_embd (the real OLMoE is multi-head, where the two agree).
@pytest.mark.parametrize("name", DENSE + [m for m in MOE if m != "olmoe"] + ["llama-bias", "qwen3moe"])
def test_llama_cpp_agrees_with_sluice(llama_cpp, converted, name):
    lib = llama_cpp.Llama()
    with lib.load(converted[name]) as model:
        assert model.n_vocab == 320
        with model.context(n_ctx=64, kv_type=llama_cpp.GGML_TYPE_F32,
                           flash_attn=llama_cpp.FLASH_ATTN_DISABLED) as ctx:
            theirs = ctx.decode(PROMPT, all_logits=True).astype(np.float64)
    ours = sluice_logits(converted[name], env=lib.same_isa_env())
    worst = float(np.abs(ours - theirs).max())
    print(f"{name}: max abs Sluice vs llama.cpp {worst:.3g}")
    assert worst <= LLAMACPP_TOLERANCE


def test_mxfp4_experts_are_gguf_py_bytes(converted, quantized):
    """--expert-type MXFP4 (gpt-oss's expert format; llama-quantize's MXFP4_MOE): the expert
    stacks are byte for byte gguf-py's MXFP4 quantization of the F32 conversion's rows, the
    other matrices Q8_0, and the file type says MOSTLY_MXFP4_MOE (38)."""
    from gguf.quants import quantize
    fields, tensors = read(quantized["moe-mxfp4"])
    _, f32 = read(converted["qwen3moe"])
    assert fields["general.file_type"] == 38
    assert tensors["blk.0.attn_q.weight"].tensor_type.name == "Q8_0"
    for part in ("gate", "up", "down"):
        name = f"blk.1.ffn_{part}_exps.weight"
        assert tensors[name].tensor_type.name == "MXFP4", name
        want = quantize(np.array(f32[name].data), gguf.GGMLQuantizationType.MXFP4)
        np.testing.assert_array_equal(np.array(tensors[name].data).reshape(want.shape), want, name)


@pytest.mark.parametrize("asked", list(QUANTIZED) + ["moe", "moe-q5k", "moe-mxfp4"])
def test_llama_cpp_agrees_on_quantized_files(llama_cpp, quantized, asked):
    lib = llama_cpp.Llama()
    with lib.load(quantized[asked]) as model:
        with model.context(n_ctx=64, kv_type=llama_cpp.GGML_TYPE_F32,
                           flash_attn=llama_cpp.FLASH_ATTN_DISABLED) as ctx:
            theirs = ctx.decode(PROMPT, all_logits=True).astype(np.float64)
    ours = sluice_logits(quantized[asked], env=lib.same_isa_env())
    worst = float(np.abs(ours - theirs).max())
    print(f"{asked}: max abs Sluice vs llama.cpp {worst:.3g}")
    assert worst <= QUANTIZED_LLAMACPP_TOLERANCE


TOKENIZERS = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", ROOT.parent / "shared" / "testdata")) / "tokenizers"
TOKENIZER_FAMILY = {"llama3": "llama", "qwen3": "qwen3", "llama2": "llama", "gemma3": "gemma3"}
TEXTS = ["Hello world", " Hello  world\n\nfoo", "<|im_start|>user\nHi there!<|im_end|>",
         "<s> [INST] 12345 tokens… ünïcödé 日本語 [/INST]", "    indented\tcode()  ",
         "don't I'M we'll 3.14159", "<start_of_turn>model\n🙂 emoji"]


def write_tokenizer_snapshot(name, out):
    """A tiny model of the family around a real tokenizer (F16, embeddings of its full size)."""
    import lzma
    import shutil
    src = TOKENIZERS / name
    plain = src / "tokenizer.json"
    text = plain.read_text() if plain.exists() else lzma.open(src / "tokenizer.json.xz").read().decode()
    out.mkdir(parents=True)
    (out / "tokenizer.json").write_text(text)
    shutil.copy(src / "tokenizer_config.json", out / "tokenizer_config.json")
    tok = json.loads(text)
    n_vocab = 1 + max(max(tok["model"]["vocab"].values()),
                      max((t["id"] for t in tok["added_tokens"]), default=0))
    cfg = tiny_hf_models.config(TOKENIZER_FAMILY[name])
    cfg["vocab_size"] = n_vocab
    (out / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(7)
    tensors = {hf_name: (0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
               for hf_name, shape, _ in tiny_hf_models._tensor_specs(cfg)}
    tiny_hf_models.write_safetensors(out / "model.safetensors", tensors, "F16")
    return out


def sluice_tokenize(model, special):
    flags = ["--add-special", "--jsonl"] + (["--parse-special"] if special else [])
    result = subprocess.run([SLUICE_BIN, "tokenize", "-m", str(model), *flags], capture_output=True,
                            input="\n".join(json.dumps(t) for t in TEXTS).encode(), timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


@pytest.mark.parametrize("name", list(TOKENIZER_FAMILY))
def test_real_tokenizers_give_the_same_ids(tmp_path, name):
    """The GGUF's vocabulary gives the ids of tokenizer.json in Sluice and in llama.cpp. One
    known difference, llama.cpp's own: llama2's "<s>" is a normalized added token, which
    tokenizers matches in the normalized text (absorbing the space after it); llama.cpp, and
    so any GGUF, keeps the space as its own token."""
    if not (TOKENIZERS / name).is_dir():
        pytest.skip(f"{TOKENIZERS / name} is missing")
    snap = write_tokenizer_snapshot(name, tmp_path / name)
    out = convert(snap, tmp_path / f"{name}.gguf")
    # sluice inspect, not gguf-py: GGUFReader takes 17 s over a 262k-token vocabulary.
    lines = run("inspect", out).stdout.decode().splitlines()
    fields = {line.split()[0]: line.split()[-1] for line in lines if "tokenizer.ggml.m" in line
              or "tokenizer.ggml.pre" in line}
    assert fields["tokenizer.ggml.model"] == ('"llama"' if name in ("llama2", "gemma3") else '"gpt2"')
    if name in ("llama3", "qwen3"):
        assert fields["tokenizer.ggml.pre"] == {"llama3": '"llama-bpe"', "qwen3": '"qwen2"'}[name]
    ids = {}
    for special in (False, True):
        ids[special] = sluice_tokenize(out, special)
        for text, want, got in zip(TEXTS, sluice_tokenize(snap, special), ids[special]):
            if name == "llama2" and special and "<s>" in text:
                continue
            assert got == want, (special, text)
    try:
        import llamacpp_oracle
        lib = llamacpp_oracle.Llama()
    except (ImportError, RuntimeError):
        return  # xllamacpp is not installed
    with lib.load(out, vocab_only=True) as model:
        for special in (False, True):
            for text, got in zip(TEXTS, ids[special]):
                assert model.tokenize(text, True, special) == got, (special, text)


@pytest.mark.parametrize("name,dtype", [("llama-bf16", "BF16"), ("qwen2-f16", "F16")])
def test_half_snapshots_keep_their_type(tmp_path, name, dtype):
    """Without --type the GGUF keeps a BF16 or F16 snapshot's type (llama.cpp's --outtype
    auto) and computes what the snapshot computes: the same bytes in the same kernels."""
    snap = tmp_path / name
    tiny_hf_models.write_snapshot(name, snap)
    out = convert(snap, tmp_path / f"{name}.gguf")
    _, tensors = read(out)
    assert tensors["blk.0.ffn_up.weight"].tensor_type.name == dtype
    assert tensors["blk.0.attn_norm.weight"].tensor_type.name == "F32"
    worst = float(np.abs(sluice_logits(out) - sluice_logits(snap)).max())
    print(f"{name}: max abs snapshot vs GGUF {worst:.3g}")
    assert worst <= F32_TOLERANCE


def test_sharded_snapshot(snapshots, converted, tmp_path):
    """model.safetensors.index.json with two shards converts to the single file's bytes."""
    snap = tmp_path / "sharded"
    tiny_hf_models.write_snapshot("qwen3", snap)
    (snap / "model.safetensors").unlink()
    tensors = tiny_hf_models.weights("qwen3")
    names = list(tensors)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, part in shards.items():
        tiny_hf_models.write_safetensors(snap / shard, {n: tensors[n] for n in part}, "F32")
        weight_map.update({n: shard for n in part})
    (snap / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))
    out = convert(snap, tmp_path / "sharded.gguf", "--type", "F32")
    _, got = read(out)
    _, want = read(converted["qwen3"])
    assert set(got) == set(want)
    for name, tensor in want.items():
        np.testing.assert_array_equal(np.array(got[name].data), np.array(tensor.data), name)


def test_gemma3_multimodal_checkpoint_converts_its_text_model(converted, tmp_path):
    """Gemma 3 4B and up ship as Gemma3ForConditionalGeneration: config.json's text_config,
    tensors under model.language_model., a vision tower. The GGUF is the text model alone."""
    snap = tmp_path / "gemma3-mm"
    tiny_hf_models.write_snapshot("gemma3", snap)
    text = json.loads((snap / "config.json").read_text())
    (snap / "config.json").write_text(json.dumps({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": text, "vision_config": {"hidden_size": 8}, "tie_word_embeddings": True}))
    tensors = {name.replace("model.", "model.language_model.", 1): x
               for name, x in tiny_hf_models.weights("gemma3").items()}
    tensors["model.vision_tower.vision_model.post_layernorm.weight"] = np.ones(8, np.float32)
    tensors["model.multi_modal_projector.mm_input_projection_weight"] = np.ones((8, 64), np.float32)
    tiny_hf_models.write_safetensors(snap / "model.safetensors", tensors, "F32")
    _, got = read(convert(snap, tmp_path / "gemma3-mm.gguf", "--type", "F32"))
    _, want = read(converted["gemma3"])
    assert set(got) == set(want)
    for name, tensor in want.items():
        np.testing.assert_array_equal(np.array(got[name].data), np.array(tensor.data), name)
