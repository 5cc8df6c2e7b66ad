// CudaBackend: the Backend interface (backend/backend.h) on an NVIDIA GPU. Activations, KV
// cells, logits and index arrays (get_rows's ids) are device memory — the backend's own, from
// allocate(), moved to and from the host by upload() / download(). Weight arguments (MatrixView
// data, rms_norm's weight, add_bias's bias, rope's freq_factors, attention's sinks) may be
// device pointers or HOST pointers to memory that never changes while the backend lives: those
// are copied to the device on first use and the copy kept (WeightMirror, cuda_weight_mirror.h;
// mirrored_bytes() says how much). The MoE routing lists of gather_rows / scatter_rows /
// weighted_sum are host memory, as the interface says. Every op only enqueues work on the
// backend's own stream — no host round trips but a weight's first upload — so results are
// ready after synchronize() or download(). Errors, including a kernel's fault reported at the
// next synchronisation, throw sluice::Error with CUDA's one-line message. Not thread-safe: one
// caller thread.
//
// Recorded steps (begin_recorded_step … end_recorded_step) are CUDA graphs captured once and
// replayed while the steps stay the same (cuda_step_graph.h): every op first hands its signature
// to the step graph and, in a replay, launches nothing; rope, kv_store and attention then take
// their position from the graph's parameter table. An op run outside a recorded step drops the
// recording (it may grow a scratch buffer whose old address the graph holds).
//
// Element-wise ops, norms, RoPE, KV writes and the MoE gather / scatter / weighted_sum reproduce
// CpuBackend's float operations (bit for bit, or within 1 ulp where the CPU calls libm);
// attention and the quantized matmuls agree with it within the tolerances stated in
// tests/backend/cuda_backend_test.cpp. Plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_set>

#include "backend/backend.h"
#include "backend/cuda/cpu_order.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_rope_angles.h"
#include "backend/cuda/cuda_step_graph.h"
#include "backend/cuda/cuda_weight_mirror.h"
#include "backend/cuda/output_quantize_plan.h"

namespace sluice::cuda {

class CudaBackend final : public Backend {
 public:
  // cpu_rounding: every product and attention rounds as CpuBackend does (see cpu_rounding()).
  // Throws without the device. cpu_order: whose CPU kernels' float order the products replay
  // under cpu_rounding (cpu_order.h): this host's by default; a test may ask for AVX2's on an
  // AVX-512 host.
  explicit CudaBackend(int device = 0, bool cpu_rounding = false,
                       CpuOrder cpu_order = host_cpu_order());
  ~CudaBackend() override;  // frees what allocate() gave and was not deallocated
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // With CPU rounding, chunks of any length multiply on the decode kernels' int8 / float
  // arithmetic (the CPU's; at most 8 tokens per weight read) and MoE rows go one by one; F16
  // attention follows the CPU's order of operations (cuda_attention_cpu_order.cu). Results then
  // differ from the CPU's only by float summation order inside a product (~1e-7 relative) and
  // rare 1-ulp libm roundings, so greedy decoding agrees; prefill is several times slower.
  bool cpu_rounding() const { return cpu_rounding_; }

  void matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) override;
  // Decode (≤ 8 tokens) with one activation format for all: quantized once, then one product
  // launch per weight type over all its matrices (quant_matmul.h's matmul_quantized_many,
  // bit-equal to matmul); otherwise one matmul each.
  void matmul_shared_input(const MatrixView* ws, float* const* ys, size_t n, const float* x,
                           int64_t n_tokens) override;
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override;
  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                float eps) override;
  // One kernel, the bits of add then rms_norm (cuda_norm.cu).
  void add_rms_norm(float* x, const float* branch, const float* weight, float* xn, int64_t n_rows,
                    int64_t n, float eps) override;
  void post_norm_add_rms_norm(float* x, float* branch, const float* post_weight, float post_eps,
                              const float* weight, float* xn, int64_t n_rows, int64_t n,
                              float eps) override;
  void rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
            const RopeConfig& config) override;
  void kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                int64_t pos0) override;
  // One kernel (cuda_attention_inputs.cu), the bits of the default's six.
  void attention_inputs(const AttentionInputs& in) override;
  void attention(const AttentionCall& call) override;
  void glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
           int64_t n_cols) override;
  // Decode of an int8-path weight: the GLU and the activation quantization in one kernel
  // (cuda_glu_quantize.cu), then the product; otherwise the two ops.
  void glu_matmul(const MatrixView& w, GluActivation act, float* gate, const float* up, float* y,
                  int64_t n_tokens) override;
  void mul_sigmoid(float* x, const float* gate, int64_t n) override;
  // cuda_backend_gate.cu: one launch each (cuda_gate.cu).
  void mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                int64_t n_gate) override;
  void mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) override;
  void add(float* y, const float* x, int64_t n) override;
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) override;
  void scale(float* x, float factor, int64_t n) override;
  void softcap(float* x, float cap, int64_t n) override;
  void softmax_rows(float* x, int64_t n_rows, int64_t n_cols) override;

  // MoE rows: `rows` are host lists; short ones (decode) travel in the kernel's parameters,
  // longer ones through a device scratch copied on the stream (cuda_moe.cu).
  void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                   float* dst) override;
  void scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                    float* dst) override;
  void weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                    float* out) override;
  // The routed experts on the device (cuda_backend_experts.cu, kernels of expert_matmul.h).
  void select_experts(const float* probs, const float* bias, int64_t n_tokens,
                      const ExpertSelection& s, int32_t* selected, float* weights) override;
  void scale_expert_rows(float* x, const float* scales, int64_t n_expert, const int32_t* ids,
                         int64_t n, int64_t n_cols) override;
  void add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids,
                       int64_t n, int64_t n_cols) override;
  void matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n, const float* x,
                      bool shared_input, float* y) override;
  void matmul_expert_groups(const ExpertStack& stack, const int32_t* ids, const int64_t* offsets,
                            int64_t n_groups, const float* x, float* y) override;

  // The recurrent layers' ops (cuda_delta_net.cu).
  void causal_conv_silu(float* x, int64_t n_tokens, int64_t channels, const float* taps,
                        int64_t kernel, float* conv_state) override;
  void l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads,
                     int64_t head_dim, float eps, bool eps_inside) override;
  void delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate, int64_t n_tokens,
                   const float* dt_bias, const float* a, int64_t a_group) override;
  void delta_rule(const DeltaRuleCall& call) override;
  // cuda_sparse_attention.cu: DeepSeek sparse attention's indexer and restricted attention.
  void layer_norm(const float* x, const float* weight, const float* bias, float* y, int64_t n_rows,
                  int64_t n, float eps) override;
  void indexer_scores(const float* q, const float* w, const KvLayerView& kv, int64_t n_tokens,
                      int64_t n_head, int64_t pos0, float* scores) override;
  void top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols, int64_t pos0,
                       int64_t top_k, int32_t* positions) override;
  void attention_selected(const AttentionCall& call, const int32_t* positions,
                          int64_t top_k) override;
  // cuda_deepseek4.cu: DeepSeek V4's hyper-connections, SwiGLU clamp and KV compressor.
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

  // Device memory. allocate: cudaMalloc (256-byte aligned) zeroed on the stream; 0 bytes gives a
  // unique 1-byte allocation (never nullptr, so a pointer always means "a buffer"); running out
  // throws "cuda: out of device memory allocating 1.50 GiB". deallocate waits for the stream
  // first (queued kernels may still use the memory); pointers it did not give are ignored.
  bool host_memory() const override { return false; }
  void* allocate(size_t bytes) override;
  void deallocate(void* p) noexcept override;
  // Stream-ordered copies. upload: the host buffer may be reused on return (a pinned source is
  // waited for, pageable memory is staged by CUDA); download returns with the bytes there.
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  // One cudaMemcpy2DAsync.
  void copy_strided_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride,
                         int64_t n_rows, int64_t n_cols) override;
  // cudaHostRegister (read-only) of the range; an upload from inside a pinned range is a plain
  // asynchronous DMA copy, not waited for (the bytes never change). False when CUDA refuses
  // (e.g. the locked-memory limit), with the error cleared.
  bool pin_host_memory(const void* p, size_t bytes) override;
  bool pin_host_output(void* p, size_t bytes) override;
  void unpin_host_output(void* p) noexcept override;
  // On a second stream that waits for an event recorded on the main one; join_ahead: the main
  // stream waits for an event recorded after them (cuda_backend_ahead.cu). Inside a recorded
  // step (one stream) upload_ahead is an upload.
  void upload_ahead(void* dst, const void* host, size_t bytes) override;
  void join_ahead() override;
  // From a pinned range (pin_host_memory), outside a recorded step: one cudaMemcpy2DAsync on
  // the stream upload or upload_ahead would use. Otherwise a copy per row.
  void upload_rows(void* dst, size_t dst_pitch, const void* host, size_t host_pitch, size_t width,
                   size_t rows, bool ahead) override;
  // Waits until every op queued so far has run; throws the first error any of them hit. Inside
  // a recorded step nothing has run yet: throws.
  void synchronize() override;
  const Stream& stream() const { return stream_; }

  // Steps recorded as CUDA graphs (cuda_step_graph.h); SLUICE_CUDA_GRAPHS=0 turns them off.
  // begin: a replay of the held recording when there is one, else a capture.
  bool begin_recorded_step() override;
  void end_recorded_step() override { graph_.end_and_run(); }
  void abort_recorded_step() noexcept override { graph_.abort(); }
  RecordedStepTimes recorded_step_times() const override { return graph_.times(); }
  // Recorded steps that ran: captured (recorded anew) plus replayed.
  uint64_t recorded_steps() const { return graph_.captures() + graph_.replays(); }
  uint64_t captured_steps() const { return graph_.captures(); }
  uint64_t replayed_steps() const { return graph_.replays(); }

  // Norm and GLU ops that also wrote their output as their reader's int8 activations
  // (output_quantize_plan.h).
  uint64_t quantized_outputs() const { return quantized_outputs_; }

  // Bytes of device memory holding copies of host weights (each host pointer counted once).
  uint64_t mirrored_bytes() const { return mirror_.mirrored_bytes(); }

 private:
  // The side stream of upload_ahead, set to start after every op queued so far on the main one
  // and to be joined by join_ahead.
  const Stream& started_ahead_stream();
  // Under cpu_rounding_, the CPU's RoPE angles of `config` for positions below `end`
  // (cuda_rope_angles.h); nullptr otherwise.
  const float* cpu_rope_angles(const RopeConfig& config, int64_t end);
  // The step graph's check of gather_rows / scatter_rows (their host list is in the signature).
  bool replayed_row_move(OpKind kind, const float* src, const int32_t* rows, int64_t n,
                         int64_t n_cols, float* dst);
  // The CPU's f16 GELU table on the device (uploaded on first use), for kGeluTanhF16.
  const uint16_t* gelu_f16_table();
  // shared_activations_ grown (refused while capturing) for `n_tokens` rows of w's activation
  // format (matmul_shared_input, glu_matmul) or to `bytes`: its device address.
  void* shared_activations(const MatrixView& w, int64_t n_tokens);
  void* shared_activations(size_t bytes);
  // A decode-sized norm or GLU about to run: the activation format its reader learned (plan_)
  // and the shared activations to write it into, when it should quantize its output.
  struct OutputQuantized {
    std::optional<QType> format;
    void* out = nullptr;
  };
  OutputQuantized output_quantized(const OutputQuantizePlan::Producer& producer);
  // graph_.replayed for such an op: where and in which format it quantizes join its signature,
  // and the plan learns that it ran (as the op number just counted).
  bool producer_replayed(OpSignature& op, const OutputQuantizePlan::Producer& producer,
                         const OutputQuantized& quantized);
  // A decode product of a `type` weight reading x (n_tokens rows of n_cols) about to run: the
  // activations the op just before it wrote for it (output_quantize_plan.h), or nullptr.
  const void* prequantized(QType type, const float* x, int64_t n_tokens, int64_t n_cols);

  int device_ = 0;
  int multiprocessors_ = 1;
  size_t max_shared_bytes_ = 0;
  size_t max_copy_pitch_ = 0;  // cudaMemcpy2DAsync's limit on a pitch
  Stream stream_;
  DeviceBuffer attention_scratch_;   // split-K partial results
  DeviceBuffer gelu_f16_table_;      // [65536] halves, uploaded on first use of kGeluTanhF16
  DeviceBuffer routing_scratch_;     // MoE row / weight lists too long for kernel parameters
  DeviceBuffer shared_activations_;  // matmul_shared_input's quantized activations
  DeviceBuffer expert_lists_;        // matmul_expert_groups' ids and offsets
  DeviceBuffer selected_cells_;      // attention_selected's gathered cells (rows of top_k)
  WeightMirror mirror_{stream_};     // device copies of host weights
  Stream ahead_stream_;              // upload_ahead's copies
  Event ahead_start_, ahead_done_;   // main → side, side → main
  bool ahead_pending_ = false;       // copies queued since the last join
  StepGraph graph_{stream_};         // the recorded step: captured once, then replayed
  OutputQuantizePlan plan_;          // which ops quantize their output for their reader
  uint64_t quantized_outputs_ = 0;   // ops that did
  bool graphs_enabled_ = true;
  bool cpu_rounding_ = false;
  CpuOrder cpu_order_ = CpuOrder::kNone;          // the products' order under cpu_rounding_
  CpuRopeAngles rope_angles_{stream_};            // the CPU's RoPE angles under cpu_rounding_
  std::map<uintptr_t, uintptr_t> pinned_ranges_;  // pin_host_memory's ranges: begin → end
  std::map<uintptr_t, uintptr_t> output_ranges_;  // pin_host_output's ranges: begin → end
  std::unordered_set<void*> allocations_;  // what allocate() gave and deallocate() did not take
};

}  // namespace sluice::cuda
