"""Tiny random-weight Hugging Face snapshots of the dense families (llama, qwen2, qwen3, gemma3):
config.json, model.safetensors and a byte-level BPE tokenizer.json, made with numpy alone so that a
test can rebuild them byte for byte without torch. tools/make_transformers_tiny.py runs
transformers on them for the goldens; tools/tiny_hf_gguf.py converts them to GGUF.
Usage: python tools/tiny_hf_models.py OUT_DIR [NAME ...]   (writes OUT_DIR/<name>/)
"""
import copy
import hashlib
import json
import pathlib
import struct
import sys

import numpy as np

PROMPT = [1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27]  # the ids of ../shared/testdata/llamacpp-tiny
GREEDY_STEPS = 8

# Shared by every family: small enough to run anywhere in milliseconds, big enough for GQA
# (4 query heads over 2 KV heads), head_dim 16 and a 320-token vocabulary.
_COMMON = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 320,
    "max_position_embeddings": 256,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

# The configs as the Hub writes them (rope_theta / rope_scaling, not transformers 5's
# rope_parameters): what a user downloads. Each family sets something its architecture must honour.
_CONFIGS = {
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
    },
    "qwen2": {  # Q/K/V biases, tied head
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "num_hidden_layers": 2,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "use_sliding_window": False,
        "tie_word_embeddings": True,
    },
    "qwen3": {  # per-head Q/K norms
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": 3,
        "rms_norm_eps": 1e-6,
        "rope_theta": 500000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
    },
    "gemma3": {  # five sliding layers (window 4 < the 12-token prompt) per global one, linear
        # RoPE scaling on the global layer, scaled embeddings, (1 + w) norms, tied head
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0},
        "query_pre_attn_scalar": 16,
        "sliding_window": 4,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "hidden_activation": "gelu_pytorch_tanh",
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "attention_bias": False,
        "tie_word_embeddings": True,
    },
}

# name → (family, weight dtype, seed). The F32 ones are the 1e-4 parity set; the others check that
# F16 / BF16 snapshots load and compute close to transformers run in F32 on the same rounded weights.
# Seeds are chosen so that no greedy step is a near tie (each golden records its top-2 margins).
MODELS = {
    "llama": ("llama", "F32", 4111),
    "qwen2": ("qwen2", "F32", 4102),
    "qwen3": ("qwen3", "F32", 4103),
    "gemma3": ("gemma3", "F32", 4104),
    "llama-bf16": ("llama", "BF16", 4225),
    "qwen2-f16": ("qwen2", "F16", 4106),
    "gemma3-bf16": ("gemma3", "BF16", 4107),
}


def config(name):
    family, dtype, _ = MODELS[name]
    result = dict(_COMMON)
    result.update(copy.deepcopy(_CONFIGS[family]))
    result["torch_dtype"] = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype]
    return result


def _tensor_specs(cfg):
    """(HF name, row-major shape, kind) in a fixed order: the order the generator draws them."""
    gemma = cfg["model_type"] == "gemma3_text"
    d, ff, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    dq = cfg["num_attention_heads"] * cfg["head_dim"]
    dkv = cfg["num_key_value_heads"] * cfg["head_dim"]
    specs = [("model.embed_tokens.weight", (v, d), "embed")]
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        specs.append((p + "input_layernorm.weight", (d,), "norm"))
        specs.append((p + "self_attn.q_proj.weight", (dq, d), "matrix"))
        specs.append((p + "self_attn.k_proj.weight", (dkv, d), "matrix"))
        specs.append((p + "self_attn.v_proj.weight", (dkv, d), "matrix"))
        if cfg["model_type"] == "qwen2":
            specs.append((p + "self_attn.q_proj.bias", (dq,), "bias"))
            specs.append((p + "self_attn.k_proj.bias", (dkv,), "bias"))
            specs.append((p + "self_attn.v_proj.bias", (dkv,), "bias"))
        if cfg["model_type"] in ("qwen3", "gemma3_text"):
            specs.append((p + "self_attn.q_norm.weight", (cfg["head_dim"],), "norm"))
            specs.append((p + "self_attn.k_norm.weight", (cfg["head_dim"],), "norm"))
        specs.append((p + "self_attn.o_proj.weight", (d, dq), "matrix"))
        specs.append((p + "post_attention_layernorm.weight", (d,), "norm"))
        if gemma:
            specs.append((p + "pre_feedforward_layernorm.weight", (d,), "norm"))
            specs.append((p + "post_feedforward_layernorm.weight", (d,), "norm"))
        specs.append((p + "mlp.gate_proj.weight", (ff, d), "matrix"))
        specs.append((p + "mlp.up_proj.weight", (ff, d), "matrix"))
        specs.append((p + "mlp.down_proj.weight", (d, ff), "matrix"))
    specs.append(("model.norm.weight", (d,), "norm"))
    if not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (v, d), "matrix"))
    return specs


def weights(name):
    """{HF name: float32 array}, rounded to the snapshot's dtype and back. Not HF's init (std 0.02):
    weights of std 1/sqrt(fan_in) give unit-scale activations and attention scores, so a wrong
    RoPE pairing, window or norm moves the logits by far more than the 1e-4 tolerance."""
    cfg = config(name)
    _, dtype, seed = MODELS[name]
    rng = np.random.default_rng(seed)
    gemma = cfg["model_type"] == "gemma3_text"
    result = {}
    for hf_name, shape, kind in _tensor_specs(cfg):
        x = rng.standard_normal(shape, dtype=np.float32)
        if kind in ("matrix", "embed"):  # tied heads too: logits of unit scale, not e·e
            x *= np.float32(1.0 / np.sqrt(shape[1]))
        elif kind == "norm":  # gemma stores w of (1 + w); the others w itself, near 1
            x = x * np.float32(0.1) + np.float32(0.0 if gemma else 1.0)
        elif kind == "bias":
            x *= np.float32(0.1)
        result[hf_name] = _round_to(x.astype(np.float32), dtype)
    return result


def _round_to(x, dtype):
    if dtype == "F32":
        return x
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)  # BF16: round to nearest even, as torch does
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _encode(x, dtype):
    if dtype == "F32":
        return x.astype("<f4").tobytes()
    if dtype == "F16":
        return x.astype("<f2").tobytes()
    return (x.view(np.uint32) >> 16).astype("<u2").tobytes()  # already BF16-exact


def write_safetensors(path, tensors, dtype):
    """The safetensors layout by hand (8-byte header length, JSON header, packed data)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for hf_name, x in tensors.items():
        blob = _encode(x, dtype)
        header[hf_name] = {"dtype": dtype, "shape": list(x.shape),
                           "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def _byte_level_alphabet():
    """GPT-2's byte → printable character map, the alphabet of byte-level BPE."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tokenizer_json(n_vocab):
    """A valid byte-level BPE of exactly n_vocab tokens: 3 specials, 256 bytes, then merges of
    "Ġ" + letter and common English pairs. Sluice needs a tokenizer to load a snapshot; the tests
    feed token ids, so what the merges are matters only in that they are valid."""
    specials = ["<pad>", "<s>", "</s>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for ch in _byte_level_alphabet():
        vocab[ch] = len(vocab)
    pairs = [("Ġ", c) for c in "abcdefghijklmnopqrstuvwxyz"]
    pairs += [tuple(p) for p in ("th he in er an re on at en nd ti es or te of ed is it al ar "
                                 "st to nt ng se ha as ou io le ve co me de hi ri ro ic ne ea "
                                 "ra ce li ch ll be ma si om ur").split()]
    merges = []
    for left, right in pairs:
        if len(vocab) == n_vocab:
            break
        vocab[left + right] = len(vocab)
        merges.append(f"{left} {right}")
    assert len(vocab) == n_vocab, len(vocab)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": tok, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, tok in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def write_snapshot(name, out_dir, config_override=None):
    """config.json (the Hub-style config, or `config_override` such as the one transformers
    saved back), model.safetensors and tokenizer.json in out_dir; returns the safetensors' sha256."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = config(name)
    (out / "config.json").write_text(json.dumps(config_override or cfg, indent=2) + "\n")
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(cfg["vocab_size"])))
    path = out / "model.safetensors"
    write_safetensors(path, weights(name), MODELS[name][1])
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(argv[1])
    for name in argv[2:] or MODELS:
        print(name, write_snapshot(name, out / name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
