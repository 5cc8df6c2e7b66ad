// The plan of every family: model/hf_snapshot.cpp already names every tensor and key as
// llama.cpp's convert_hf_to_gguf.py does and refuses what the architectures cannot honour; this
// turns its sluice.hf.* markers into the numbers llama.cpp expects (llama's Q/K rows permuted for
// adjacent-pair RoPE, gemma's norms stored as 1 + w, Llama 3.1's rope_freqs), stacks the pieces
// it gives per expert or per head into llama.cpp's 3-D tensors, and decides which stay F32.
// gpt-oss, which that view cannot express, is planned by hf_convert_gpt_oss.cpp instead.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "model/hf_snapshot.h"
#include "runtime/hf_convert_gpt_oss.h"
#include "runtime/hf_convert_plan.h"

namespace sluice::convert {
namespace {

std::vector<uint64_t> shape_of(const TensorInfo& tensor) {
  return {tensor.ne.begin(), tensor.ne.begin() + tensor.n_dims};
}

// llama.cpp's prepare_tensors: 1-D tensors, norms and the MoE router stay F32; the routed
// experts take --expert-type.
TensorRole role_of(std::string_view name, uint32_t n_dims) {
  if (n_dims <= 1 || name.ends_with("_norm.weight") || name.ends_with("ffn_gate_inp.weight")) {
    return TensorRole::kKeepF32;
  }
  return name.ends_with("_exps.weight") ? TensorRole::kExperts : TensorRole::kMatrix;
}

// The view gives some of llama.cpp's 3-D tensors one piece per expert or per head
// ("blk.N.<part>.<i>.weight"); these are stacked back. deepseek's attn_k_b pieces are the K rows
// of kv_b_proj, which llama.cpp stores transposed.
struct StackRule {
  std::string_view piece, stacked;
  bool transpose;
};
constexpr StackRule kStackRules[] = {
    {"ffn_gate", "ffn_gate_exps", false}, {"ffn_up", "ffn_up_exps", false},
    {"ffn_down", "ffn_down_exps", false}, {"attn_k_b_t", "attn_k_b", true},
    {"attn_v_b", "attn_v_b", false},
};

struct Piece {
  std::string stacked_name;  // "blk.N.ffn_gate_exps.weight"
  uint64_t index = 0;        // expert or head
  bool transpose = false;
};

std::optional<Piece> piece_of(std::string_view name) {
  if (!name.starts_with("blk.") || !name.ends_with(".weight")) return std::nullopt;
  std::string_view rest = name.substr(4, name.size() - 4 - 7);  // "N.<part>.<i>"
  const size_t first = rest.find('.'), last = rest.rfind('.');
  if (first == std::string_view::npos || last <= first) return std::nullopt;
  const std::string_view part = rest.substr(first + 1, last - first - 1);
  const std::string_view index = rest.substr(last + 1);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  for (const StackRule& rule : kStackRules) {
    if (part != rule.piece) continue;
    return Piece{
        "blk." + std::string(rest.substr(0, first)) + "." + std::string(rule.stacked) + ".weight",
        std::stoull(std::string(index)), rule.transpose};
  }
  return std::nullopt;
}

// Stacks the pieces gathered for one tensor: indices 0..n-1, one shape.
PlannedTensor stack(const std::string& name, std::vector<std::pair<Piece, TensorInfo>>& pieces) {
  std::sort(pieces.begin(), pieces.end(),
            [](const auto& a, const auto& b) { return a.first.index < b.first.index; });
  const TensorInfo& first = pieces.front().second;
  const bool transpose = pieces.front().first.transpose;
  PlannedTensor planned;
  planned.name = name;
  const uint64_t cols = first.ne[0], rows = first.n_rows();
  planned.ne = transpose ? std::vector<uint64_t>{rows, cols, pieces.size()}
                         : std::vector<uint64_t>{cols, rows, pieces.size()};
  planned.role = role_of(name, 3);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const TensorInfo& piece = pieces[i].second;
    if (pieces[i].first.index != i || piece.n_dims != 2 || piece.ne[0] != cols ||
        piece.ne[1] != rows) {
      fail("convert: ", name, ": its pieces are not numbered 0..", pieces.size() - 1,
           " with one shape (at '", piece.name, "')");
    }
    RowRange range{piece, 0, transpose ? cols : rows};
    range.transpose = transpose;
    planned.rows.push_back(std::move(range));
  }
  return planned;
}

}  // namespace

Plan plan_model(const ModelFile& snapshot, const std::string& hf_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_regular_file(fs::path(hf_dir) / "config.json", error)) {
    fail("convert: ", hf_dir, ": no config.json, so the architecture is unknown");
  }
  if (std::optional<Plan> gpt_oss = plan_gpt_oss(snapshot, hf_dir)) return std::move(*gpt_oss);
  const ModelFile view = model::gguf_view_of_hf_snapshot(snapshot);
  Plan plan;
  plan.arch = view.get_string("general.architecture");
  const bool rotate_half = view.contains(model::kHfRopeRotateHalf);
  const bool plus_one = view.contains(model::kHfNormPlusOne);
  for (const MetaEntry& entry : view.metadata()) {
    if (!entry.key.starts_with("sluice.")) plan.metadata.push_back(entry);
  }
  const std::string prefix = plan.arch + ".";
  if (rotate_half) {  // llama.cpp's LlamaModel writes the rotated width explicitly
    plan.metadata.push_back({prefix + "rope.dimension_count",
                             MetaValue::scalar(view.get_u32(prefix + "attention.key_length"))});
  }
  const uint32_t n_head = view.get_u32(prefix + "attention.head_count");
  const uint32_t n_head_kv = view.get_u32(prefix + "attention.head_count_kv");
  // Stacked tensors take the place of their first piece.
  std::map<std::string, std::vector<std::pair<Piece, TensorInfo>>> stacks;
  std::vector<std::string> order;  // plan entries: a tensor's name, or a stack's
  std::map<std::string, PlannedTensor> singles;
  for (const TensorInfo& tensor : view.tensors()) {
    if (std::optional<Piece> piece = piece_of(tensor.name)) {
      auto& pieces = stacks[piece->stacked_name];
      if (pieces.empty()) order.push_back(piece->stacked_name);
      pieces.emplace_back(std::move(*piece), tensor);
      continue;
    }
    PlannedTensor planned;
    planned.name = tensor.name;
    planned.ne = shape_of(tensor);
    planned.rows = {RowRange{tensor, 0, tensor.n_dims <= 1 ? 1 : tensor.n_rows()}};
    planned.role = role_of(tensor.name, tensor.n_dims);
    const std::string_view name = tensor.name;
    if (rotate_half && (name.ends_with(".attn_q.weight") || name.ends_with(".attn_q.bias"))) {
      planned.permute_heads = n_head;
    } else if (rotate_half &&
               (name.ends_with(".attn_k.weight") || name.ends_with(".attn_k.bias"))) {
      planned.permute_heads = n_head_kv;
    }
    planned.add_one = plus_one && name.ends_with("norm.weight");
    if (name == "token_embd.weight") plan.n_vocab = int64_t(tensor.ne[1]);
    order.push_back(tensor.name);
    singles.emplace(tensor.name, std::move(planned));
  }
  for (const std::string& name : order) {
    auto single = singles.find(name);
    plan.tensors.push_back(single != singles.end() ? std::move(single->second)
                                                   : stack(name, stacks.at(name)));
  }
  if (plan.n_vocab == 0) fail("convert: ", hf_dir, ": no embed_tokens.weight tensor");
  if (const MetaValue* factors = view.find(model::kHfRopeFreqFactors)) {
    PlannedTensor rope_freqs;  // as llama.cpp's LlamaModel writes Llama 3.1's scaling
    rope_freqs.name = "rope_freqs.weight";
    rope_freqs.values = factors->array_as<float>().value_or(std::vector<float>{});
    rope_freqs.ne = {rope_freqs.values.size()};
    rope_freqs.role = TensorRole::kKeepF32;
    plan.tensors.push_back(std::move(rope_freqs));
  }
  return plan;
}

}  // namespace sluice::convert
