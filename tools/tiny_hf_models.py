"""Tiny random-weight Hugging Face snapshots of the dense families (llama, qwen2, qwen3, gemma3) and
the MoE ones (qwen3_moe, mixtral, olmoe, glm4_moe, deepseek_v3, gpt_oss): config.json,
model.safetensors and a byte-level BPE tokenizer.json, made with numpy alone so that a test can
rebuild them byte for byte without torch. tools/make_transformers_tiny.py runs
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
    "llama31": {  # Llama 3.1's "llama3" RoPE scaling, its ramp inside head_dim 16's wavelengths
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
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
    # The MoE families: 8 experts of 32, top 2, so the 12-token prompt routes to most of them.
    "qwen3moe": {  # every layer MoE; norm_topk_prob defaults to False in transformers, set here
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "num_hidden_layers": 2,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "output_router_logits": False,
    },
    "mixtral": {  # llama's decoder, the experts as block_sparse_moe.experts.N.w1/w2/w3
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "num_hidden_layers": 2,
        "intermediate_size": 32,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "sliding_window": None,
        "tie_word_embeddings": False,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "router_jitter_noise": 0.0,
        "output_router_logits": False,
    },
    "olmoe": {  # Q/K RMS-normed across all heads; the chosen weights not renormalised
        "architectures": ["OlmoeForCausalLM"],
        "model_type": "olmoe",
        "num_hidden_layers": 2,
        "intermediate_size": 32,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "attention_bias": False,
        "clip_qkv": None,
        "tie_word_embeddings": False,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "norm_topk_prob": False,
        "output_router_logits": False,
    },
    "glm4moe": {  # DeepSeekMoE routing: sigmoid scores plus a non-zero selection bias, 2 of 4
        # groups, the chosen weights renormalised and scaled; 2 shared experts; a leading dense
        # layer; Q/K/V biases, per-head Q/K norms and RoPE on half of each head
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "num_hidden_layers": 3,
        "intermediate_size": 32,  # = moe_intermediate_size: the experts' size was read from
        # either key in transformers 5 releases
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000.0,
        "partial_rotary_factor": 0.5,
        "hidden_act": "silu",
        "attention_bias": True,
        "use_qk_norm": True,
        "tie_word_embeddings": False,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 2,
        "n_group": 4,
        "topk_group": 2,
        "routed_scaling_factor": 2.5,
        "norm_topk_prob": True,
        "first_k_dense_replace": 1,
        "num_nextn_predict_layers": 0,
    },
    "deepseek3": {  # multi-head latent attention (q LoRA, a 16-wide KV latent, 8 of each head's 24
        # query/key dimensions rotated, interleaved) and glm4moe's routing (same caveat on sizes)
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "num_hidden_layers": 3,
        "num_key_value_heads": 4,
        "head_dim": 8,  # transformers sets it to qk_rope_head_dim
        "intermediate_size": 32,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_interleave": True,
        "hidden_act": "silu",
        "attention_bias": False,
        "tie_word_embeddings": False,
        "q_lora_rank": 32,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "n_shared_experts": 1,
        "n_group": 4,
        "topk_group": 2,
        "routed_scaling_factor": 2.5,
        "norm_topk_prob": True,
        "first_k_dense_replace": 1,
    },
    "gptoss": {  # sinks, Q/K/V/O biases, a sliding layer (window 4) then a full one, a biased
        # router whose top-k logits are softmaxed, biased experts stored as transformers holds
        # them (gate_up_proj [n_expert, n_embd, 2 n_ff], gate and up columns interleaved), the
        # clamped swiglu_oai; the Hub's YaRN but with truncate (llama.cpp's corr_dims floor/ceil;
        # the Hub's truncate false is not what llama.cpp or sluice compute)
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "num_hidden_layers": 2,
        "intermediate_size": 32,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_theta": 150000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": True, "original_max_position_embeddings": 4096},
        "sliding_window": 4,
        "layer_types": ["sliding_attention", "full_attention"],
        "attention_bias": True,
        "hidden_act": "silu",
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "output_router_logits": False,
    },
}

# name → (family, weight dtype, seed). The F32 ones are the 1e-4 parity set; the others check that
# F16 / BF16 snapshots load and compute close to transformers run in F32 on the same rounded weights.
# Seeds are chosen so that no greedy step is a near tie (each golden records its top-2 margins).
MODELS = {
    "llama": ("llama", "F32", 4111),
    "llama31": ("llama31", "F32", 4112),
    "qwen2": ("qwen2", "F32", 4102),
    "qwen3": ("qwen3", "F32", 4103),
    "gemma3": ("gemma3", "F32", 4104),
    "llama-bf16": ("llama", "BF16", 4225),
    "qwen2-f16": ("qwen2", "F16", 4106),
    "gemma3-bf16": ("gemma3", "BF16", 4107),
    "qwen3moe": ("qwen3moe", "F32", 4301),
    "mixtral": ("mixtral", "F32", 4302),
    "olmoe": ("olmoe", "F32", 4303),
    "qwen3moe-fused": ("qwen3moe", "F32", 4301),
    "glm4moe": ("glm4moe", "F32", 4304),
    "deepseek3": ("deepseek3", "F32", 4305),
    "qwen3moe-bf16": ("qwen3moe", "BF16", 4404),  # of 4401..4406: the widest router margin
    "gptoss": ("gptoss", "F32", 4505),  # of 4501..4507: wide greedy and router margins
}

# How the routed experts are stored. "per_expert": as on the Hub and as transformers 5 saves by
# default (mlp.experts.N.{gate,up,down}_proj.weight, mixtral's block_sparse_moe.experts.N.w1/w3/w2),
# which transformers fuses at load. "fused": transformers 5's own parameters, written as they are
# (save_original_format=False): mlp.experts.gate_up_proj [n_expert, 2 n_ff, n_embd], gate rows
# first, and mlp.experts.down_proj [n_expert, n_embd, n_ff]. qwen3moe-fused holds qwen3moe's
# weights (same seed) fused, so its golden must equal qwen3moe's.
FUSED_EXPERTS = {"qwen3moe-fused"}


def is_moe(cfg):
    return any(k in cfg for k in ("num_experts", "num_local_experts", "n_routed_experts"))


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
        if cfg["model_type"] == "gpt_oss":
            specs += _gpt_oss_layer_specs(cfg, p)
            continue
        if cfg["model_type"] == "deepseek_v3":
            specs += _mla_specs(cfg, p)
            specs.append((p + "post_attention_layernorm.weight", (d,), "norm"))
            if il >= cfg["first_k_dense_replace"]:
                specs += _expert_specs(cfg, p)
            else:
                specs.append((p + "mlp.gate_proj.weight", (ff, d), "matrix"))
                specs.append((p + "mlp.up_proj.weight", (ff, d), "matrix"))
                specs.append((p + "mlp.down_proj.weight", (d, ff), "matrix"))
            continue
        specs.append((p + "self_attn.q_proj.weight", (dq, d), "matrix"))
        specs.append((p + "self_attn.k_proj.weight", (dkv, d), "matrix"))
        specs.append((p + "self_attn.v_proj.weight", (dkv, d), "matrix"))
        if cfg["model_type"] in ("qwen2", "glm4_moe"):
            specs.append((p + "self_attn.q_proj.bias", (dq,), "bias"))
            specs.append((p + "self_attn.k_proj.bias", (dkv,), "bias"))
            specs.append((p + "self_attn.v_proj.bias", (dkv,), "bias"))
        if cfg["model_type"] in ("qwen3", "gemma3_text", "qwen3_moe", "glm4_moe"):
            specs.append((p + "self_attn.q_norm.weight", (cfg["head_dim"],), "norm"))
            specs.append((p + "self_attn.k_norm.weight", (cfg["head_dim"],), "norm"))
        if cfg["model_type"] == "olmoe":  # one norm across all heads' Q, one across K's
            specs.append((p + "self_attn.q_norm.weight", (dq,), "norm"))
            specs.append((p + "self_attn.k_norm.weight", (dkv,), "norm"))
        specs.append((p + "self_attn.o_proj.weight", (d, dq), "matrix"))
        specs.append((p + "post_attention_layernorm.weight", (d,), "norm"))
        if gemma:
            specs.append((p + "pre_feedforward_layernorm.weight", (d,), "norm"))
            specs.append((p + "post_feedforward_layernorm.weight", (d,), "norm"))
        if is_moe(cfg) and il >= cfg.get("first_k_dense_replace", 0):
            specs += _expert_specs(cfg, p)
        else:
            specs.append((p + "mlp.gate_proj.weight", (ff, d), "matrix"))
            specs.append((p + "mlp.up_proj.weight", (ff, d), "matrix"))
            specs.append((p + "mlp.down_proj.weight", (d, ff), "matrix"))
    specs.append(("model.norm.weight", (d,), "norm"))
    if not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (v, d), "matrix"))
    return specs


def _gpt_oss_layer_specs(cfg, p):
    """gpt-oss's layer after input_layernorm, with transformers' own expert parameters."""
    d, ff, n_head = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
    dq, dkv = n_head * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    n_expert = cfg["num_local_experts"]
    a, m = p + "self_attn.", p + "mlp."
    return [(a + "q_proj.weight", (dq, d), "matrix"), (a + "q_proj.bias", (dq,), "bias"),
            (a + "k_proj.weight", (dkv, d), "matrix"), (a + "k_proj.bias", (dkv,), "bias"),
            (a + "v_proj.weight", (dkv, d), "matrix"), (a + "v_proj.bias", (dkv,), "bias"),
            (a + "o_proj.weight", (d, dq), "matrix"), (a + "o_proj.bias", (d,), "bias"),
            (a + "sinks", (n_head,), "bias"),
            (p + "post_attention_layernorm.weight", (d,), "norm"),
            (m + "router.weight", (n_expert, d), "matrix"),
            (m + "router.bias", (n_expert,), "bias"),
            (m + "experts.gate_up_proj", (n_expert, d, 2 * ff), "matrix"),  # fan-in d
            (m + "experts.gate_up_proj_bias", (n_expert, 2 * ff), "bias"),
            (m + "experts.down_proj", (n_expert, ff, d), "matrix"),  # fan-in ff
            (m + "experts.down_proj_bias", (n_expert, d), "bias")]


def _mla_specs(cfg, p):
    """DeepSeek's multi-head latent attention: Q through a LoRA, K/V from a shared latent."""
    d, n_head = cfg["hidden_size"], cfg["num_attention_heads"]
    q_rank, kv_rank = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    a = p + "self_attn."
    return [(a + "q_a_proj.weight", (q_rank, d), "matrix"),
            (a + "q_a_layernorm.weight", (q_rank,), "norm"),
            (a + "q_b_proj.weight", (n_head * (nope + rope), q_rank), "matrix"),
            (a + "kv_a_proj_with_mqa.weight", (kv_rank + rope, d), "matrix"),
            (a + "kv_a_layernorm.weight", (kv_rank,), "norm"),
            (a + "kv_b_proj.weight", (n_head * (nope + v), kv_rank), "matrix"),
            (a + "o_proj.weight", (d, n_head * v), "matrix")]


def _expert_specs(cfg, p):
    """The router and the experts of one layer, per expert and in expert order (so each part's
    matrices lie evenly spaced in the file, as they do in a Hub snapshot of fewer than 11)."""
    d = cfg["hidden_size"]
    n_expert = cfg.get("num_experts", cfg.get("num_local_experts", cfg.get("n_routed_experts")))
    ff = cfg.get("moe_intermediate_size", cfg["intermediate_size"])
    mixtral = cfg["model_type"] == "mixtral"
    moe = p + ("block_sparse_moe." if mixtral else "mlp.")
    specs = [(moe + "gate.weight", (n_expert, d), "matrix")]
    if "n_routed_experts" in cfg:  # sigmoid routing's selection bias, of the scores' scale
        specs.append((moe + "gate.e_score_correction_bias", (n_expert,), "bias"))
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    for e in range(n_expert):
        specs.append((f"{moe}experts.{e}.{names[0]}.weight", (ff, d), "matrix"))
        specs.append((f"{moe}experts.{e}.{names[1]}.weight", (ff, d), "matrix"))
        specs.append((f"{moe}experts.{e}.{names[2]}.weight", (d, ff), "matrix"))
    if cfg.get("n_shared_experts"):
        shared = ff * cfg["n_shared_experts"]
        specs.append((moe + "shared_experts.gate_proj.weight", (shared, d), "matrix"))
        specs.append((moe + "shared_experts.up_proj.weight", (shared, d), "matrix"))
        specs.append((moe + "shared_experts.down_proj.weight", (d, shared), "matrix"))
    return specs


def _fuse_experts(tensors, cfg):
    """Per-expert tensors → transformers 5's fused gate_up_proj / down_proj, in their place."""
    n_expert = cfg["num_experts"]
    result = {}
    for hf_name, x in tensors.items():
        if ".mlp.experts." not in hf_name:
            result[hf_name] = x
            continue
        p = hf_name[:hf_name.index(".mlp.experts.") + len(".mlp.experts.")]
        if p + "gate_up_proj" in result:
            continue
        result[p + "gate_up_proj"] = np.stack([np.concatenate(
            [tensors[f"{p}{e}.gate_proj.weight"], tensors[f"{p}{e}.up_proj.weight"]])
            for e in range(n_expert)])
        result[p + "down_proj"] = np.stack([tensors[f"{p}{e}.down_proj.weight"]
                                            for e in range(n_expert)])
    return result


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
    return _fuse_experts(result, cfg) if name in FUSED_EXPERTS else result


def _round_to(x, dtype):
    if dtype == "F32":
        return x
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)  # BF16: round to nearest even, as torch does
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _encode(x, dtype):
    if dtype in ("U8", "F8_E4M3"):  # already in their stored form (MXFP4 blocks, FP8 codes)
        return np.ascontiguousarray(x).view(np.uint8).tobytes()
    if dtype == "F32":
        return x.astype("<f4").tobytes()
    if dtype == "F16":
        return x.astype("<f2").tobytes()
    return (x.view(np.uint32) >> 16).astype("<u2").tobytes()  # already BF16-exact


def write_safetensors(path, tensors, dtype):
    """The safetensors layout by hand (8-byte header length, JSON header, packed data). `dtype`:
    one safetensors dtype for every tensor, or a dict of them by name (mixed files: FP8 or MXFP4
    weights beside F32 ones)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for hf_name, x in tensors.items():
        kind = dtype[hf_name] if isinstance(dtype, dict) else dtype
        blob = _encode(x, kind)
        header[hf_name] = {"dtype": kind, "shape": list(x.shape),
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
