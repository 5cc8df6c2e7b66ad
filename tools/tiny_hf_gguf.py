"""The F32 tiny snapshots of tools/tiny_hf_models.py as the GGUF that llama.cpp's
convert_hf_to_gguf.py would write: its tensor names and hyper-parameter keys, llama's Q/K rows
permuted so that adjacent-pair RoPE equals HF's rotate_half, gemma's norms stored as 1 + w, and a
gpt2 tokenizer. Written with gguf-py's GGUFWriter, the reference writer.
Usage: python tools/tiny_hf_gguf.py OUT_DIR [NAME ...]   (writes OUT_DIR/<name>.gguf)
"""
import pathlib
import sys

import gguf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tiny_hf_models import MODELS, config, tokenizer_json, weights  # noqa: E402


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
}


def write_gguf(name, path):
    """The F32 snapshot `name` (tiny_hf_models.MODELS) written as a GGUF at `path`."""
    cfg = config(name)
    family = MODELS[name][0]
    assert MODELS[name][1] == "F32", "GGUF copies are made of the F32 snapshots"
    gemma = family == "gemma3"
    arch = "gemma3" if gemma else family
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{name}")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
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
    if family == "llama":
        w.add_rope_dimension_count(cfg["head_dim"])
    tok = tokenizer_json(cfg["vocab_size"])
    tokens = sorted(tok["model"]["vocab"], key=tok["model"]["vocab"].get)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.NORMAL] * (len(tokens) - 3))
    w.add_token_merges(tok["model"]["merges"])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])

    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    for hf_name, x in weights(name).items():
        if hf_name == "model.embed_tokens.weight":
            out = "token_embd.weight"
        elif hf_name == "model.norm.weight":
            out = "output_norm.weight"
        elif hf_name == "lm_head.weight":
            out = "output.weight"
        else:
            layer, rest = hf_name[len("model.layers."):].split(".", 1)
            if rest == "post_attention_layernorm.weight":
                rest_out = "post_attention_norm.weight" if gemma else "ffn_norm.weight"
            else:
                rest_out = _GGUF_NAMES[rest]
            out = f"blk.{layer}.{rest_out}"
        if family == "llama" and hf_name.endswith("self_attn.q_proj.weight"):
            x = _permute_rows(x, n_head)
        if family == "llama" and hf_name.endswith("self_attn.k_proj.weight"):
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
    for name in argv[2:] or [n for n in MODELS if MODELS[n][1] == "F32"]:
        write_gguf(name, out / f"{name}.gguf")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
