// CpuBackend: the Backend (backend/backend.h) on host memory — the reference every other
// backend is compared with. Matmuls quantize activations into the weight type's activation
// format and call the per-ISA vec_dot table, or, for K-quant / IQ weights and 8+ tokens,
// llama.cpp's tiled kernel (tiled_kquant.h); loops run on the model's ThreadPool. Each output
// element's inputs and float steps do not depend on the thread split, so results are
// identical for any thread count. Scratch grows on first use and is then reused.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/vec_dot.h"
#include "core/thread_pool.h"

namespace sluice::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool* pool);  // pool may be nullptr: single-threaded

  void matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) override;
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override;
  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                float eps) override;
  void rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
            const RopeConfig& config) override;
  void kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                int64_t pos0) override;
  void attention(const AttentionCall& call) override;
  void glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
           int64_t n_cols) override;
  void mul_sigmoid(float* x, const float* gate, int64_t n) override;
  // cpu_gate_ops.cpp: the attention output gate and the broadcast row product.
  void mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                int64_t n_gate) override;
  void mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) override;
  void add(float* y, const float* x, int64_t n) override;
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) override;
  void scale(float* x, float factor, int64_t n) override;
  void softcap(float* x, float cap, int64_t n) override;
  void softmax_rows(float* x, int64_t n_rows, int64_t n_cols) override;

  // cpu_memory_ops.cpp: host memory, plain copies, the MoE gather / scatter / combine.
  void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                   float* dst) override;
  void scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                    float* dst) override;
  void weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                    float* out) override;
  // cpu_expert_ops.cpp: the routed experts' selection and products: a decode token's choices in
  // one parallel loop over all their rows, a chunk's groups one matmul per matrix.
  void select_experts(const float* probs, const float* bias, int64_t n_tokens,
                      const ExpertSelection& s, int32_t* selected, float* weights) override;
  void scale_expert_rows(float* x, const float* scales, int64_t n_expert, const int32_t* ids,
                         int64_t n, int64_t n_cols) override;
  void add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids,
                       int64_t n, int64_t n_cols) override;
  void matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n, const float* x,
                      bool shared_input, float* y) override;
  void matmul_experts_shared_input(const ExpertStack* stacks, float* const* ys, size_t n_stacks,
                                   const int32_t* ids, int64_t n, const float* x) override;
  void matmul_expert_groups(const ExpertStack& stack, const int32_t* ids, const int64_t* offsets,
                            int64_t n_groups, const float* x, float* y) override;
  // cpu_delta_net_ops.cpp: the recurrent layers' convolution, norms, gates and delta rule.
  void causal_conv_silu(float* x, int64_t n_tokens, int64_t channels, const float* taps,
                        int64_t kernel, float* conv_state) override;
  void l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads,
                     int64_t head_dim, float eps, bool eps_inside) override;
  void delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate, int64_t n_tokens,
                   const float* dt_bias, const float* a, int64_t a_group) override;
  void delta_rule(const DeltaRuleCall& call) override;
  // cpu_sparse_attention_ops.cpp: DeepSeek sparse attention's indexer and restricted attention.
  void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t n_rows,
                  int64_t n, float eps) override;
  void indexer_scores(const float* q, const float* w, const KvLayerView& kv, int64_t n_tokens,
                      int64_t n_head, int64_t pos0, float* scores) override;
  void top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols, int64_t pos0,
                       int64_t top_k, int32_t* positions) override;
  void attention_selected(const AttentionCall& call, const int32_t* positions,
                          int64_t top_k) override;
  // cpu_deepseek4_ops.cpp: DeepSeek V4's hyper-connections, SwiGLU clamp and KV compressor.
  void hyper_mix(const float* mixes, const float* scale, const float* base, int64_t n_tokens,
                 int64_t n_stream, int64_t iterations, float eps, float* pre, float* post,
                 float* comb) override;
  void hyper_fold(const float* streams, const float* weights, int64_t n_tokens, int64_t n_stream,
                  int64_t n_embd, float* x) override;
  void hyper_expand(const float* branch, const float* post, const float* comb, const float* streams,
                    int64_t n_tokens, int64_t n_stream, int64_t n_embd, float* out) override;
  void clamp_swiglu(float* gate, float* up, int64_t n, float limit) override;
  void kv_compress(const float* kv, const float* score, const float* ape, float* state,
                   int64_t n_tokens, int64_t pos0, int64_t ratio, int64_t head_dim, bool overlap,
                   float* keys) override;
  void gather_key_cells(const KvLayerView& kv, const int32_t* cells, int64_t n, void* dst) override;
  void* allocate(size_t bytes) override;
  void deallocate(void* p) noexcept override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_strided_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                         int64_t n_rows, int64_t n_cols) override;

 private:
  // Runs body(lo, hi) over [0, n) in chunks on the pool (inline when there is none).
  template <class Body>
  void parallel(int64_t n, int64_t chunk, Body&& body) {
    if (pool_ == nullptr || pool_->size() == 1 || n <= chunk) {
      body(int64_t(0), n);
      return;
    }
    pool_->parallel_for(0, n, chunk, body);
  }

  // Rows per chunk of a row-wise element operation: two chunks per thread, whole rows.
  int64_t row_chunk(int64_t n_rows) const {
    const int64_t n_threads = pool_ != nullptr ? pool_->size() : 1;
    return std::max<int64_t>(1, (n_rows + 2 * n_threads - 1) / (2 * n_threads));
  }
  void rms_norm_row(const float* x, const float* weight, float* y, int64_t n, float eps);

  // matmul's activations: n rows of x [n, n_cols] quantized to act_type into activations_
  // (x itself for F32), and for the scaled kernels (Q8_0 / Q8_1 activations) each row's block
  // scales as floats [n, n_cols / 32, 2] (d, s) in activation_scales_.
  const uint8_t* quantize_activations(QType act_type, const float* x, int64_t n, int64_t n_cols);
  const float* activation_block_scales(QType act_type, const uint8_t* x_q, int64_t n,
                                       int64_t act_row, int64_t n_cols);

  // matmul_experts for n_stacks same-typed, same-shaped stacks: one parallel loop over every
  // (stack, choice, row) output.
  void expert_rows(const ExpertStack* stacks, float* const* ys, size_t n_stacks, const int32_t* ids,
                   int64_t n, const float* x, bool shared_input);

  void matmul_scaled(VecDotScaledFn dot, QType act_type, const uint8_t* rows, int64_t w_row,
                     int64_t n_rows, const uint8_t* x_q, int64_t act_row, float* y,
                     int64_t n_tokens, int64_t n_cols);

  void matmul_tiled(const MatrixView& w, const uint8_t* x_q, int64_t act_row, float* y,
                    int64_t n_tokens);

  ThreadPool* pool_;
  SelectionScratch selection_;              // select_experts' buffers
  std::vector<float> softmax_probs_;        // a row's softmax (ExpertScoring::kSoftmax)
  std::vector<uint8_t> activations_;        // [n_tokens, activation row bytes] of the last matmul
  std::vector<float> activation_scales_;    // [n_tokens, n_blocks, 2] d and s of those blocks
  std::vector<float> conv_window_;          // causal_conv_silu's [kernel - 1 + n_tokens, channels]
  std::vector<float> conv_ones_;            // [channels] ones: its SiLU through swiglu_rows
  std::vector<uint8_t> tiled_activations_;  // matmul_tiled's packed copy of `activations_`
  std::vector<float> indexer_keys_;         // indexer_scores' [n_keys, head_dim] keys as float
  std::vector<float> indexer_dots_;         // indexer_scores' [rows, n_head, n_keys] q · k
  std::vector<int32_t> top_k_order_;        // top_k_positions' [n_cols] column order
  std::vector<uint8_t> selected_cells_;     // attention_selected's [top_k] K cells, then V cells
};

}  // namespace sluice::cpu
