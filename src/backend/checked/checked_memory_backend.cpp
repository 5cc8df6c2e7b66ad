// The checked backend: every op checks its place in a recorded step, opens all regions
// (PROT_READ | PROT_WRITE), checks its activation arguments, runs the inner backend's op, and
// closes them again (PROT_NONE).
#include "backend/checked/checked_memory_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace sluice::checked {

// The regions open for the life of one op (download: the op is one).
class OpenRegions {
 public:
  explicit OpenRegions(CheckedMemoryBackend& b, bool download = false) : b_(b) {
    b_.check_step_order(download);
    if (b_.open_depth_++ == 0) b_.protect_all(PROT_READ | PROT_WRITE);
  }
  ~OpenRegions() {
    if (--b_.open_depth_ == 0) b_.protect_all(PROT_NONE);
  }
  OpenRegions(const OpenRegions&) = delete;
  OpenRegions& operator=(const OpenRegions&) = delete;

 private:
  CheckedMemoryBackend& b_;
};

namespace {

size_t page_size() {
  static const size_t size = size_t(::sysconf(_SC_PAGESIZE));
  return size;
}

uint64_t floats(int64_t n) {
  return n > 0 ? uint64_t(n) * sizeof(float) : 0;
}

uint64_t kv_bytes(const KvLayerView& kv, int64_t head_dim) {
  const uint64_t element = kv.type == KvElement::kF16 ? 2 : 4;
  return uint64_t(std::max<int64_t>(kv.capacity * kv.n_head_kv * head_dim, 0)) * element;
}

}  // namespace

bool check_backend_memory_requested() {
  const char* value = std::getenv("SLUICE_CHECK_BACKEND_MEMORY");
  return value != nullptr && std::strcmp(value, "") != 0 && std::strcmp(value, "0") != 0;
}

CheckedMemoryBackend::CheckedMemoryBackend(std::unique_ptr<Backend> inner)
    : inner_(std::move(inner)) {
  if (!inner_ || !inner_->host_memory()) {
    fail("checked backend: the inner backend must work in host memory");
  }
}

CheckedMemoryBackend::~CheckedMemoryBackend() {
  for (const auto& [start, length] : regions_) ::munmap(reinterpret_cast<void*>(start), length);
}

// mprotect of every region is what makes a stray host access fault; each op pays it twice.
// (mutable state behind a const method: the protection is not part of the backend's value.)
void CheckedMemoryBackend::protect_all(int protection) const {
  for (const auto& [start, length] : regions_) {
    if (::mprotect(reinterpret_cast<void*>(start), length, protection) != 0) {
      fail("checked backend: mprotect failed: ", std::strerror(errno));
    }
  }
}

void CheckedMemoryBackend::require(const char* op, const char* what, const void* p,
                                   uint64_t bytes) const {
  if (p == nullptr && bytes == 0) return;
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = sizes_.upper_bound(address);
  if (it != sizes_.begin()) {
    --it;
    const uint64_t offset = address - it->first;
    if (offset <= it->second && bytes <= it->second - offset) return;
    fail("checked backend: ", op, ": ", what, " (", bytes, " bytes at offset ", offset,
         ") runs past its backend allocation of ", it->second, " bytes");
  }
  fail("checked backend: ", op, ": ", what, " is not backend memory");
}

void* CheckedMemoryBackend::allocate(size_t bytes) {
  const size_t length = std::max<size_t>((bytes + page_size() - 1) / page_size(), 1) * page_size();
  void* p = ::mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fail("checked backend: out of memory allocating ", bytes, " bytes");
  }
  if (open_depth_ > 0) ::mprotect(p, length, PROT_READ | PROT_WRITE);
  regions_[reinterpret_cast<uintptr_t>(p)] = length;
  sizes_[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

void CheckedMemoryBackend::deallocate(void* p) noexcept {
  const auto it = regions_.find(reinterpret_cast<uintptr_t>(p));
  if (it == regions_.end()) return;
  ::munmap(p, it->second);
  regions_.erase(it);
  sizes_.erase(reinterpret_cast<uintptr_t>(p));
}

void CheckedMemoryBackend::upload(void* dst, const void* host, size_t bytes) {
  OpenRegions open(*this);
  require("upload", "dst", dst, bytes);
  inner_->upload(dst, host, bytes);
}

void CheckedMemoryBackend::download(void* host, const void* src, size_t bytes) {
  OpenRegions open(*this, /*download=*/true);
  require("download", "src", src, bytes);
  if (!in_recorded_step_) return inner_->download(host, src, bytes);
  // As a GPU's recorded step stages it: the bytes as they are now, at `host` once the step ran.
  const size_t offset = pending_bytes_.size();
  pending_bytes_.resize(offset + bytes);
  inner_->download(pending_bytes_.data() + offset, src, bytes);
  pending_.push_back({host, offset, bytes});
}

void CheckedMemoryBackend::fail_sticky(std::string message) {
  broken_ = std::move(message);
  fail(broken_);
}

void CheckedMemoryBackend::check_step_order(bool download) {
  if (!broken_.empty()) fail(broken_);
  if (in_recorded_step_ && !download && !pending_.empty()) {
    fail_sticky(
        "checked backend: download inside a recorded step with ops queued after it: the host "
        "cannot read it before the step has run, so the model's decode_reads_host() must say "
        "true");
  }
}

bool CheckedMemoryBackend::begin_recorded_step() {
  if (!broken_.empty()) fail(broken_);
  in_recorded_step_ = true;
  pending_.clear();
  pending_bytes_.clear();
  return true;
}

void CheckedMemoryBackend::end_recorded_step() {
  in_recorded_step_ = false;
  for (const PendingDownload& d : pending_) {
    std::memcpy(d.host, pending_bytes_.data() + d.offset, d.bytes);
  }
  pending_.clear();
}

void CheckedMemoryBackend::abort_recorded_step() noexcept {
  in_recorded_step_ = false;
  pending_.clear();
  if (broken_.empty()) {
    broken_ =
        "checked backend: a recorded step failed part-way; its ops had run already, so it "
        "cannot run again";
  }
}

void CheckedMemoryBackend::copy(void* dst, const void* src, size_t bytes) {
  OpenRegions open(*this);
  require("copy", "dst", dst, bytes);
  require("copy", "src", src, bytes);
  inner_->copy(dst, src, bytes);
}

void CheckedMemoryBackend::copy_strided_rows(const float* src, int64_t src_stride, float* dst,
                                             int64_t dst_stride, int64_t n_rows, int64_t n_cols) {
  OpenRegions open(*this);
  if (n_rows > 0 && n_cols > 0) {
    require("copy_strided_rows", "src", src, floats((n_rows - 1) * src_stride + n_cols));
    require("copy_strided_rows", "dst", dst, floats((n_rows - 1) * dst_stride + n_cols));
  }
  inner_->copy_strided_rows(src, src_stride, dst, dst_stride, n_rows, n_cols);
}

void CheckedMemoryBackend::matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) {
  OpenRegions open(*this);
  require("matmul", "x", x, floats(n_tokens * w.n_cols));
  require("matmul", "y", y, floats(n_tokens * w.n_rows));
  inner_->matmul(w, x, y, n_tokens);
}

void CheckedMemoryBackend::matmul_shared_input(const MatrixView* ws, float* const* ys, size_t n,
                                               const float* x, int64_t n_tokens) {
  OpenRegions open(*this);
  for (size_t i = 0; i < n; ++i) {
    require("matmul_shared_input", "x", x, floats(n_tokens * ws[i].n_cols));
    require("matmul_shared_input", "y", ys[i], floats(n_tokens * ws[i].n_rows));
  }
  inner_->matmul_shared_input(ws, ys, n, x, n_tokens);
}

void CheckedMemoryBackend::get_rows(const MatrixView& table, const int32_t* ids, int64_t n,
                                    float* out) {
  OpenRegions open(*this);
  require("get_rows", "ids", ids, uint64_t(std::max<int64_t>(n, 0)) * sizeof(int32_t));
  require("get_rows", "out", out, floats(n * table.n_cols));
  inner_->get_rows(table, ids, n, out);
}

void CheckedMemoryBackend::rms_norm(const float* x, const float* weight, float* y, int64_t n_rows,
                                    int64_t n, float eps) {
  OpenRegions open(*this);
  require("rms_norm", "x", x, floats(n_rows * n));
  require("rms_norm", "y", y, floats(n_rows * n));
  inner_->rms_norm(x, weight, y, n_rows, n, eps);
}

void CheckedMemoryBackend::add_rms_norm(float* x, const float* branch, const float* weight,
                                        float* xn, int64_t n_rows, int64_t n, float eps) {
  OpenRegions open(*this);
  require("add_rms_norm", "x", x, floats(n_rows * n));
  require("add_rms_norm", "branch", branch, floats(n_rows * n));
  require("add_rms_norm", "xn", xn, floats(n_rows * n));
  inner_->add_rms_norm(x, branch, weight, xn, n_rows, n, eps);
}

void CheckedMemoryBackend::post_norm_add_rms_norm(float* x, float* branch, const float* post_weight,
                                                  float post_eps, const float* weight, float* xn,
                                                  int64_t n_rows, int64_t n, float eps) {
  OpenRegions open(*this);
  require("post_norm_add_rms_norm", "x", x, floats(n_rows * n));
  require("post_norm_add_rms_norm", "branch", branch, floats(n_rows * n));
  if (xn != nullptr) require("post_norm_add_rms_norm", "xn", xn, floats(n_rows * n));
  inner_->post_norm_add_rms_norm(x, branch, post_weight, post_eps, weight, xn, n_rows, n, eps);
}

void CheckedMemoryBackend::rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                                int64_t pos0, const RopeConfig& config) {
  OpenRegions open(*this);
  require("rope", "x", x, floats(n_tokens * n_head * head_dim));
  inner_->rope(x, n_tokens, n_head, head_dim, pos0, config);
}

void CheckedMemoryBackend::kv_store(const KvLayerView& kv, const float* k, const float* v,
                                    int64_t n_tokens, int64_t pos0) {
  OpenRegions open(*this);
  require("kv_store", "k", k, floats(n_tokens * kv.n_head_kv * kv.head_dim_k));
  require("kv_store", "v", v, floats(n_tokens * kv.n_head_kv * kv.head_dim_v));
  require("kv_store", "kv.k", kv.k, kv_bytes(kv, kv.head_dim_k));
  require("kv_store", "kv.v", kv.v, kv_bytes(kv, kv.head_dim_v));
  inner_->kv_store(kv, k, v, n_tokens, pos0);
}

void CheckedMemoryBackend::attention(const AttentionCall& call) {
  OpenRegions open(*this);
  require("attention", "q", call.q, floats(call.n_tokens * call.n_head * call.kv.head_dim_k));
  require("attention", "out", call.out, floats(call.n_tokens * call.n_head * call.kv.head_dim_v));
  require("attention", "kv.k", call.kv.k, kv_bytes(call.kv, call.kv.head_dim_k));
  require("attention", "kv.v", call.kv.v, kv_bytes(call.kv, call.kv.head_dim_v));
  inner_->attention(call);
}

void CheckedMemoryBackend::glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
                               int64_t n_cols) {
  OpenRegions open(*this);
  require("glu", "gate", gate, floats(n_rows * n_cols));
  require("glu", "up", up, floats(n_rows * n_cols));
  inner_->glu(act, gate, up, n_rows, n_cols);
}

void CheckedMemoryBackend::mul_sigmoid(float* x, const float* gate, int64_t n) {
  OpenRegions open(*this);
  require("mul_sigmoid", "x", x, floats(n));
  require("mul_sigmoid", "gate", gate, floats(n));
  inner_->mul_sigmoid(x, gate, n);
}

void CheckedMemoryBackend::mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows,
                                    int64_t n_cols, int64_t n_gate) {
  OpenRegions open(*this);
  require("mul_gate", "x", x, floats(n_rows * n_cols));
  require("mul_gate", "gate", gate, floats(n_rows * n_gate));
  inner_->mul_gate(act, x, gate, n_rows, n_cols, n_gate);
}

void CheckedMemoryBackend::mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) {
  OpenRegions open(*this);
  require("mul_rows", "x", x, floats(n_rows * n_cols));
  inner_->mul_rows(x, weight, n_rows, n_cols);
}

void CheckedMemoryBackend::add(float* y, const float* x, int64_t n) {
  OpenRegions open(*this);
  require("add", "y", y, floats(n));
  require("add", "x", x, floats(n));
  inner_->add(y, x, n);
}

void CheckedMemoryBackend::add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) {
  OpenRegions open(*this);
  require("add_bias", "x", x, floats(n_rows * n_cols));
  inner_->add_bias(x, bias, n_rows, n_cols);
}

void CheckedMemoryBackend::scale(float* x, float factor, int64_t n) {
  OpenRegions open(*this);
  require("scale", "x", x, floats(n));
  inner_->scale(x, factor, n);
}

void CheckedMemoryBackend::softcap(float* x, float cap, int64_t n) {
  OpenRegions open(*this);
  require("softcap", "x", x, floats(n));
  inner_->softcap(x, cap, n);
}

void CheckedMemoryBackend::softmax_rows(float* x, int64_t n_rows, int64_t n_cols) {
  OpenRegions open(*this);
  require("softmax_rows", "x", x, floats(n_rows * n_cols));
  inner_->softmax_rows(x, n_rows, n_cols);
}

// rows are host lists: the source (gather) or destination (scatter) must hold the largest row.
void CheckedMemoryBackend::gather_rows(const float* src, const int32_t* rows, int64_t n,
                                       int64_t n_cols, float* dst) {
  OpenRegions open(*this);
  const int64_t last = n > 0 ? *std::max_element(rows, rows + n) : -1;
  require("gather_rows", "src", src, floats((last + 1) * n_cols));
  require("gather_rows", "dst", dst, floats(n * n_cols));
  inner_->gather_rows(src, rows, n, n_cols, dst);
}

void CheckedMemoryBackend::scatter_rows(const float* src, const int32_t* rows, int64_t n,
                                        int64_t n_cols, float* dst) {
  OpenRegions open(*this);
  const int64_t last = n > 0 ? *std::max_element(rows, rows + n) : -1;
  require("scatter_rows", "src", src, floats(n * n_cols));
  require("scatter_rows", "dst", dst, floats((last + 1) * n_cols));
  inner_->scatter_rows(src, rows, n, n_cols, dst);
}

void CheckedMemoryBackend::weighted_sum(const float* y, const float* weights, int64_t n_tokens,
                                        int64_t k, int64_t n, float* out) {
  OpenRegions open(*this);
  require("weighted_sum", "y", y, floats(n_tokens * k * n));
  require("weighted_sum", "weights", weights, floats(n_tokens * k));
  require("weighted_sum", "out", out, floats(n_tokens * n));
  inner_->weighted_sum(y, weights, n_tokens, k, n, out);
}

void CheckedMemoryBackend::select_experts(const float* probs, const float* bias, int64_t n_tokens,
                                          const ExpertSelection& s, int32_t* selected,
                                          float* weights) {
  OpenRegions open(*this);
  require("select_experts", "probs", probs, floats(n_tokens * s.n_expert));
  require("select_experts", "selected", selected, floats(n_tokens * s.n_expert_used));
  require("select_experts", "weights", weights, floats(n_tokens * s.n_expert_used));
  inner_->select_experts(probs, bias, n_tokens, s, selected, weights);
}

void CheckedMemoryBackend::scale_expert_rows(float* x, const float* scales, int64_t n_expert,
                                             const int32_t* ids, int64_t n, int64_t n_cols) {
  OpenRegions open(*this);
  require("scale_expert_rows", "x", x, floats(n * n_cols));
  require("scale_expert_rows", "ids", ids, floats(n));  // int32, the size of a float
  inner_->scale_expert_rows(x, scales, n_expert, ids, n, n_cols);
}

void CheckedMemoryBackend::add_expert_bias(float* x, const float* table, int64_t n_expert,
                                           const int32_t* ids, int64_t n, int64_t n_cols) {
  OpenRegions open(*this);
  require("add_expert_bias", "x", x, floats(n * n_cols));
  require("add_expert_bias", "ids", ids, floats(n));  // int32, the size of a float
  inner_->add_expert_bias(x, table, n_expert, ids, n, n_cols);
}

void CheckedMemoryBackend::matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n,
                                          const float* x, bool shared_input, float* y) {
  OpenRegions open(*this);
  require("matmul_experts", "ids", ids, floats(n));  // int32, the size of a float
  require("matmul_experts", "x", x,
          floats((shared_input ? std::min<int64_t>(n, 1) : n) * stack.n_cols));
  require("matmul_experts", "y", y, floats(n * stack.n_rows));
  inner_->matmul_experts(stack, ids, n, x, shared_input, y);
}

void CheckedMemoryBackend::matmul_experts_shared_input(const ExpertStack* stacks, float* const* ys,
                                                       size_t n_stacks, const int32_t* ids,
                                                       int64_t n, const float* x) {
  OpenRegions open(*this);
  require("matmul_experts_shared_input", "ids", ids, floats(n));
  for (size_t i = 0; i < n_stacks; ++i) {
    require("matmul_experts_shared_input", "x", x,
            floats(std::min<int64_t>(n, 1) * stacks[i].n_cols));
    require("matmul_experts_shared_input", "y", ys[i], floats(n * stacks[i].n_rows));
  }
  inner_->matmul_experts_shared_input(stacks, ys, n_stacks, ids, n, x);
}

void CheckedMemoryBackend::matmul_expert_groups(const ExpertStack& stack, const int32_t* ids,
                                                const int64_t* offsets, int64_t n_groups,
                                                const float* x, float* y) {
  OpenRegions open(*this);
  const int64_t rows = n_groups > 0 ? offsets[n_groups] : 0;
  require("matmul_expert_groups", "x", x, floats(rows * stack.n_cols));
  require("matmul_expert_groups", "y", y, floats(rows * stack.n_rows));
  inner_->matmul_expert_groups(stack, ids, offsets, n_groups, x, y);
}

// The recurrent layers' ops (backend.h).
void CheckedMemoryBackend::causal_conv_silu(float* x, int64_t n_tokens, int64_t channels,
                                            const float* taps, int64_t kernel, float* conv_state) {
  OpenRegions open(*this);
  require("causal_conv_silu", "x", x, floats(n_tokens * channels));
  require("causal_conv_silu", "conv_state", conv_state, floats((kernel - 1) * channels));
  inner_->causal_conv_silu(x, n_tokens, channels, taps, kernel, conv_state);
}

void CheckedMemoryBackend::l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride,
                                         int64_t n_heads, int64_t head_dim, float eps,
                                         bool eps_inside) {
  OpenRegions open(*this);
  if (n_tokens > 0 && n_heads > 0) {
    require("l2_norm_heads", "x", x, floats((n_tokens - 1) * row_stride + n_heads * head_dim));
  }
  inner_->l2_norm_heads(x, n_tokens, row_stride, n_heads, head_dim, eps, eps_inside);
}

void CheckedMemoryBackend::delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate,
                                       int64_t n_tokens, const float* dt_bias, const float* a,
                                       int64_t a_group) {
  OpenRegions open(*this);
  require("delta_gates", "beta", beta, floats(n_tokens * n_beta));
  require("delta_gates", "gate", gate, floats(n_tokens * n_gate));
  inner_->delta_gates(beta, n_beta, gate, n_gate, n_tokens, dt_bias, a, a_group);
}

void CheckedMemoryBackend::delta_rule(const DeltaRuleCall& c) {
  OpenRegions open(*this);
  const int64_t d = c.head_dim, nv = c.n_v_heads;
  if (c.n_tokens > 0 && nv > 0) {
    const int64_t last = c.n_tokens - 1;
    require("delta_rule", "q", c.q, floats(last * c.qk_stride + c.n_k_heads * d));
    require("delta_rule", "k", c.k, floats(last * c.qk_stride + c.n_k_heads * d));
    require("delta_rule", "v", c.v, floats(last * c.v_stride + nv * d));
    require("delta_rule", "beta", c.beta, floats(c.n_tokens * nv));
    require("delta_rule", "gate", c.gate, floats(c.n_tokens * nv * (c.key_gate ? d : 1)));
    require("delta_rule", "state", c.state, floats(nv * d * d));
    require("delta_rule", "out", c.out, floats(last * c.out_stride + nv * d));
  }
  inner_->delta_rule(c);
}

void CheckedMemoryBackend::layer_norm(const float* x, const float* weight, const float* bias,
                                      float* y, int64_t n_rows, int64_t n, float eps) {
  OpenRegions open(*this);
  require("layer_norm", "x", x, floats(n_rows * n));
  require("layer_norm", "y", y, floats(n_rows * n));
  inner_->layer_norm(x, weight, bias, y, n_rows, n, eps);
}

void CheckedMemoryBackend::indexer_scores(const float* q, const float* w, const KvLayerView& kv,
                                          int64_t n_tokens, int64_t n_head, int64_t pos0,
                                          float* scores) {
  OpenRegions open(*this);
  require("indexer_scores", "q", q, floats(n_tokens * n_head * kv.head_dim_k));
  require("indexer_scores", "w", w, floats(n_tokens * n_head));
  require("indexer_scores", "kv.k", kv.k, kv_bytes(kv, kv.head_dim_k));
  require("indexer_scores", "scores", scores, floats(n_tokens * (pos0 + n_tokens)));
  inner_->indexer_scores(q, w, kv, n_tokens, n_head, pos0, scores);
}

void CheckedMemoryBackend::top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols,
                                           int64_t pos0, int64_t top_k, int32_t* positions) {
  OpenRegions open(*this);
  require("top_k_positions", "scores", scores, floats(n_rows * n_cols));
  require("top_k_positions", "positions", positions, floats(n_rows * top_k));  // int32
  inner_->top_k_positions(scores, n_rows, n_cols, pos0, top_k, positions);
}

void CheckedMemoryBackend::attention_selected(const AttentionCall& call, const int32_t* positions,
                                              int64_t top_k) {
  OpenRegions open(*this);
  require("attention_selected", "q", call.q,
          floats(call.n_tokens * call.n_head * call.kv.head_dim_k));
  require("attention_selected", "out", call.out,
          floats(call.n_tokens * call.n_head * call.kv.head_dim_v));
  require("attention_selected", "kv.k", call.kv.k, kv_bytes(call.kv, call.kv.head_dim_k));
  require("attention_selected", "kv.v", call.kv.v, kv_bytes(call.kv, call.kv.head_dim_v));
  require("attention_selected", "positions", positions, floats(call.n_tokens * top_k));
  inner_->attention_selected(call, positions, top_k);
}

void CheckedMemoryBackend::hyper_mix(const float* mixes, const float* scale, const float* base,
                                     int64_t n_tokens, int64_t n_stream, int64_t iterations,
                                     float eps, float* pre, float* post, float* comb) {
  OpenRegions open(*this);
  const int64_t width = post == nullptr ? n_stream : (2 + n_stream) * n_stream;
  require("hyper_mix", "mixes", mixes, floats(n_tokens * width));
  require("hyper_mix", "pre", pre, floats(n_tokens * n_stream));
  require("hyper_mix", "post", post, post == nullptr ? 0 : floats(n_tokens * n_stream));
  require("hyper_mix", "comb", comb, comb == nullptr ? 0 : floats(n_tokens * n_stream * n_stream));
  inner_->hyper_mix(mixes, scale, base, n_tokens, n_stream, iterations, eps, pre, post, comb);
}

void CheckedMemoryBackend::hyper_fold(const float* streams, const float* weights, int64_t n_tokens,
                                      int64_t n_stream, int64_t n_embd, float* x) {
  OpenRegions open(*this);
  require("hyper_fold", "streams", streams, floats(n_tokens * n_stream * n_embd));
  require("hyper_fold", "weights", weights, floats(n_tokens * n_stream));
  require("hyper_fold", "x", x, floats(n_tokens * n_embd));
  inner_->hyper_fold(streams, weights, n_tokens, n_stream, n_embd, x);
}

void CheckedMemoryBackend::hyper_expand(const float* branch, const float* post, const float* comb,
                                        const float* streams, int64_t n_tokens, int64_t n_stream,
                                        int64_t n_embd, float* out) {
  OpenRegions open(*this);
  require("hyper_expand", "branch", branch, floats(n_tokens * n_embd));
  require("hyper_expand", "post", post, floats(n_tokens * n_stream));
  require("hyper_expand", "comb", comb, floats(n_tokens * n_stream * n_stream));
  require("hyper_expand", "streams", streams, floats(n_tokens * n_stream * n_embd));
  require("hyper_expand", "out", out, floats(n_tokens * n_stream * n_embd));
  inner_->hyper_expand(branch, post, comb, streams, n_tokens, n_stream, n_embd, out);
}

void CheckedMemoryBackend::clamp_swiglu(float* gate, float* up, int64_t n, float limit) {
  OpenRegions open(*this);
  require("clamp_swiglu", "gate", gate, floats(n));
  require("clamp_swiglu", "up", up, floats(n));
  inner_->clamp_swiglu(gate, up, n, limit);
}

void CheckedMemoryBackend::kv_compress(const float* kv, const float* score, const float* ape,
                                       float* state, int64_t n_tokens, int64_t pos0, int64_t ratio,
                                       int64_t head_dim, bool overlap, float* keys) {
  OpenRegions open(*this);
  const int64_t width = (overlap ? 2 : 1) * head_dim, span = (overlap ? 2 : 1) * ratio;
  const int64_t n_blocks = ratio > 0 && pos0 >= 0 ? (pos0 + n_tokens) / ratio - pos0 / ratio : 0;
  require("kv_compress", "kv", kv, floats(n_tokens * width));
  require("kv_compress", "score", score, floats(n_tokens * width));
  require("kv_compress", "state", state, floats(span * 2 * width));
  require("kv_compress", "keys", keys, floats(n_blocks * head_dim));
  inner_->kv_compress(kv, score, ape, state, n_tokens, pos0, ratio, head_dim, overlap, keys);
}

void CheckedMemoryBackend::gather_key_cells(const KvLayerView& kv, const int32_t* cells, int64_t n,
                                            void* dst) {
  OpenRegions open(*this);
  const uint64_t cell = kv_bytes(kv, kv.head_dim_k) / uint64_t(std::max<int64_t>(kv.capacity, 1));
  require("gather_key_cells", "kv.k", kv.k, kv_bytes(kv, kv.head_dim_k));
  require("gather_key_cells", "cells", cells, floats(n));  // int32
  require("gather_key_cells", "dst", dst, uint64_t(std::max<int64_t>(n, 0)) * cell);
  inner_->gather_key_cells(kv, cells, n, dst);
}

}  // namespace sluice::checked
