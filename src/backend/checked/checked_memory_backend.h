// CheckedMemoryBackend: the CPU backend under a GPU's memory rules, so that a forward meant for
// the device can be proven device-clean on a machine without one (CI). It wraps a host-memory
// backend (the CPU's) and
//   - says host_memory() false, so the model takes the same paths it takes on a GPU;
//   - gives out its memory as page-aligned mappings that are PROT_NONE between ops: a host
//     read or write of backend memory outside an op (a host loop over activations, a memcpy)
//     faults at once, where a GPU would have read garbage or crashed later;
//   - checks that every activation argument of every op lies inside its memory, naming the op
//     and the argument otherwise ("checked backend: matmul: x is not backend memory");
//   - takes part in recorded steps (a GPU's CUDA graphs) as markers, so that the runtime takes
//     its recording path here too: inside one, a download completes only at the step's end, as
//     a graph's staged downloads do, and an op queued after a download fails — the host may have
//     read it to decide that op ("checked backend: download inside a recorded step …"). A model
//     whose decode_reads_host() wrongly says false fails here instead of on the GPU.
// Weights (MatrixView data, norm weights, biases …) may be host memory, as on a GPU.
// Selected by SLUICE_CHECK_BACKEND_MEMORY=1 with the CPU backend (runtime/loaded_model.cpp).
// Slow (two mprotect calls per region per op): a test tool, not a backend to run models on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sluice::checked {

class CheckedMemoryBackend final : public Backend {
 public:
  // inner: a host-memory backend (host_memory() true) that does the arithmetic.
  explicit CheckedMemoryBackend(std::unique_ptr<Backend> inner);
  ~CheckedMemoryBackend() override;

  void matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) override;
  void matmul_shared_input(const MatrixView* ws, float* const* ys, size_t n, const float* x,
                           int64_t n_tokens) override;
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override;
  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                float eps) override;
  void add_rms_norm(float* x, const float* branch, const float* weight, float* xn, int64_t n_rows,
                    int64_t n, float eps) override;
  void post_norm_add_rms_norm(float* x, float* branch, const float* post_weight, float post_eps,
                              const float* weight, float* xn, int64_t n_rows, int64_t n,
                              float eps) override;
  void rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
            const RopeConfig& config) override;
  void kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                int64_t pos0) override;
  void attention(const AttentionCall& call) override;
  void glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
           int64_t n_cols) override;
  void mul_sigmoid(float* x, const float* gate, int64_t n) override;
  void mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                int64_t n_gate) override;
  void mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) override;
  void add(float* y, const float* x, int64_t n) override;
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) override;
  void scale(float* x, float factor, int64_t n) override;
  void softcap(float* x, float cap, int64_t n) override;
  void softmax_rows(float* x, int64_t n_rows, int64_t n_cols) override;
  void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                   float* dst) override;
  void scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                    float* dst) override;
  void weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                    float* out) override;
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

  void causal_conv_silu(float* x, int64_t n_tokens, int64_t channels, const float* taps,
                        int64_t kernel, float* conv_state) override;
  void l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads,
                     int64_t head_dim, float eps, bool eps_inside) override;
  void delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate, int64_t n_tokens,
                   const float* dt_bias, const float* a, int64_t a_group) override;
  void delta_rule(const DeltaRuleCall& call) override;
  void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t n_rows,
                  int64_t n, float eps) override;
  void indexer_scores(const float* q, const float* w, const KvLayerView& kv, int64_t n_tokens,
                      int64_t n_head, int64_t pos0, float* scores) override;
  void top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols, int64_t pos0,
                       int64_t top_k, int32_t* positions) override;
  void attention_selected(const AttentionCall& call, const int32_t* positions,
                          int64_t top_k) override;
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

  bool host_memory() const override { return false; }
  void* allocate(size_t bytes) override;
  void deallocate(void* p) noexcept override;
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_strided_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                         int64_t n_rows, int64_t n_cols) override;

  // Recorded steps without a recording: begin says yes and marks the step, end completes its
  // downloads. The ops ran at once, so a step that failed part-way cannot run again: after an
  // abort every op (and begin) fails, with the violation's message when it was one of these
  // checks — the runtime's unrecorded retry then stops the run with that message.
  bool begin_recorded_step() override;
  void end_recorded_step() override;
  void abort_recorded_step() noexcept override;

 private:
  friend class OpenRegions;
  // Fails (sluice::Error) unless [p, p + bytes) lies inside one allocation; bytes 0 is allowed
  // anywhere inside one (or nullptr).
  void require(const char* op, const char* what, const void* p, uint64_t bytes) const;
  void protect_all(int protection) const;
  // Every op, first thing (OpenRegions): fails after an aborted step, or when `op` is queued
  // after a download inside a recorded step (a download after a download is allowed: the
  // step's outputs, read once it has run).
  void check_step_order(bool download);
  // Fails with `message`, which every later op repeats.
  [[noreturn]] void fail_sticky(std::string message);

  std::unique_ptr<Backend> inner_;
  std::map<uintptr_t, size_t> regions_;  // start -> mapped length (whole pages)
  std::map<uintptr_t, size_t> sizes_;    // start -> bytes asked for
  mutable int open_depth_ = 0;  // nested opens (none today: the inner backend never calls back)

  // The recorded step in progress: its downloads, completed by end_recorded_step.
  struct PendingDownload {
    void* host;
    size_t offset;  // into pending_bytes_
    size_t bytes;
  };
  bool in_recorded_step_ = false;
  std::vector<PendingDownload> pending_;
  std::vector<unsigned char> pending_bytes_;  // the downloads' bytes as they were when queued
  std::string broken_;                        // not empty: why every op now fails
};

// Whether the environment asks for the checked backend (SLUICE_CHECK_BACKEND_MEMORY=1).
bool check_backend_memory_requested();

}  // namespace sluice::checked
