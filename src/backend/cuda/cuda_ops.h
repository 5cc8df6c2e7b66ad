// Internal to backend/cuda (CUDA types): the kernel launchers behind CudaBackend, one group per
// .cu file. Each validates what its kernels assume (one-line sluice::Error otherwise), enqueues
// on `stream` and returns without waiting; all pointers are device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_memory.h"

namespace sluice::cuda {

// cuda_norm.cu. With `quantize` (out not nullptr) a norm also writes its output rows as a
// decode product's int8 activations (quant_matmul.h: the bytes quantize_activations would write
// from them; output_quantize_plan.h says when): `block` 256 = Q8_K, 32 = Q8_0, or Q8_1 with
// `with_sum`. Its output must then be 16-byte aligned and n a multiple of `block`.
struct RowQuantize {
  void* out = nullptr;
  int block = 0;
  bool with_sum = false;
};
void launch_rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                     float eps, cudaStream_t stream, const RowQuantize& quantize = {});
// x += branch, then xn = rms_norm(x) * weight, bit-equal to launch_add + launch_rms_norm.
void launch_add_rms_norm(float* x, const float* branch, const float* weight, float* xn,
                         int64_t n_rows, int64_t n, float eps, cudaStream_t stream,
                         const RowQuantize& quantize = {});
// branch = rms_norm(branch) * post_weight; x += branch; xn = rms_norm(x) * weight (xn nullptr:
// skipped, and nothing quantized), bit-equal to launch_rms_norm + launch_add + launch_rms_norm.
void launch_post_norm_add_rms_norm(float* x, float* branch, const float* post_weight,
                                   float post_eps, const float* weight, float* xn, int64_t n_rows,
                                   int64_t n, float eps, cudaStream_t stream,
                                   const RowQuantize& quantize = {});

// Positions: rope, kv_store and attention take the first token's position by value (`pos0`)
// or, inside a recorded step, from device memory (`pos0_slot`, the step graph's parameter table,
// cuda_step_graph.h), so that a replayed graph serves every position. The kernels read the slot
// when it is not nullptr; `pos0` is then only checked on the host.

// cuda_rope.cu
// cpu_angles: the CPU's angle table (cuda_rope_angles.h), or nullptr to compute them.
void launch_rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                 const int64_t* pos0_slot, const RopeConfig& config, const float* cpu_angles,
                 cudaStream_t stream);

// cuda_attention_inputs.cu: Backend::attention_inputs in one launch (norm weights, freq_factors
// and cells device pointers); the position from pos0_slot where not nullptr.
void launch_attention_inputs(const AttentionInputs& in, const int64_t* pos0_slot,
                             const float* cpu_angles, cudaStream_t stream);

// cuda_attention.cu. `scratch` holds the split-K partial results (grown as needed).
void launch_kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                     int64_t pos0, const int64_t* pos0_slot, cudaStream_t stream);
struct AttentionDevice {
  int multiprocessors = 1;
  size_t max_shared_bytes = 48 * 1024;  // dynamic shared memory a block may opt in to
};
// pos0_slot is honoured only where attention_position_on_device(call.n_tokens).
// cpu_rounding: F16 cells are attended in the CPU backend's order of operations
// (cuda_attention_cpu_order.cu) instead of the split-K / tensor-core kernels.
void launch_attention(const AttentionCall& call, const int64_t* pos0_slot,
                      const AttentionDevice& device, DeviceBuffer& scratch, cudaStream_t stream,
                      bool cpu_rounding = false);
// Decode-sized calls (at most 8 tokens: the decode and generic kernels) may read their position
// from the device; their split of the cells over blocks is planned for the span of visible cells
// rounded up to kAttentionSpanBucket, recorded or not (so that both give the same bits), and a
// recorded step's graph stays valid until the span crosses into the next bucket. Prefill-sized
// calls take the position by value and plan for the exact span.
bool attention_position_on_device(int64_t n_tokens);
constexpr int64_t kAttentionSpanBucket = 256;
// The span the call's split is planned for (what a recorded step's signature holds).
int64_t attention_planned_span(const AttentionCall& call);

// cuda_elementwise.cu. gelu_f16_table: device [65536] halves (see make_gelu_f16_table).
void launch_glu(GluActivation act, float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                const uint16_t* gelu_f16_table, cudaStream_t stream);
// cuda_glu_quantize.cu: launch_glu's values, also quantized into `out` as the decode of a weight
// with that activation format would (activation_block 256: Q8_K; 32: Q8_0, or Q8_1 with_sum).
// n_cols a multiple of activation_block; gate, up and out 16-byte aligned.
void launch_glu_quantize(GluActivation act, float* gate, const float* up, int64_t n_tokens,
                         int64_t n_cols, const uint16_t* gelu_f16_table, int activation_block,
                         bool with_sum, void* out, cudaStream_t stream);
void launch_mul_sigmoid(float* x, const float* gate, int64_t n, cudaStream_t stream);
void launch_add(float* y, const float* x, int64_t n, cudaStream_t stream);
void launch_add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols,
                     cudaStream_t stream);
void launch_scale(float* x, float factor, int64_t n, cudaStream_t stream);
void launch_softcap(float* x, float cap, int64_t n, cudaStream_t stream);
void launch_softmax_rows(float* x, int64_t n_rows, int64_t n_cols, cudaStream_t stream);
// cuda_moe.cu. `rows` are HOST lists (the routing runs on the host); short ones (up to
// kInlineRowEntries) travel in the kernel's parameters, longer ones through `scratch` (grown as
// needed). `weights`: device.
constexpr int64_t kInlineRowEntries = 128;  // 512 bytes of kernel parameters
void launch_gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                        float* dst, DeviceBuffer& scratch, cudaStream_t stream);
void launch_scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                         float* dst, DeviceBuffer& scratch, cudaStream_t stream);
void launch_weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k,
                         int64_t n, float* out, cudaStream_t stream);

// The host table of ggml's f16 GELU (the CPU backend's), to be uploaded once: [65536] halves.
void make_gelu_f16_table(uint16_t* table);

}  // namespace sluice::cuda
