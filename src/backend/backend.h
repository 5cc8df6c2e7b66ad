// Backend: the operations a forward pass is written against — matmul of a quantized weight by
// activation rows, embedding lookup, norms, RoPE, attention over a KV cache, element-wise
// activations, MoE gather / scatter. model/ calls only this interface; cpu/ implements it (the
// reference) and cuda/ on an NVIDIA GPU. Knows no architecture, file or tensor name.
//
// Memory. Every buffer an op reads as activations or writes (activations, KV cells, logits) is
// the backend's own memory: allocated by allocate(), host memory for the CPU, device memory for
// a GPU, moved to and from the host only by upload() / download(). Weight arguments — MatrixView
// data, norm weights, biases, freq_factors, sinks — may instead be host memory that stays
// unchanged while the backend lives (the mapped model file, the model's float vectors): a GPU
// backend copies each to the device on first use and keeps the copy. Index and weight lists
// that the host computes (the MoE routing) are passed as host memory, as each op says.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/expert_selection.h"
#include "quant/qtype.h"

namespace sluice {

// Recorded steps so far (Backend::begin_recorded_step) and where their host time went.
struct RecordedStepTimes {
  uint64_t captured = 0, replayed = 0;
  double walk_seconds = 0;      // from begin to end: queueing (or checking) the step's ops
  double graph_seconds = 0;     // instantiating or updating captured graphs
  double run_seconds = 0;       // launching a step and waiting for it
  double download_seconds = 0;  // copying its downloads from staging to their destinations
};

// A 2-D weight: n_rows rows of n_cols elements, each row row_bytes(type, n_cols) bytes.
struct MatrixView {
  QType type = QType::F32;
  const void* data = nullptr;
  int64_t n_cols = 0;  // GGUF ne[0]: the reduction length
  int64_t n_rows = 0;  // GGUF ne[1]: outputs
};

// Same-shaped matrices one after another (one part of a layer's routed experts, or a device's
// expert slots): matrix i at data + i * stride bytes, i < count.
struct ExpertStack {
  QType type = QType::F32;
  const void* data = nullptr;
  int64_t stride = 0;  // bytes
  int64_t count = 0;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  MatrixView matrix(int64_t i) const {
    return {type, static_cast<const char*>(data) + i * stride, n_cols, n_rows};
  }
};

enum class RopeStyle : uint8_t {
  kNone,
  kNormal,  // rotates adjacent pairs (x[2i], x[2i+1]): llama.cpp's NORM, GGUF llama weights
  kNeox,    // rotates halves (x[i], x[i + n_rot/2]): GPT-NeoX, Hugging Face rotate_half
};

struct RopeConfig {
  RopeStyle style = RopeStyle::kNormal;
  int64_t n_rot = 0;  // leading dimensions of each head that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // linear position scaling (1 / rope.scaling.factor)
  const float* freq_factors = nullptr;  // [n_rot / 2] divisors of each frequency (Llama 3.1+)
  // YaRN, as ggml's rope_yarn: ext_factor 0 leaves plain (linear) RoPE. Otherwise dimension
  // pairs below the corrections of beta_fast / beta_slow over n_ctx_orig keep their original
  // frequency, those above are interpolated by freq_scale, with a ramp between. cos and sin are
  // multiplied by attn_factor (and by YaRN's own 1 + 0.1 ln(1/freq_scale) when ext_factor != 0).
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int64_t n_ctx_orig = 0;  // the context the model was trained at (YaRN only)
};

enum class KvElement : uint8_t { kF16, kF32 };  // how KV cells are stored

// One layer's cache as attention reads it: cells of a ring, cell = position % capacity.
struct KvLayerView {
  KvElement type = KvElement::kF16;
  void* k = nullptr;  // [capacity, n_head_kv, head_dim_k]
  void* v = nullptr;  // [capacity, n_head_kv, head_dim_v]
  int64_t capacity = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
};

// What attention_inputs prepares: one sequence's q / k / v rows of n_tokens tokens at positions
// pos0.., the layer's cells and its RoPE. q_norm / k_norm: [head_dim_k] weights of per-head RMS
// norms (Qwen3, Gemma 3), nullptr for none.
struct AttentionInputs {
  float* q = nullptr;        // [n_tokens, n_head, head_dim_k]
  float* k = nullptr;        // [n_tokens, kv.n_head_kv, kv.head_dim_k]
  const float* v = nullptr;  // [n_tokens, kv.n_head_kv, kv.head_dim_v]
  int64_t n_tokens = 0;
  int64_t n_head = 0;
  int64_t pos0 = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float norm_eps = 0.0f;
  RopeConfig rope;
  KvLayerView kv;
};

struct AttentionCall {
  const float* q = nullptr;  // [n_tokens, n_head, head_dim_k], already scaled/roped
  float* out = nullptr;      // [n_tokens, n_head, head_dim_v]
  int64_t n_tokens = 0;
  int64_t n_head = 0;
  int64_t pos0 = 0;      // position of the first token; token t sits at pos0 + t
  int64_t window = 0;    // > 0: a query at p sees positions p - window + 1 .. p; 0: all up to p
  float scale = 1.0f;    // multiplies q·k before the softmax
  float softcap = 0.0f;  // > 0: scores become softcap * tanh(scores / softcap)
  // [n_head] one logit per head that joins each softmax's denominator but has no value (gpt-oss
  // attention sinks); nullptr: none.
  const float* sinks = nullptr;
  KvLayerView kv;
};

// One run of consecutive tokens of one sequence through the gated delta rule (the recurrent
// layers of qwen3next / qwen35 and Kimi Linear), each value head h < n_v_heads over its own
// state matrix S_h [head_dim (value j), head_dim (key i)], tokens in order:
//   S_h *= decay;  delta_j = (v_j - S_h[j] · k) * beta;  S_h[j, i] += k_i * delta_j;
//   out_j = (S_h[j] · q) * scale
// with decay exp(gate[t, h]) for the whole matrix, or with key_gate exp(gate[t, h, i]) per key
// column i (Kimi's per-dimension decay). Value head h reads key head h / (n_v_heads / n_k_heads)
// when grouped, else h % n_k_heads. All pointers are backend memory.
struct DeltaRuleCall {
  const float* q = nullptr;  // token t, key head kh: q[t * qk_stride + kh * head_dim ..]
  const float* k = nullptr;  // likewise with qk_stride
  const float* v = nullptr;  // token t, value head h: v[t * v_stride + h * head_dim ..]
  int64_t qk_stride = 0;
  int64_t v_stride = 0;
  const float* beta = nullptr;  // [n_tokens, n_v_heads] write strengths
  // key_gate false: [n_tokens, n_v_heads] log decays; true: [n_tokens, n_v_heads, head_dim].
  const float* gate = nullptr;
  bool key_gate = false;
  float* state = nullptr;  // [n_v_heads, head_dim, head_dim], read and advanced in place
  float* out = nullptr;    // token t, value head h: out[t * out_stride + h * head_dim ..]
  int64_t out_stride = 0;
  int64_t n_tokens = 0;
  int64_t n_k_heads = 0;
  int64_t n_v_heads = 0;
  int64_t head_dim = 0;
  bool grouped = false;
  float scale = 1.0f;
};

// kGeluTanhF16: tanh-GELU looked up by the input rounded to half, the result a half — what
// llama.cpp's CPU backend computes for GGUF files; kGeluTanh: the exact formula (transformers).
// kSwigluOai: gpt-oss's clamped SwiGLU, min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, ±7) + 1).
enum class GluActivation : uint8_t { kSilu, kGeluTanh, kGeluTanhF16, kSwigluOai };

// What an output gate's logits g become (mul_gate): 1 / (1 + e^-g), or ggml's softplus,
// g > 20 ? g : log(1 + e^g).
enum class GateActivation : uint8_t { kSigmoid, kSoftplus };

class Backend {
 public:
  virtual ~Backend() = default;

  // y[t, r] = sum_c W[r, c] * x[t, c].  x: [n_tokens, n_cols], y: [n_tokens, n_rows].
  // Activations are converted to the weight type's activation format first (Q8_0, Q8_K …).
  virtual void matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) = 0;
  // ys[i] = ws[i] x for the n weights that read the same input (q/k/v, gate/up): a backend may
  // convert the activations once for all of them. The same numbers as one matmul each (the
  // default). (Pointer and count: the CUDA files see this header as C++17, without std::span.)
  virtual void matmul_shared_input(const MatrixView* ws, float* const* ys, size_t n, const float* x,
                                   int64_t n_tokens) {
    for (size_t i = 0; i < n; ++i) matmul(ws[i], x, ys[i], n_tokens);
  }
  // out[i, :] = table row ids[i] as float.  out: [n, table.n_cols]
  virtual void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) = 0;
  // y[r] = x[r] / rms(x[r]) * weight (weight may be nullptr: no scaling). In place allowed.
  virtual void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                        float eps) = 0;
  // The residual add and the next norm of a pre-norm block: x += branch, then
  // xn = rms_norm(x) * weight; x, branch, xn: [n_rows, n]. xn may be branch, not x. The numbers
  // of add then rms_norm (the default); a GPU backend saves a launch and a pass over x.
  virtual void add_rms_norm(float* x, const float* branch, const float* weight, float* xn,
                            int64_t n_rows, int64_t n, float eps) {
    add(x, branch, n_rows * n);
    rms_norm(x, weight, xn, n_rows, n, eps);
  }
  // The residual step of a sandwich block (Gemma), whose branch is normed before it is added:
  //   branch = rms_norm(branch, post_eps) * post_weight;  x += branch;
  //   xn = rms_norm(x, eps) * weight  (skipped when xn is nullptr: the last layer);
  // x, branch, xn: [n_rows, n]. The numbers of exactly those three ops (the default), branch
  // included: it is left holding its norm. xn may be branch (it then ends as xn); neither may be
  // x. Weights may be nullptr (no scaling), as in rms_norm. A GPU backend runs it as one kernel.
  virtual void post_norm_add_rms_norm(float* x, float* branch, const float* post_weight,
                                      float post_eps, const float* weight, float* xn,
                                      int64_t n_rows, int64_t n, float eps) {
    rms_norm(branch, post_weight, branch, n_rows, n, post_eps);
    add(x, branch, n_rows * n);
    if (xn != nullptr) rms_norm(x, weight, xn, n_rows, n, eps);
  }
  // Rotates x: [n_tokens, n_head, head_dim] in place; token t at position pos0 + t.
  virtual void rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                    const RopeConfig& config) = 0;
  // Writes k/v rows of n_tokens tokens at positions pos0.. into the layer's cells.
  virtual void kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                        int64_t pos0) = 0;
  // Self-attention's inputs in one step: the per-head norms of q and k (where given), RoPE of q
  // and k, then k and v into the cells — the numbers of rms_norm, rms_norm, rope, rope, kv_store
  // (the default). A GPU backend runs it as one kernel instead of six.
  virtual void attention_inputs(const AttentionInputs& in) {
    const int64_t dk = in.kv.head_dim_k;
    if (in.q_norm != nullptr)
      rms_norm(in.q, in.q_norm, in.q, in.n_tokens * in.n_head, dk, in.norm_eps);
    if (in.k_norm != nullptr) {
      rms_norm(in.k, in.k_norm, in.k, in.n_tokens * in.kv.n_head_kv, dk, in.norm_eps);
    }
    rope(in.q, in.n_tokens, in.n_head, dk, in.pos0, in.rope);
    rope(in.k, in.n_tokens, in.kv.n_head_kv, dk, in.pos0, in.rope);
    kv_store(in.kv, in.k, in.v, in.n_tokens, in.pos0);
  }
  virtual void attention(const AttentionCall& call) = 0;
  // gate[r, i] = act(gate[r, i]) * up[r, i] over n_rows rows of n_cols.
  virtual void glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
                   int64_t n_cols) = 0;
  // A gated FFN's down product: glu(act, gate, up) (gate keeps its values), then
  // y = w · gate over n_tokens rows of w.n_cols. A GPU backend may quantize the activations as
  // it computes them (one launch fewer per layer); the same numbers as the two ops (the default).
  virtual void glu_matmul(const MatrixView& w, GluActivation act, float* gate, const float* up,
                          float* y, int64_t n_tokens) {
    glu(act, gate, up, n_tokens, w.n_cols);
    matmul(w, gate, y, n_tokens);
  }
  // x[i] *= sigmoid(gate[i]).
  virtual void mul_sigmoid(float* x, const float* gate, int64_t n) = 0;
  // An attention output gate over n_rows rows: first gate[r, j] = act(gate[r, j]) in place for
  // j < n_gate (gate: [n_rows, n_gate]), then x[r, i] *= gate[r, i / (n_cols / n_gate)] for
  // i < n_cols (x: [n_rows, n_cols]; n_gate divides n_cols): one logit per element (n_gate ==
  // n_cols) or one per block of n_cols / n_gate values (per head: Laguna).
  virtual void mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                        int64_t n_gate) = 0;
  // x[r, i] *= weight[i] over n_rows rows of n_cols (ggml_mul by a broadcast row); weight [n_cols]
  // is a weight (host memory that never changes allowed).
  virtual void mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) = 0;
  // y[i] += x[i].
  virtual void add(float* y, const float* x, int64_t n) = 0;
  // x[r, c] += bias[c] for n_rows rows of n_cols.
  virtual void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) = 0;
  virtual void scale(float* x, float factor, int64_t n) = 0;
  // x = cap * tanh(x / cap).
  virtual void softcap(float* x, float cap, int64_t n) = 0;
  // Each row of x [n_rows, n_cols] becomes its softmax, in place (the MoE router's gate).
  virtual void softmax_rows(float* x, int64_t n_rows, int64_t n_cols) = 0;

  // MoE gather / scatter, rows of n_cols floats; `rows` are host memory.
  // dst[i, :] = src[rows[i], :] for i < n.
  virtual void gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                           float* dst) = 0;
  // dst[rows[i], :] = src[i, :] for i < n (rows distinct).
  virtual void scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                            float* dst) = 0;
  // out[t, :] = sum over c of weights[t, c] * y[t, c, :] for t < n_tokens, c < k: each product
  // rounded, then added in the order c = 0, 1, … (llama.cpp's MoE combine). y: [n_tokens, k, n];
  // weights: backend memory.
  virtual void weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k,
                            int64_t n, float* out) = 0;

  // Routed experts without host round trips (a GPU's MoE decode) and grouped (its prefill).
  // select_experts: for t < n_tokens, the experts select_and_weigh_experts (expert_selection.h:
  // s.scoring says whether probs[t, :] [n_expert] are probabilities or logits to take the sigmoid
  // of or to softmax the chosen of) picks, into selected[t, :] and weights[t, :]
  // [n_expert_used]. probs, selected and weights are backend memory; bias [n_expert] is a weight
  // (host memory that never changes allowed) or nullptr.
  virtual void select_experts(const float* probs, const float* bias, int64_t n_tokens,
                              const ExpertSelection& s, int32_t* selected, float* weights) = 0;
  // x[r, :] += table[ids[r], :] for r < n, x [n, n_cols]: each row's expert's row of a per-expert
  // bias table [n_expert, n_cols] (gpt-oss's expert biases on the stacked paths). x and ids
  // (expert ids < n_expert, not stack indices) are backend memory; table is a weight. The float
  // additions of add_bias, so bit-equal to add_bias of each row's bias row.
  virtual void add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids,
                               int64_t n, int64_t n_cols) = 0;
  // x[r, :] *= scales[ids[r]] for r < n, x [n, n_cols]: each row's expert's output scale
  // (Gemma 4's ffn_down_exps.scale) on the stacked paths. x and ids (expert ids < n_expert) are
  // backend memory; scales [n_expert] is a weight. scale's float multiplication, so bit-equal to
  // scale of each row by its expert's factor.
  virtual void scale_expert_rows(float* x, const float* scales, int64_t n_expert,
                                 const int32_t* ids, int64_t n, int64_t n_cols) = 0;
  // y[c, :] = stack.matrix(ids[c]) x_c for c < n: x_c is row 0 of x when shared_input (gate and
  // up of one token), row c otherwise (down). ids: backend memory. The same numbers as a matmul
  // of each matrix on its one row.
  virtual void matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n,
                              const float* x, bool shared_input, float* y) = 0;
  // ys[i] = matmul_experts(stacks[i], ids, n, x, shared input) for the n_stacks parts that read
  // one token's input (gate and up): a backend may convert x once and run them as one loop. The
  // same numbers as one matmul_experts each (the default).
  virtual void matmul_experts_shared_input(const ExpertStack* stacks, float* const* ys,
                                           size_t n_stacks, const int32_t* ids, int64_t n,
                                           const float* x) {
    for (size_t i = 0; i < n_stacks; ++i) matmul_experts(stacks[i], ids, n, x, true, ys[i]);
  }
  // For g < n_groups: rows offsets[g] .. offsets[g + 1] of x multiplied by stack.matrix(ids[g])
  // into the same rows of y [offsets[n_groups], n_rows] (the rows routed to one expert made
  // contiguous). ids and offsets: host lists. The numbers of matmul on each group's rows (a GPU
  // runs a short chunk's rows one by one with its decode kernels, as matmul runs short chunks;
  // longer ones take its many-token path).
  virtual void matmul_expert_groups(const ExpertStack& stack, const int32_t* ids,
                                    const int64_t* offsets, int64_t n_groups, const float* x,
                                    float* y) = 0;

  // The recurrent layers' own steps (cpu/cpu_delta_net_ops.cpp, cuda/cuda_delta_net.cu).
  // x [n_tokens, channels] in place: the SiLU of the causal depthwise convolution of the rows
  // w = conv_state [kernel - 1, channels] followed by x with taps [channels, kernel] (a weight):
  // x[t, c] = silu(sum over j = 0, 1, … < kernel of w[t + j, c] * taps[c, j]), the sum in that
  // order, SiLU as glu's kSilu computes it (times 1). conv_state (backend memory) then holds the
  // last kernel - 1 rows of w, so the next call continues the sequence.
  virtual void causal_conv_silu(float* x, int64_t n_tokens, int64_t channels, const float* taps,
                                int64_t kernel, float* conv_state) = 0;
  // For t < n_tokens, h < n_heads, the head x[t * row_stride + h * head_dim ..+ head_dim] is
  // divided by its L2 norm in place: times 1 / max(sqrt(s), eps), or 1 / sqrt(s + eps) when
  // eps_inside, s the sum of the squares (each rounded to float) accumulated in double, then
  // rounded to float.
  virtual void l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads,
                             int64_t head_dim, float eps, bool eps_inside) = 0;
  // The delta rule's write strengths and decays from their projections, in place:
  // beta[i] = 1 / (1 + e^-beta[i]) for i < n_tokens * n_beta, and gate[t, c] =
  // softplus(gate[t, c] + dt_bias[c]) * a[c / a_group] for t < n_tokens, c < n_gate, with
  // softplus(x) = log(1 + e^x) (x above 20: x). dt_bias [n_gate] and a [n_gate / a_group] are
  // weights.
  virtual void delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate,
                           int64_t n_tokens, const float* dt_bias, const float* a,
                           int64_t a_group) = 0;
  virtual void delta_rule(const DeltaRuleCall& call) = 0;

  // DeepSeek sparse attention (glm-dsa's lightning indexer and the attention it restricts;
  // cpu/cpu_sparse_attention_ops.cpp, cuda/cuda_sparse_attention.cu).
  // LayerNorm of rows of n, ggml's norm: mean = (sum in double) / n, x - mean, variance = (sum
  // in double of each (x - mean)² rounded to float) / n, y = (x - mean) * (1 / sqrt(variance +
  // eps)) * weight + bias, each step rounded to float in that order. weight, bias: [n] weights
  // (nullptr: none). In place allowed.
  virtual void layer_norm(const float* x, const float* weight, const float* bias, float* y,
                          int64_t n_rows, int64_t n, float eps) = 0;
  // The indexer's scores of n_tokens queries at positions pos0.. over the cached keys:
  // scores[t, j] = sum over h = 0, 1, … < n_head of max(q[t, h, :] · k_j, 0) * w[t, h] for
  // j <= pos0 + t, k_j the key in cell j % capacity of `kv` (one KV head of head_dim_k; its v
  // is not read); -inf for later j. q [n_tokens, n_head, head_dim_k], w [n_tokens, n_head],
  // scores [n_tokens, pos0 + n_tokens]: backend memory.
  virtual void indexer_scores(const float* q, const float* w, const KvLayerView& kv,
                              int64_t n_tokens, int64_t n_head, int64_t pos0, float* scores) = 0;
  // For t < n_rows, row t of scores [n_rows, n_cols] sees its first v_t = min(n_cols, pos0 + t
  // + 1) columns: positions[t, :top_k] (int32, backend memory) = the top_k of them by score
  // (the higher first, the lower column on a tie), in ascending order; when v_t <= top_k, every
  // column 0 .. v_t - 1, then -1.
  virtual void top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols, int64_t pos0,
                               int64_t top_k, int32_t* positions) = 0;
  // attention(call) with each query row t attending only to the top_k cells that
  // positions[t, :top_k] (backend memory, ascending, all <= pos0 + t, from top_k_positions)
  // name: the numbers of attention() over a cache holding just those cells, in that order, the
  // query at its last (no window, no sinks).
  virtual void attention_selected(const AttentionCall& call, const int32_t* positions,
                                  int64_t top_k) = 0;

  // DeepSeek V4's own steps (cpu/cpu_deepseek4_ops.cpp, cuda/cuda_deepseek4.cu).
  // Hyper-connection mixers: for t < n_tokens, from mixes [n_tokens, width] with weights scale
  // and base [width], width (2 + n_stream) * n_stream (scale [3]), or n_stream when post and comb
  // are nullptr (the output head's; scale [1]); m = mixes[t], each product rounded before its add:
  //   pre[t, h] = sigmoid(m[h] * scale[0] + base[h]) + eps                  [n_tokens, n_stream]
  //   post[t, h] = sigmoid(m[n_stream + h] * scale[1] + base[n_stream + h]) * 2
  //   comb[t, s, d] = m[2 n_stream + s n_stream + d] * scale[2] + base[2 n_stream + s n_stream + d]
  // then comb[t] (src s, dst d fastest) made doubly stochastic: a softmax over d for each s (exp
  // of x - max, the sum in double, times float(1 / sum)), + eps; divide by (Σ_s in double, as
  // float) + eps for each d; then iterations - 1 rounds of the same over d for each s, then over s
  // for each d. sigmoid(x) = 1 / (1 + e^-x).
  virtual void hyper_mix(const float* mixes, const float* scale, const float* base,
                         int64_t n_tokens, int64_t n_stream, int64_t iterations, float eps,
                         float* pre, float* post, float* comb) = 0;
  // x[t, i] = streams[t, 0, i] * weights[t, 0] + streams[t, 1, i] * weights[t, 1] + …, each
  // product rounded, added in stream order. streams [n_tokens, n_stream, n_embd], weights
  // [n_tokens, n_stream], x [n_tokens, n_embd].
  virtual void hyper_fold(const float* streams, const float* weights, int64_t n_tokens,
                          int64_t n_stream, int64_t n_embd, float* x) = 0;
  // out[t, d, i] = branch[t, i] * post[t, d] + streams[t, 0, i] * comb[t, 0, d] + streams[t, 1,
  // i] * comb[t, 1, d] + …, each product rounded, added in that order. branch [n_tokens, n_embd],
  // post [n_tokens, n_stream], comb [n_tokens, n_stream, n_stream], streams and out [n_tokens,
  // n_stream, n_embd]; out does not overlap streams.
  virtual void hyper_expand(const float* branch, const float* post, const float* comb,
                            const float* streams, int64_t n_tokens, int64_t n_stream,
                            int64_t n_embd, float* out) = 0;
  // DeepSeek V4's SwiGLU clamp, in place for i < n: gate[i] = min(gate[i], limit), up[i] =
  // min(max(up[i], -limit), limit).
  virtual void clamp_swiglu(float* gate, float* up, int64_t n, float limit) = 0;
  // DeepSeek V4's KV compressor over one run of n_tokens tokens at positions pos0 …: token t's
  // row is (kv[t, :width], score[t, :width] + ape[(pos0 + t) % ratio, :width]) (ape a weight).
  // Every block b of ratio positions whose last position the run reaches (b from pos0 / ratio
  // to (pos0 + n_tokens) / ratio, exclusive) writes keys[b - pos0 / ratio, c] for c < head_dim:
  // entries e of a softmax — overlap: e < ratio the rows of block b - 1 through channel c (for
  // b = 0: value 0, score -inf), e >= ratio the rows of block b through channel head_dim + c;
  // else the rows of block b through channel c — key = Σ_e in double of value_e * (exp(score_e -
  // max) * float(1 / Σ_e exp in double)), each product rounded, the sum rounded to float. Rows
  // of positions before pos0 come from state, a ring [span, 2 width] (position p at p % span;
  // span = 2 ratio when overlapping, else ratio); afterwards the ring holds the run's rows too.
  // width = 2 head_dim when overlapping, else head_dim. kv, score, state, keys: backend memory.
  virtual void kv_compress(const float* kv, const float* score, const float* ape, float* state,
                           int64_t n_tokens, int64_t pos0, int64_t ratio, int64_t head_dim,
                           bool overlap, float* keys) = 0;
  // dst cell i = the key cell (n_head_kv * head_dim_k elements of kv.type) in cell cells[i] %
  // capacity of kv, for i < n; cells (int32, >= 0) and dst: backend memory.
  virtual void gather_key_cells(const KvLayerView& kv, const int32_t* cells, int64_t n,
                                void* dst) = 0;

  // Whether the backend's memory is host memory (the CPU): then a pointer from allocate() may
  // also be read and written directly, and upload / download are plain copies.
  virtual bool host_memory() const { return true; }
  // `bytes` of zeroed backend memory, aligned to 64 bytes; throws sluice::Error when there is
  // not enough. Released by deallocate (nullptr allowed).
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  // Host → backend memory; the host buffer may be reused as soon as the call returns.
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  // Backend → host memory, after every op queued before it: the bytes are there on return.
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  // Within backend memory, ordered after the ops queued before it (ranges do not overlap).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Within backend memory: dst[r * dst_stride + c] = src[r * src_stride + c] for r < n_rows,
  // c < n_cols (strides in floats): a column block of rows moved (the rotary part of each head,
  // one half of an interleaved projection). Ranges do not overlap.
  virtual void copy_strided_rows(const float* src, int64_t src_stride, float* dst,
                                 int64_t dst_stride, int64_t n_rows, int64_t n_cols) = 0;
  // Waits until every op queued so far has finished (a no-op where ops run synchronously).
  virtual void synchronize() {}
  // A hint: host memory [p, p + bytes), unchanged while the backend lives, will be uploaded from
  // often (the host tier of the routed experts behind a GPU's slots). A GPU backend may
  // page-lock it, so that those copies run at the bus's full rate and need not be waited for.
  // True when it did; nothing else changes either way.
  virtual bool pin_host_memory(const void* p, size_t bytes) {
    (void)p, (void)bytes;
    return false;
  }
  // Host memory [p, p + bytes) that downloads will write into, often (a session's logits row):
  // a GPU backend may page-lock it so that its copies (and a recorded step's) land there
  // directly instead of through a staging area. True when it did; the caller then calls
  // unpin_host_output(p) before freeing the memory. Nothing else changes either way.
  virtual bool pin_host_output(void* p, size_t bytes) {
    (void)p, (void)bytes;
    return false;
  }
  virtual void unpin_host_output(void* p) noexcept { (void)p; }
  // Copies ahead of need (a GPU's expert slots filled for the next layer while this one
  // computes): upload_ahead copies host memory on a side channel that starts once every op
  // queued before it has run and overlaps the ops queued after it; join_ahead() puts every op
  // queued after it behind those copies. The host bytes must stay unchanged until the join (the
  // mapped file). Defaults: a plain upload, nothing to join.
  virtual void upload_ahead(void* dst, const void* host, size_t bytes) { upload(dst, host, bytes); }
  virtual void join_ahead() {}
  // Host → backend memory, `rows` rows of `width` bytes: row r from host + r * host_pitch to
  // dst + r * dst_pitch, as upload_ahead when `ahead`, else as upload (an expert's gate, up and
  // down, each in its own stack of the mapped file, into one slot). A GPU may move them as one
  // transfer, which its bus runs as fast as one contiguous copy. Default: a copy per row.
  virtual void upload_rows(void* dst, size_t dst_pitch, const void* host, size_t host_pitch,
                           size_t width, size_t rows, bool ahead) {
    for (size_t r = 0; r < rows; ++r) {
      void* const row_dst = static_cast<uint8_t*>(dst) + r * dst_pitch;
      const void* const row_host = static_cast<const uint8_t*>(host) + r * host_pitch;
      ahead ? upload_ahead(row_dst, row_host, width) : upload(row_dst, row_host, width);
    }
  }

  // Recorded steps (a GPU backend's CUDA graphs): begin_recorded_step() true means the ops the
  // caller queues next — one whole forward step — are recorded, not run; end_recorded_step()
  // runs them as one unit and completes their downloads. An op that cannot be recorded throws;
  // the caller then calls abort_recorded_step() and runs the step again unrecorded. A step may
  // be recorded only when nothing between begin and end reads a download on the host.
  virtual bool begin_recorded_step() { return false; }
  virtual void end_recorded_step() {}
  virtual void abort_recorded_step() noexcept {}
  // Counts and host-side times of the recorded steps so far; zeros where none are recorded.
  virtual RecordedStepTimes recorded_step_times() const { return {}; }
};

}  // namespace sluice
