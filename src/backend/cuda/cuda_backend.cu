// CudaBackend (cuda_backend.h): validation and dispatch to the launchers of cuda_ops.h and
// quant_matmul.h, all on the backend's stream; weight pointers go through the mirror first.
// Every op starts by handing its signature to the step graph (graph_.replayed): in a replayed
// step it launches nothing. Signatures hold the caller's pointers (host weights as given: the
// mirror's copy of a pointer never changes while a recording is held, only an unrecorded op can
// grow it).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/quant_kernel_set.h"
#include "backend/cuda/quant_matmul.h"
#include "quant/dot_reference.h"
#include "quant/qtype.h"

namespace sluice::cuda {
namespace {

// Selects `device` before the members (the stream) are created on it.
int select_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) fail("cuda: no CUDA device present");
  if (device < 0 || device >= count) fail("cuda: no device ", device, " (", count, " present)");
  check(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

// Bytes of a weight matrix, 0 when its shape is invalid (the call's own checks then report it).
uint64_t matrix_bytes(const MatrixView& w) {
  if (w.n_rows <= 0 || w.n_cols <= 0) return 0;
  const auto row = row_bytes(w.type, uint64_t(w.n_cols));
  return row ? *row * uint64_t(w.n_rows) : 0;
}

uint64_t count_or_zero(int64_t n) {
  return n > 0 ? uint64_t(n) : 0;
}

// Elements per scale of an activation format: Q8_K 256, Q8_0 and Q8_1 32.
int scale_block(QType format) {
  return format == QType::Q8_K ? 256 : 32;
}

// The launchers' form of a producer's quantized output (Q8_1 with its sums).
RowQuantize row_quantize(std::optional<QType> format, void* out) {
  if (!format || out == nullptr) return {};
  return RowQuantize{out, scale_block(*format), *format == QType::Q8_1};
}

// Whether [p, p + bytes) lies inside one of `ranges` (begin → end, not overlapping).
bool inside_one_range(const std::map<uintptr_t, uintptr_t>& ranges, const void* p, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  auto range = ranges.upper_bound(begin);
  if (range == ranges.begin()) return false;
  --range;
  return begin + bytes <= range->second;
}

}  // namespace

CudaBackend::CudaBackend(int device, bool cpu_rounding, CpuOrder cpu_order)
    : device_(select_device(device)),
      cpu_rounding_(cpu_rounding),
      cpu_order_(cpu_rounding ? cpu_order : CpuOrder::kNone) {
  multiprocessors_ = multiprocessor_count();
  max_shared_bytes_ = max_shared_memory_per_block();
  max_copy_pitch_ = max_copy_pitch();
  const char* graphs = std::getenv("SLUICE_CUDA_GRAPHS");
  graphs_enabled_ = graphs == nullptr || std::string(graphs) != "0";
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(as_stream(stream_.handle()));  // errors dropped: destructors never throw
  for (void* p : allocations_) cudaFree(p);
  for (const auto& [begin, end] : pinned_ranges_)
    cudaHostUnregister(reinterpret_cast<void*>(begin));
  for (const auto& [begin, end] : output_ranges_)
    cudaHostUnregister(reinterpret_cast<void*>(begin));
}

bool CudaBackend::pin_host_memory(const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return false;
  // Read-only: the mapped model file is mapped without write permission.
  if (cudaHostRegister(const_cast<void*>(p), bytes, cudaHostRegisterReadOnly) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const auto begin = reinterpret_cast<uintptr_t>(p);
  pinned_ranges_[begin] = begin + bytes;
  return true;
}

bool CudaBackend::pin_host_output(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return false;
  // Fails for memory sharing a page with a range already pinned: the copies then stage.
  if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const auto begin = reinterpret_cast<uintptr_t>(p);
  output_ranges_[begin] = begin + bytes;
  graph_.drop();  // a held recording may stage downloads that could now land directly
  return true;
}

void CudaBackend::unpin_host_output(void* p) noexcept {
  const auto range = output_ranges_.find(reinterpret_cast<uintptr_t>(p));
  if (range == output_ranges_.end()) return;
  // A recording may hold copies into this memory; the next recorded step captures anew.
  graph_.drop();
  cudaStreamSynchronize(as_stream(stream_.handle()));
  cudaHostUnregister(p);
  cudaGetLastError();
  output_ranges_.erase(range);
}

void CudaBackend::matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) {
  const void* xq = prequantized(w.type, x, n_tokens, w.n_cols);
  OpSignature op(OpKind::kMatmul);
  if (graph_.replayed(op.add(w).add(x).add(y).add(n_tokens).add(xq))) return;
  const void* weights = mirror_.resolve(w.data, matrix_bytes(w));
  std::string error;
  const bool ok = xq ? matmul_quantized(w.type, weights, w.n_rows, w.n_cols, xq, y, n_tokens,
                                        stream_.handle(), &error, cpu_order_)
                     : cuda::matmul(w.type, weights, w.n_rows, w.n_cols, x, y, n_tokens,
                                    stream_.handle(), &error, cpu_rounding_, cpu_order_);
  if (!ok) fail(error);
}

void* CudaBackend::shared_activations(const MatrixView& w, int64_t n_tokens) {
  return shared_activations(size_t(quantized_activation_bytes(w.type, w.n_cols, n_tokens)));
}

void* CudaBackend::shared_activations(size_t bytes) {
  if (shared_activations_.size() < bytes) {
    refuse_growth_while_capturing(stream_.handle(), "the shared activations");
  }
  shared_activations_.reserve(bytes);
  return shared_activations_.data();
}

CudaBackend::OutputQuantized CudaBackend::output_quantized(
    const OutputQuantizePlan::Producer& producer) {
  if (producer.n_rows < 1 || producer.n_rows > 8 ||
      reinterpret_cast<uintptr_t>(producer.y) % 16 != 0) {
    return {};
  }
  const std::optional<QType> format = plan_.format_for(producer);
  if (!format) return {};
  const int block = scale_block(*format);
  if (producer.n % block != 0) return {};
  const int64_t bytes = quant::quantized_rows_bytes(producer.n_rows, producer.n, block);
  return {format, shared_activations(size_t(bytes))};
}

bool CudaBackend::producer_replayed(OpSignature& op, const OutputQuantizePlan::Producer& producer,
                                    const OutputQuantized& quantized) {
  op.add(quantized.out).add(uint64_t(quantized.format.value_or(QType::F32)));
  const bool replayed = graph_.replayed(op);
  plan_.produced(producer, quantized.format, quantized.out, graph_.ops_seen());
  if (quantized.out != nullptr) ++quantized_outputs_;
  return replayed;
}

const void* CudaBackend::prequantized(QType type, const float* x, int64_t n_tokens,
                                      int64_t n_cols) {
  if (n_tokens < 1 || n_tokens > 8 || !quantized_decode_supported(type)) return nullptr;
  const std::optional<QType> format = activation_type_for(type);
  if (!format) return nullptr;
  return plan_.quantized_input(x, n_tokens, n_cols, *format, graph_.ops_seen() + 1);
}

void CudaBackend::matmul_shared_input(const MatrixView* ws, float* const* ys, size_t n,
                                      const float* x, int64_t n_tokens) {
  const auto same_format = [&](const MatrixView& w) {
    return quantized_decode_supported(w.type) && w.n_cols == ws[0].n_cols &&
           activation_type_for(w.type) == activation_type_for(ws[0].type);
  };
  if (n < 2 || n_tokens > 8 || !std::all_of(ws, ws + n, same_format)) {
    return Backend::matmul_shared_input(ws, ys, n, x, n_tokens);  // one matmul (op) each
  }
  const void* xq = prequantized(ws[0].type, x, n_tokens, ws[0].n_cols);
  OpSignature op(OpKind::kMatmulSharedInput);
  op.add(uint64_t(n)).add(x).add(n_tokens).add(xq);
  for (size_t i = 0; i < n; ++i) op.add(ws[i]).add(static_cast<const void*>(ys[i]));
  if (graph_.replayed(op)) return;
  std::string error;
  const void* activations = xq;
  if (!xq) {
    void* const quantized = shared_activations(ws[0], n_tokens);
    if (!quantize_activations(ws[0].type, x, ws[0].n_cols, n_tokens, quantized, stream_.handle(),
                              &error)) {
      fail(error);
    }
    activations = quantized;
  }
  // One product launch per weight type (q/k/v of one type: one launch), in the order the
  // types first appear; each output is the bits of a matmul of its matrix.
  for (size_t i = 0; i < n; ++i) {
    const QType type = ws[i].type;
    if (std::any_of(ws, ws + i, [&](const MatrixView& w) { return w.type == type; })) continue;
    constexpr size_t kBatch = 8;  // more matrices of one type: a launch per 8 (4 per kernel)
    const void* batch_w[kBatch];
    int64_t batch_rows[kBatch];
    float* batch_y[kBatch];
    size_t count = 0;
    for (size_t j = i; j < n; ++j) {
      if (ws[j].type != type) continue;
      batch_w[count] = mirror_.resolve(ws[j].data, matrix_bytes(ws[j]));
      batch_rows[count] = ws[j].n_rows;
      batch_y[count++] = ys[j];
      const bool last =
          std::none_of(ws + j + 1, ws + n, [&](const MatrixView& w) { return w.type == type; });
      if (count < kBatch && !last) continue;
      if (!matmul_quantized_many(type, batch_w, batch_rows, count, ws[i].n_cols, activations,
                                 batch_y, n_tokens, stream_.handle(), &error, cpu_order_)) {
        fail(error);
      }
      count = 0;
    }
  }
}

void CudaBackend::get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) {
  if (graph_.replayed(OpSignature(OpKind::kGetRows).add(table).add(ids).add(n).add(out))) return;
  const void* rows = mirror_.resolve(table.data, matrix_bytes(table));
  std::string error;
  if (!cuda::get_rows(table.type, rows, table.n_cols, ids, n, out, stream_.handle(), &error)) {
    fail(error);
  }
}

// The norms: a decode-sized one whose reader learned an activation format also writes its
// output in it (output_quantize_plan.h); the signature holds where and in which format. So does
// glu.
void CudaBackend::rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                           float eps) {
  const OutputQuantizePlan::Producer producer{weight, y, n_rows, n};
  const OutputQuantized quantized = output_quantized(producer);
  OpSignature op(OpKind::kRmsNorm);
  op.add(x).add(weight).add(y).add(n_rows).add(n).add(eps);
  if (producer_replayed(op, producer, quantized)) return;
  launch_rms_norm(x, mirror_.resolve(weight, count_or_zero(n)), y, n_rows, n, eps,
                  as_stream(stream_.handle()), row_quantize(quantized.format, quantized.out));
}

void CudaBackend::add_rms_norm(float* x, const float* branch, const float* weight, float* xn,
                               int64_t n_rows, int64_t n, float eps) {
  const OutputQuantizePlan::Producer producer{weight, xn, n_rows, n};
  const OutputQuantized quantized = output_quantized(producer);
  OpSignature op(OpKind::kAddRmsNorm);
  op.add(x).add(branch).add(weight).add(xn).add(n_rows).add(n).add(eps);
  if (producer_replayed(op, producer, quantized)) return;
  launch_add_rms_norm(x, branch, mirror_.resolve(weight, count_or_zero(n)), xn, n_rows, n, eps,
                      as_stream(stream_.handle()), row_quantize(quantized.format, quantized.out));
}

void CudaBackend::post_norm_add_rms_norm(float* x, float* branch, const float* post_weight,
                                         float post_eps, const float* weight, float* xn,
                                         int64_t n_rows, int64_t n, float eps) {
  const OutputQuantizePlan::Producer producer{weight, xn, n_rows, n};
  const OutputQuantized quantized = xn != nullptr ? output_quantized(producer) : OutputQuantized{};
  OpSignature op(OpKind::kPostNormAddRmsNorm);
  op.add(x).add(branch).add(post_weight).add(post_eps).add(weight).add(xn);
  op.add(n_rows).add(n).add(eps);
  if (producer_replayed(op, producer, quantized)) return;
  launch_post_norm_add_rms_norm(x, branch, mirror_.resolve(post_weight, count_or_zero(n)), post_eps,
                                mirror_.resolve(weight, count_or_zero(n)), xn, n_rows, n, eps,
                                as_stream(stream_.handle()),
                                row_quantize(quantized.format, quantized.out));
}

void CudaBackend::rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                       const RopeConfig& config) {
  const float* angles = cpu_rope_angles(config, pos0 + n_tokens);
  OpSignature op(OpKind::kRope);
  const bool replayed =
      graph_.replayed(op.add(x).add(n_tokens).add(n_head).add(head_dim).add(config));
  const int64_t* slot = graph_.position_slot(pos0);
  if (replayed) return;
  RopeConfig on_device = config;
  on_device.freq_factors = mirror_.resolve(config.freq_factors, count_or_zero(config.n_rot / 2));
  launch_rope(x, n_tokens, n_head, head_dim, pos0, slot, on_device, angles,
              as_stream(stream_.handle()));
}

const float* CudaBackend::cpu_rope_angles(const RopeConfig& config, int64_t end) {
  if (!cpu_rounding_ || config.style == RopeStyle::kNone || config.n_rot == 0) return nullptr;
  if (const float* table = rope_angles_.find(config, end)) return table;
  // Growing waits for the stream, which a recording cannot: the caller runs the step again
  // unrecorded (backend.h).
  if (graph_.recording()) fail("cuda: the CPU's RoPE angles grow, not inside a recorded step");
  graph_.drop();  // a held recording reads the table being replaced
  return rope_angles_.grow(config, end);
}

void CudaBackend::kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                           int64_t pos0) {
  const bool replayed =
      graph_.replayed(OpSignature(OpKind::kKvStore).add(kv).add(k).add(v).add(n_tokens));
  if (pos0 < 0) fail("kv_store: position ", pos0);  // the launcher's check, which a replay skips
  const int64_t* slot = graph_.position_slot(pos0);
  if (replayed) return;
  launch_kv_store(kv, k, v, n_tokens, pos0, slot, as_stream(stream_.handle()));
}

void CudaBackend::attention_inputs(const AttentionInputs& in) {
  const float* angles = cpu_rope_angles(in.rope, in.pos0 + in.n_tokens);
  OpSignature op(OpKind::kAttentionInputs);
  op.add(in.q).add(in.k).add(in.v).add(in.n_tokens).add(in.n_head).add(in.q_norm).add(in.k_norm);
  const bool replayed = graph_.replayed(op.add(in.norm_eps).add(in.rope).add(in.kv));
  if (in.pos0 < 0) fail("attention_inputs: position ", in.pos0);
  const int64_t* slot = graph_.position_slot(in.pos0);
  if (replayed) return;
  AttentionInputs on_device = in;
  on_device.q_norm = mirror_.resolve(in.q_norm, count_or_zero(in.kv.head_dim_k));
  on_device.k_norm = mirror_.resolve(in.k_norm, count_or_zero(in.kv.head_dim_k));
  on_device.rope.freq_factors =
      mirror_.resolve(in.rope.freq_factors, count_or_zero(in.rope.n_rot / 2));
  launch_attention_inputs(on_device, slot, angles, as_stream(stream_.handle()));
}

// Decode-sized calls take their position from the step's parameter table and are recorded with
// the span bucket their split is planned for; larger ones with their exact position.
void CudaBackend::attention(const AttentionCall& call) {
  const bool on_device = attention_position_on_device(call.n_tokens);
  OpSignature op(OpKind::kAttention);
  op.add(call.q).add(call.out).add(call.n_tokens).add(call.n_head).add(call.window);
  op.add(call.scale).add(call.softcap).add(call.sinks).add(call.kv);
  op.add(on_device ? attention_planned_span(call) : call.pos0);
  const bool replayed = graph_.replayed(op);
  if (call.pos0 < 0) fail("attention: position ", call.pos0);
  const int64_t* slot = on_device ? graph_.position_slot(call.pos0) : nullptr;
  if (replayed) return;
  AttentionCall resolved = call;
  resolved.sinks = mirror_.resolve(call.sinks, count_or_zero(call.n_head));
  launch_attention(resolved, slot, AttentionDevice{multiprocessors_, max_shared_bytes_},
                   attention_scratch_, as_stream(stream_.handle()), cpu_rounding_);
}

const uint16_t* CudaBackend::gelu_f16_table() {
  if (gelu_f16_table_.size() == 0) {
    std::vector<uint16_t> table(65536);
    make_gelu_f16_table(table.data());
    DeviceBuffer device_table(table.size() * sizeof(uint16_t));
    copy_to_device(device_table.data(), table.data(), table.size() * sizeof(uint16_t), stream_);
    stream_.synchronize();  // once: `table` dies here
    gelu_f16_table_ = std::move(device_table);
  }
  return gelu_f16_table_.as<const uint16_t>();
}

void CudaBackend::glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
                      int64_t n_cols) {
  const OutputQuantizePlan::Producer producer{up, gate, n_rows, n_cols};
  // The quantizing GLU kernel reads both rows 16 bytes at a time.
  const bool can_quantize = reinterpret_cast<uintptr_t>(up) % 16 == 0;
  const OutputQuantized quantized = can_quantize ? output_quantized(producer) : OutputQuantized{};
  OpSignature op(OpKind::kGlu);
  op.add(uint64_t(act)).add(gate).add(up).add(n_rows).add(n_cols);
  if (producer_replayed(op, producer, quantized)) return;
  const uint16_t* table = act == GluActivation::kGeluTanhF16 ? gelu_f16_table() : nullptr;
  const auto stream = as_stream(stream_.handle());
  if (quantized.out == nullptr) return launch_glu(act, gate, up, n_rows, n_cols, table, stream);
  const RowQuantize q = row_quantize(quantized.format, quantized.out);
  launch_glu_quantize(act, gate, up, n_rows, n_cols, table, q.block, q.with_sum, q.out, stream);
}

void CudaBackend::glu_matmul(const MatrixView& w, GluActivation act, float* gate, const float* up,
                             float* y, int64_t n_tokens) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n_tokens < 1 || n_tokens > 8 || !quantized_decode_supported(w.type) || !aligned(gate) ||
      !aligned(up)) {
    return Backend::glu_matmul(w, act, gate, up, y, n_tokens);  // the glu and matmul ops
  }
  OpSignature op(OpKind::kGluMatmul);
  op.add(w).add(uint64_t(act)).add(gate).add(up).add(y).add(n_tokens);
  if (graph_.replayed(op)) return;
  const uint16_t* table = act == GluActivation::kGeluTanhF16 ? gelu_f16_table() : nullptr;
  void* const activations = shared_activations(w, n_tokens);
  const void* weights = mirror_.resolve(w.data, matrix_bytes(w));
  std::string error;
  if (!glu_quantize_activations(w.type, act, gate, up, w.n_cols, n_tokens, table, activations,
                                stream_.handle(), &error) ||
      !matmul_quantized(w.type, weights, w.n_rows, w.n_cols, activations, y, n_tokens,
                        stream_.handle(), &error, cpu_order_)) {
    fail(error);
  }
}

void CudaBackend::mul_sigmoid(float* x, const float* gate, int64_t n) {
  if (graph_.replayed(OpSignature(OpKind::kMulSigmoid).add(x).add(gate).add(n))) return;
  launch_mul_sigmoid(x, gate, n, as_stream(stream_.handle()));
}

void CudaBackend::add(float* y, const float* x, int64_t n) {
  if (graph_.replayed(OpSignature(OpKind::kAdd).add(y).add(x).add(n))) return;
  launch_add(y, x, n, as_stream(stream_.handle()));
}

void CudaBackend::add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) {
  OpSignature op(OpKind::kAddBias);
  if (graph_.replayed(op.add(x).add(bias).add(n_rows).add(n_cols))) return;
  launch_add_bias(x, mirror_.resolve(bias, count_or_zero(n_cols)), n_rows, n_cols,
                  as_stream(stream_.handle()));
}

void CudaBackend::scale(float* x, float factor, int64_t n) {
  if (graph_.replayed(OpSignature(OpKind::kScale).add(x).add(factor).add(n))) return;
  launch_scale(x, factor, n, as_stream(stream_.handle()));
}

void CudaBackend::softcap(float* x, float cap, int64_t n) {
  if (graph_.replayed(OpSignature(OpKind::kSoftcap).add(x).add(cap).add(n))) return;
  launch_softcap(x, cap, n, as_stream(stream_.handle()));
}

void CudaBackend::softmax_rows(float* x, int64_t n_rows, int64_t n_cols) {
  if (graph_.replayed(OpSignature(OpKind::kSoftmaxRows).add(x).add(n_rows).add(n_cols))) return;
  launch_softmax_rows(x, n_rows, n_cols, as_stream(stream_.handle()));
}

void CudaBackend::gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                              float* dst) {
  if (replayed_row_move(OpKind::kGatherRows, src, rows, n, n_cols, dst)) return;
  launch_gather_rows(src, rows, n, n_cols, dst, routing_scratch_, as_stream(stream_.handle()));
}

void CudaBackend::scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                               float* dst) {
  if (replayed_row_move(OpKind::kScatterRows, src, rows, n, n_cols, dst)) return;
  launch_scatter_rows(src, rows, n, n_cols, dst, routing_scratch_, as_stream(stream_.handle()));
}

void CudaBackend::weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k,
                               int64_t n, float* out) {
  OpSignature op(OpKind::kWeightedSum);
  if (graph_.replayed(op.add(y).add(weights).add(n_tokens).add(k).add(n).add(out))) return;
  launch_weighted_sum(y, weights, n_tokens, k, n, out, as_stream(stream_.handle()));
}

void* CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  check_allocation(cudaMalloc(&p, bytes == 0 ? 1 : bytes), bytes);
  allocations_.insert(p);
  try {
    fill_bytes(p, 0, bytes, stream_);  // ordered before every op that will use p
  } catch (...) {
    deallocate(p);
    throw;
  }
  return p;
}

void CudaBackend::deallocate(void* p) noexcept {
  if (p == nullptr || allocations_.erase(p) == 0) return;
  // A held graph may use p; inside a recorded step, ops queued (or to be replayed) before this
  // call still will: the step cannot run as a graph.
  graph_.fail_step();
  // Kernels queued on the stream may still use p: wait for them explicitly rather than rely on
  // cudaFree's implicit synchronisation, which CUDA does not promise in every case.
  cudaStreamSynchronize(as_stream(stream_.handle()));
  cudaFree(p);
}

bool CudaBackend::begin_recorded_step() {
  if (!graphs_enabled_) return false;
  graph_.begin();
  return true;
}

void CudaBackend::upload(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  graph_.replayed(OpSignature(OpKind::kUpload).add(dst).add(uint64_t(bytes)));
  if (graph_.recording()) return graph_.stage_upload(dst, host, bytes);
  copy_to_device(dst, host, bytes, stream_);
  // From a range pin_host_memory pinned: the bytes never change, nothing to wait for.
  if (inside_one_range(pinned_ranges_, host, bytes)) return;
  // From other pinned memory the copy is asynchronous: the caller may reuse its buffer on
  // return, so wait. Pageable memory (the usual case) has been staged by CUDA already.
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    cudaGetLastError();
  } else if (attributes.type == cudaMemoryTypeHost) {
    stream_.synchronize();
  }
}

void CudaBackend::upload_rows(void* dst, size_t dst_pitch, const void* host, size_t host_pitch,
                              size_t width, size_t rows, bool ahead) {
  // Elsewhere than a pinned range upload's waits and staging apply, and a recorded step stages
  // its uploads; CUDA refuses pitches over the device's limit (2 GiB: a DeepSeek-sized stack):
  // a copy per row.
  const size_t span = rows == 0 ? 0 : (rows - 1) * host_pitch + width;
  if (rows < 2 || graph_.recording() || std::max(host_pitch, dst_pitch) > max_copy_pitch_ ||
      !inside_one_range(pinned_ranges_, host, span)) {
    return Backend::upload_rows(dst, dst_pitch, host, host_pitch, width, rows, ahead);
  }
  if (ahead) {
    return copy_rows_to_device(dst, dst_pitch, host, host_pitch, width, rows,
                               started_ahead_stream());
  }
  graph_.replayed(OpSignature(OpKind::kUpload).add(dst).add(uint64_t(width * rows)));
  copy_rows_to_device(dst, dst_pitch, host, host_pitch, width, rows, stream_);
}

void CudaBackend::download(void* host, const void* src, size_t bytes) {
  // Into pinned output memory a recorded step copies directly, so its address is part of the op.
  const bool direct = bytes != 0 && inside_one_range(output_ranges_, host, bytes);
  OpSignature op(OpKind::kDownload);
  op.add(src).add(uint64_t(bytes)).add(direct ? host : nullptr);
  graph_.replayed(op);
  if (graph_.recording()) {
    return direct ? graph_.direct_download(host, src, bytes)
                  : graph_.stage_download(host, src, bytes);
  }
  if (bytes != 0) copy_to_host(host, src, bytes, stream_);
  stream_.synchronize();
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (graph_.replayed(OpSignature(OpKind::kCopy).add(dst).add(src).add(uint64_t(bytes)))) return;
  if (bytes != 0) copy_on_device(dst, src, bytes, stream_);
}

void CudaBackend::copy_strided_rows(const float* src, int64_t src_stride, float* dst,
                                    int64_t dst_stride, int64_t n_rows, int64_t n_cols) {
  OpSignature op(OpKind::kCopyStridedRows);
  if (graph_.replayed(
          op.add(src).add(src_stride).add(dst).add(dst_stride).add(n_rows).add(n_cols))) {
    return;
  }
  if (n_rows > 0 && n_cols > 0) {
    copy_rows_on_device(dst, size_t(dst_stride) * sizeof(float), src,
                        size_t(src_stride) * sizeof(float), size_t(n_cols) * sizeof(float),
                        size_t(n_rows), stream_);
  }
}

void CudaBackend::synchronize() {
  if (graph_.recording()) fail("cuda: synchronize inside a recorded step (nothing has run yet)");
  stream_.synchronize();
}

// gather_rows / scatter_rows bake their host list into the kernel's parameters: its entries are
// part of the signature. Longer lists go through a device scratch copied from the host list,
// which a graph could not repeat: never recorded.
bool CudaBackend::replayed_row_move(OpKind kind, const float* src, const int32_t* rows, int64_t n,
                                    int64_t n_cols, float* dst) {
  if (graph_.recording() && n > kInlineRowEntries) {
    graph_.drop();
    fail("cuda: ", kind == OpKind::kGatherRows ? "gather_rows" : "scatter_rows", " of ", n,
         " rows (more than ", kInlineRowEntries, ") cannot be recorded");
  }
  OpSignature op(kind);
  op.add(src).add(n_cols).add(dst);
  if (rows != nullptr && n > 0 && n <= kInlineRowEntries) {
    op.add_list(rows, n);
  } else {
    op.add(n);
  }
  return graph_.replayed(op);
}

}  // namespace sluice::cuda
