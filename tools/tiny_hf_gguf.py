"""The F32 tiny snapshots of tools/tiny_hf_models.py as the GGUF that llama.cpp's
convert_hf_to_gguf.py would write: its tensor names and hyper-parameter keys, llama's Q/K rows
permuted so that adjacent-pair RoPE equals HF's rotate_half (mixtral's too: llama.cpp converts it
as llama), gemma's norms stored as 1 + w, the MoE experts stacked into ffn_*_exps, DeepSeek's
kv_b_proj split into attn_k_b (each head transposed) and attn_v_b, gpt-oss's interleaved gate/up
columns split and its experts transposed, and a gpt2 tokenizer. Written with gguf-py's
GGUFWriter, the reference writer.
Usage: python tools/tiny_hf_gguf.py OUT_DIR [NAME ...]   (writes OUT_DIR/<name>.gguf)
"""
import pathlib
import sys

import gguf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tiny_hf_models import (FUSED_EXPERTS, MODELS, config, is_moe, tokenizer_json,  # noqa: E402
                            weights)


def _permute_rows(w, n_head):
    """llama.cpp's Q/K row permutation: HF's rotate_half halves → interleaved pairs per head."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


_GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
    "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
    "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
}
_ARCH = {"gemma3": "gemma3", "llama31": "llama", "mixtral": "llama", "deepseek3": "deepseek2", "gptoss": "gpt-oss"}
_GPT_OSS_NAMES = {
    "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.sinks": "attn_sinks.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "mlp.router.weight": "ffn_gate_inp.weight",
    "mlp.router.bias": "ffn_gate_inp.bias",
}


def _gpt_oss_experts(rest, x):
    """llama.cpp's GptOssModel: [n_expert, n_embd, 2 n_ff] → gate (even columns) and up (odd),
    each [n_expert, n_ff, n_embd]; down [n_expert, n_ff, n_embd] → [n_expert, n_embd, n_ff]."""
    if rest == "mlp.experts.gate_up_proj":
        x = x.transpose(0, 2, 1)
        return {"ffn_gate_exps.weight": x[:, ::2], "ffn_up_exps.weight": x[:, 1::2]}
    if rest == "mlp.experts.gate_up_proj_bias":
        return {"ffn_gate_exps.bias": x[:, ::2], "ffn_up_exps.bias": x[:, 1::2]}
    if rest == "mlp.experts.down_proj":
        return {"ffn_down_exps.weight": x.transpose(0, 2, 1)}
    return {"ffn_down_exps.bias": x}
_MLA_NAMES = {
    "self_attn.q_a_proj.weight": "attn_q_a.weight",
    "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight",
    "self_attn.q_b_proj.weight": "attn_q_b.weight",
    "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight",
    "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight",
}
_EXPERT_PARTS = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down",
                 "w1": "gate", "w3": "up", "w2": "down"}


def _llama3_rope_factors(cfg):
    """llama.cpp's LlamaModel writes Llama 3.1's "llama3" RoPE scaling as rope_freqs.weight: per
    dimension pair, 1 for short wavelengths, `factor` for long ones, a smooth ramp between."""
    scaling, dim = cfg["rope_scaling"], cfg["head_dim"]
    freqs = 1.0 / (cfg["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old_context = scaling["original_max_position_embeddings"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    factors = []
    for freq in freqs.astype(np.float32):
        wavelen = 2 * np.pi / float(freq)
        if wavelen < old_context / high:
            factors.append(1.0)
        elif wavelen > old_context / low:
            factors.append(scaling["factor"])
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / scaling["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def _stack_experts(tensors):
    """Per-expert HF tensors → llama.cpp's [n_expert, rows, cols] stacks (GGUF [cols, rows,
    n_expert]) named blk.N.ffn_{gate,up,down}_exps.weight, each where its expert 0 was."""
    result, stacks = {}, {}
    for hf_name, x in tensors.items():
        if not hf_name.partition(".experts.")[2].split(".")[0].isdigit():  # not per expert
            result[hf_name] = x
            continue
        layer = hf_name[len("model.layers."):].split(".", 1)[0]
        part = _EXPERT_PARTS[hf_name.split(".")[-2]]
        key = f"blk.{layer}.ffn_{part}_exps.weight"
        if key not in stacks:
            stacks[key] = []
            result[key] = stacks[key]
        stacks[key].append(x)
    return {k: (np.stack(v) if isinstance(v, list) else v) for k, v in result.items()}


def write_gguf(name, path):
    """The F32 snapshot `name` (tiny_hf_models.MODELS) written as a GGUF at `path`."""
    cfg = config(name)
    family = MODELS[name][0]
    assert MODELS[name][1] == "F32", "GGUF copies are made of the F32 snapshots"
    assert name not in FUSED_EXPERTS, "GGUF copies are made of the per-expert snapshots"
    gemma = family == "gemma3"
    arch = _ARCH.get(family, family)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{name}")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    if family == "deepseek3":  # one cached latent "head"; the lengths are the latent's (below)
        w.add_head_count_kv(1)
    else:
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if gemma:
        w.add_sliding_window(cfg["sliding_window"])
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(cfg["rope_scaling"]["factor"])
    if arch == "llama":
        w.add_rope_dimension_count(cfg["head_dim"])
    # llama.cpp's Qwen2Moe / Llama / Olmoe converters (glm4moe and deepseek3 below)
    if is_moe(cfg) and family not in ("glm4moe", "deepseek3"):
        w.add_expert_count(cfg.get("num_experts", cfg.get("num_local_experts")))
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        if "moe_intermediate_size" in cfg:
            w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if family == "deepseek3":  # llama.cpp's DeepseekV2Model converter, MLA form
        w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_kv_lora_rank(cfg["kv_lora_rank"])
        w.add_key_length(cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
        w.add_value_length(cfg["kv_lora_rank"])
        w.add_key_length_mla(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
        w.add_value_length_mla(cfg["v_head_dim"])
        w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
    if family in ("glm4moe", "deepseek3"):  # llama.cpp's Glm4MoeModel / DeepseekV2Model
        w.add_expert_count(cfg["n_routed_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_group_count(cfg["n_group"])
        w.add_expert_group_used_count(cfg["topk_group"])
    if family == "gptoss":  # llama.cpp's GptOssModel converter (expert count and use above)
        w.add_sliding_window(cfg["sliding_window"])
        w.add_expert_feed_forward_length(cfg["intermediate_size"])
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(cfg["rope_scaling"]["factor"])
        w.add_rope_scaling_orig_ctx_len(cfg["rope_scaling"]["original_max_position_embeddings"])
    if family == "glm4moe":
        w.add_rope_dimension_count(int(cfg["head_dim"] * cfg["partial_rotary_factor"]))
        w.add_nextn_predict_layers(cfg["num_nextn_predict_layers"])
    tok = tokenizer_json(cfg["vocab_size"])
    tokens = sorted(tok["model"]["vocab"], key=tok["model"]["vocab"].get)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (len(tokens) - 3))
    w.add_token_merges(tok["model"]["merges"])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])

    if cfg.get("rope_scaling", {}).get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", _llama3_rope_factors(cfg))

    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    for hf_name, x in _stack_experts(weights(name)).items():
        if hf_name.endswith("self_attn.kv_b_proj.weight"):  # [n_head * (nope + v), kv_rank]
            layer = hf_name[len("model.layers."):].split(".", 1)[0]
            nope, v = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
            kv_b = x.reshape(n_head, nope + v, x.shape[-1])
            w.add_tensor(f"blk.{layer}.attn_k_b.weight",
                         np.ascontiguousarray(kv_b[:, :nope].transpose(0, 2, 1)))
            w.add_tensor(f"blk.{layer}.attn_v_b.weight", np.ascontiguousarray(kv_b[:, nope:]))
            continue
        if family == "gptoss" and ".mlp.experts." in hf_name:
            layer, rest = hf_name[len("model.layers."):].split(".", 1)
            for out, part in _gpt_oss_experts(rest, x).items():
                w.add_tensor(f"blk.{layer}.{out}", np.ascontiguousarray(part))
            continue
        if hf_name.startswith("blk."):
            out = hf_name
        elif hf_name == "model.embed_tokens.weight":
            out = "token_embd.weight"
        elif hf_name == "model.norm.weight":
            out = "output_norm.weight"
        elif hf_name == "lm_head.weight":
            out = "output.weight"
        else:
            layer, rest = hf_name[len("model.layers."):].split(".", 1)
            if family == "gptoss" and rest in _GPT_OSS_NAMES:
                rest_out = _GPT_OSS_NAMES[rest]
            elif rest == "post_attention_layernorm.weight":
                post = gemma or family == "glm4moe"  # llama.cpp's name for both
                rest_out = "post_attention_norm.weight" if post else "ffn_norm.weight"
            else:
                rest_out = _GGUF_NAMES.get(rest) or _MLA_NAMES[rest]
            out = f"blk.{layer}.{rest_out}"
        if arch == "llama" and hf_name.endswith("self_attn.q_proj.weight"):
            x = _permute_rows(x, n_head)
        if arch == "llama" and hf_name.endswith("self_attn.k_proj.weight"):
            x = _permute_rows(x, n_kv)
        if gemma and hf_name.endswith("norm.weight"):
            x = x + np.float32(1.0)
        w.add_tensor(out, np.ascontiguousarray(x, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    default = [n for n in MODELS if MODELS[n][1] == "F32" and n not in FUSED_EXPERTS]
    for name in argv[2:] or default:
        write_gguf(name, out / f"{name}.gguf")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
