// Internal to backend/cuda: the per-type kernel entry points that quant_matmul.cu dispatches to.
// Each quant_kernels_*.cu instantiates the kernel templates (quant_kernels.cuh) for one family of
// types and hands out their KernelSet. Plain C++ so the dispatcher needs no templates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/cuda/cpu_order.h"
#include "quant/qtype.h"

namespace sluice::cuda::quant {

using cuda::CpuOrder;

struct MatmulArgs {
  const void* w;  // [n_rows, row_bytes] device
  int64_t n_rows, n_cols, row_bytes;
  const float* x;  // [n_tokens, n_cols] device
  float* y;        // [n_tokens, n_rows] device
  int64_t n_tokens;
  void* stream;                     // cudaStream_t
  const void* quantized = nullptr;  // decode: activations already quantized (matmul_quantized)
  CpuOrder cpu_order = CpuOrder::kNone;
  bool cpu_tiled = false;  // with cpu_order: the CPU's op had 8+ tokens (its tiled K matmul)
};

// Decode products of several matrices of one type and n_cols over the same quantized
// activations (matmul_quantized_many): y[i] = w[i] x for i < n.
struct SharedInputArgs {
  const void* const* w;   // [n] device, each [n_rows[i], row_bytes]
  const int64_t* n_rows;  // [n]
  float* const* y;        // [n] device, each [n_tokens, n_rows[i]]
  size_t n;
  int64_t n_cols, row_bytes, n_tokens;
  const void* quantized;  // device, in the type's activation format
  void* stream;           // cudaStream_t
  CpuOrder cpu_order = CpuOrder::kNone;
  bool cpu_tiled = false;
};

struct GetRowsArgs {
  const void* table;  // rows of row_bytes bytes, device
  int64_t n_cols, row_bytes;
  const int32_t* ids;  // [n] device
  int64_t n;
  float* out;  // [n, n_cols] device
  void* stream;
};

// Rows of a weight dequantized to f16 (the prefill's cuBLAS path): out [n_rows, n_cols] halves,
// each element the value the tensor-core tile path rounds to f16.
struct DequantizeArgs {
  const void* w;  // [n_rows, row_bytes] device
  int64_t n_rows, n_cols, row_bytes;
  void* out;  // __half [n_rows, n_cols] device, 16-byte aligned
  void* stream;
};

struct KernelSet {
  bool (*matmul)(const MatmulArgs& args, std::string* error);
  // Decode's activation quantization on its own (args.x, n_cols, n_tokens, stream) into `out`;
  // nullptr for the float types, whose decode reads float activations.
  bool (*quantize)(const MatmulArgs& args, void* out, std::string* error);
  int activation_block;  // elements per activation scale: 256 (Q8_K), 32 (Q8_0 / Q8_1)
  bool (*get_rows)(const GetRowsArgs& args, std::string* error);
  int elems_per_block;  // element granularity of a row (8 for the plain types)
  int weight_align;     // bytes the weight (and table) pointer must be aligned to
  // The products of SharedInputArgs in one launch (up to 4 matrices per launch); nullptr for
  // the float types.
  bool (*matmul_many)(const SharedInputArgs& args, std::string* error);
  bool (*dequantize_half)(const DequantizeArgs& args, std::string* error);
};

// A prefill product of at least kCublasMinTokens tokens through cuBLAS (quant_matmul_cublas.cu):
// the weight dequantized to f16 in row chunks, the activations rounded to f16, one f16 x f16 GEMM
// with float accumulation per chunk. The operands are those of the tile kernel; only the order
// of the float sums differs. False with a one-line message. Built when CMake found cuBLAS
// (SLUICE_HAVE_CUBLAS); without it every prefill takes the tiles.
constexpr int64_t kCublasMinTokens = 33;  // shorter chunks run as decode launches (quant_matmul.cu)
bool cublas_loaded();  // whether libcublas could be opened (once, on the first call)
bool matmul_by_cublas(const KernelSet& set, const MatmulArgs& args, std::string* error);

// The routed experts' products (expert_matmul.h) over a stack of same-shaped matrices: matrix i
// at base + i * stride bytes, each [n_rows, row_bytes]. All pointers are device memory.
struct ExpertMatmulArgs {
  const void* base;
  int64_t stride;  // bytes
  int64_t n_rows, n_cols, row_bytes;
  const int32_t* ids;        // by id: [n] choices; grouped: [n] groups
  const int32_t* offsets;    // grouped: [n + 1] row offsets; by id: unused
  int64_t n;                 // choices (by id, <= 64) or groups
  int64_t n_inputs;          // by id: rows of x, 1 (shared by every choice) or n
  int64_t max_rows;          // grouped: the largest group's rows
  const float* x;            // by id: [n_inputs, n_cols]; grouped: [offsets[n], n_cols]
  float* y;                  // by id: [n, n_rows]; grouped: [offsets[n], n_rows]
  void* stream;              // cudaStream_t
  const void* xq = nullptr;  // by id: x already quantized (expert_matmul.h), or nullptr
};

struct ExpertKernelSet {
  bool (*matmul_by_id)(const ExpertMatmulArgs& args, std::string* error);
  bool (*matmul_grouped)(const ExpertMatmulArgs& args, std::string* error);
};

// Bytes of decode's quantized activations (quant_int8_matvec.cuh, QuantizedRows): int8 values,
// a float scale per `block` elements, then an int16 sum per 16 (Q8_K; Q8_1's per-block s there).
inline int64_t quantized_rows_bytes(int64_t n_tokens, int64_t n_cols, int block) {
  return n_tokens * n_cols + n_tokens * (n_cols / block) * 4 + n_tokens * (n_cols / 16) * 2;
}

// Device scratch of at least `bytes` for work enqueued on `stream` (a cudaStream_t), reused by
// later calls on the same stream and device (quant_scratch.cu). False with a one-line message
// when CUDA cannot provide it.
bool activation_scratch(void* stream, int64_t bytes, void** out, std::string* error);

// The type families, one instantiation file each so nvcc builds them in parallel. A family's
// lookup (quant_kernels_*.cu, quant_expert_kernels_*.cu) is Family::find<Make>(type): the set
// Make::of<t>() of the family's type t == type, each made once; nullptr when type is not one of
// them. Make: `using Set = …; template <QType t> static constexpr Set of();`.
template <QType... kTypes>
struct TypeFamily {
  template <class Make>
  static const typename Make::Set* find(QType type) {
    static constexpr typename Make::Set kSets[] = {Make::template of<kTypes>()...};
    static constexpr QType kMembers[] = {kTypes...};
    for (size_t i = 0; i < sizeof...(kTypes); ++i) {
      if (kMembers[i] == type) return &kSets[i];
    }
    return nullptr;
  }
};
using FloatFamily = TypeFamily<QType::F32, QType::F16, QType::BF16>;
using LegacyFamily = TypeFamily<QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::Q8_0,
                                QType::IQ4_NL, QType::MXFP4>;
using KFamily = TypeFamily<QType::Q2_K, QType::Q3_K, QType::Q4_K, QType::Q5_K, QType::Q6_K>;
using IqFamily = TypeFamily<QType::IQ2_XXS, QType::IQ2_XS, QType::IQ2_S, QType::IQ3_XXS,
                            QType::IQ3_S, QType::IQ1_S, QType::IQ1_M, QType::IQ4_XS>;

// nullptr when the family does not hold `type`.
const KernelSet* kernel_set_float(QType type);   // F32, F16, BF16
const KernelSet* kernel_set_legacy(QType type);  // Q4_0 .. Q8_0, IQ4_NL, MXFP4
const KernelSet* kernel_set_k(QType type);       // Q2_K .. Q6_K
const KernelSet* kernel_set_iq(QType type);      // IQ2_XXS .. IQ4_XS, IQ1_S, IQ1_M

// The experts' kernels of the same families (expert_kernels_*.cu); nullptr outside the family.
const ExpertKernelSet* expert_kernel_set_float(QType type);
const ExpertKernelSet* expert_kernel_set_legacy(QType type);
const ExpertKernelSet* expert_kernel_set_k(QType type);
const ExpertKernelSet* expert_kernel_set_iq(QType type);

}  // namespace sluice::cuda::quant
