// Mixture-of-Experts feed-forward block: the router picks n_expert_used experts per token; each
// chosen expert runs its gated FFN on the tokens routed to it (layer-major: every expert the
// chunk needs is acquired once, for all its tokens); the outputs are weighted and summed per
// token in selection order — llama.cpp's order — so the result does not depend on where the
// expert weights came from or when they arrived. Optional shared experts (a dense gated FFN
// run on every token) are the caller's. Knows no architecture and no I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "experts/expert_layout.h"
#include "experts/expert_source.h"
#include "model/blocks/router.h"
#include "model/blocks/trace.h"
#include "model/weights.h"

namespace sluice::model {

struct MoeFfnWeights {
  RouterWeights router;
  RouterConfig config;
  int64_t n_ff = 0;  // per expert
  GluActivation act = GluActivation::kSilu;
  // Per-expert biases (gpt-oss), small enough to stay resident: expert e's rows at e * n_ff
  // (gate, up) and e * n_embd (down), added to that expert's outputs. Empty when none.
  std::vector<float> gate_bias, up_bias, down_bias;
  // Per-expert output scales [n_expert] (ffn_{gate,up,gate_up,down}_exps.scale: Gemma 4's down
  // scale, NVFP4's second-level scale): expert e's matmul output times its scale, right after
  // the matmul as llama.cpp does. A fused gate_up stack takes the up scale. Empty when none.
  std::vector<float> gate_scale, up_scale, down_scale;
  bool fused_gate_up = false;  // ffn_gate_up_exps: one [n_embd, 2 n_ff] matmul, gate rows first
  // > 0: DeepSeek V4's clamped SwiGLU, silu(min(gate, limit)) * clamp(up, ±limit)
  // (Backend::clamp_swiglu). 0: none.
  float swiglu_limit = 0.0f;
};

// Binds blk.<layer>.ffn_gate_inp.weight (+ optional exp_probs_b.bias), the expert stacks
// ffn_{gate,up,down}_exps.weight — or ffn_gate_up_exps.weight + ffn_down_exps.weight, the fused
// form newer llama.cpp converters write — recording the stacks' places in layout.layers[layer],
// and the optional per-expert scales.
MoeFfnWeights bind_moe_ffn(WeightBinder& binder, int64_t layer, int64_t n_embd, int64_t n_ff,
                           const RouterConfig& config, experts::ExpertLayout& layout);

// Binds the biases of a layer whose router and experts have them (gpt-oss), all required:
// blk.<layer>.ffn_gate_inp.bias [n_expert] and ffn_{gate,up,down}_exps.bias [n, n_expert].
void bind_moe_biases(WeightBinder& binder, int64_t layer, int64_t n_embd, MoeFfnWeights& w);

// Activations in the backend's memory; the routing's lists on the host.
struct MoeScratch {
  RouterScratch router;
  BackendArray<float> x_expert;  // [n_batch, n_embd] inputs gathered for one expert
  BackendArray<float> x_normed;  // [n_batch, n_embd] speculation's input
  BackendArray<float> gate, up;  // [n_batch, n_ff]
  BackendArray<float> gate_up;   // [n_batch, 2 n_ff] a fused stack's output
  BackendArray<float> y_expert;  // [n_batch, n_embd] one expert's outputs
  BackendArray<float> outputs;   // [n_batch, n_expert_used, n_embd] per token and choice
  std::vector<int32_t> experts;  // [n_batch * n_expert_used] distinct chosen experts
  size_t window = 0;             // how many of them the current acquire pinned
  std::vector<int32_t> tokens;   // [n_batch] tokens routed to one expert
  std::vector<int32_t> slots;    // [n_batch] their rows of `outputs` (token * k + choice)
  std::vector<int32_t> halves;  // [2 n_batch] 0, 2, 4 … then 1, 3, 5 …: a fused output's halves
  int64_t n_batch = 0;
  // The stacked paths (a source with stacks, on any backend: a GPU sets them up in reserve(),
  // the host at the first layer with stacks unless host_stacks is off): the experts multiplied
  // by stack index, many per launch. Decode keeps the choices in backend memory; with
  // choose_on_backend (a GPU: no round trip to the host) they are made there when the source
  // needs no acquire. Prefill groups the routed rows by expert.
  bool stacked = false;
  bool choose_on_backend = false;  // reserve() on a backend whose memory is not the host's
  bool host_stacks = true;         // false: the host keeps the per-expert path (a test's reference)
  bool selected_on_backend = false;              // this call's choices were made on the backend
  BackendArray<int32_t> choice_ids;              // [n_batch * k] stack indices of the choices
  BackendArray<float> choice_weights;            // [n_batch * k] their weights
  BackendArray<float> grouped_in, grouped_out;   // [n_batch * k, n_embd] rows by expert
  BackendArray<float> grouped_gate, grouped_up;  // [n_batch * k, n_ff]
  std::vector<int32_t> group_ids;                // stack index of each group's expert
  std::vector<int64_t> group_offsets;            // first row of each group, then the end
  std::vector<int32_t> row_tokens, row_slots;    // [n_batch * k] each grouped row's token, output
  std::vector<int32_t> row_experts;              // [n_batch * k] each grouped row's expert id
  // [n_batch * k] expert ids of the stacked rows (row_experts, or a decode token's choices made
  // on the host), for their per-expert bias rows: stack indices need not be expert ids.
  BackendArray<int32_t> expert_ids;
  std::vector<int64_t> bucket_start, bucket_fill;  // [n_expert + 1] each expert's first row
  std::vector<int32_t> bucket_rows;                // [n_batch * k] token * k + choice, by expert
  // Hybrid placement (experts on another backend): that backend's scratch, made on first use,
  // and in it the chunk's rows and their expert sum, [n_batch, n_embd] each.
  std::unique_ptr<MoeScratch> hybrid;
  BackendArray<float> input, sum;
  void reserve(Backend& backend, const MoeFfnWeights& w, int64_t n_embd, int64_t n_batch);
  // The stacked paths' buffers, and stacked = true (reserve() calls it for a GPU, moe_compute
  // on the host; the CPU's ops give the per-expert path's numbers, and a test may set
  // choose_on_backend after it to run a GPU's decode on the CPU).
  void use_stacks(Backend& backend, const MoeFfnWeights& w, int64_t n_embd);
};

// The block in two halves, so a caller can start speculative reads for the next layer after
// this layer's demand reads are queued and before its experts compute:
// moe_route routes x [n_tokens, n_embd] and acquires the chosen experts (misses start loading);
// moe_compute runs them, releases them and writes out [n_tokens, n_embd]. Both get the same
// expert_backend.
//
// On a backend whose memory is not the host's (a GPU) with a source that has stacks
// (ExpertSource::stack), the experts are multiplied by stack index: a decode token's k choices
// in one product per part — chosen on the backend when the source needs no acquire, so the step
// reads nothing back — and a chunk's rows grouped by expert, one product per part for all; the
// per-expert biases (gpt-oss) and output scales (Gemma 4) follow each product as
// Backend::add_expert_bias / scale_expert_rows by expert id. The numbers do not depend on the
// source: a device's slots and the resident file give the same.
void moe_route(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
               int64_t layer, const float* x, int64_t n_tokens, MoeScratch& scratch,
               const Trace& trace, const Backend* expert_backend = nullptr);
// Whether a one-token moe_route / moe_compute of this layer keeps everything on the backend (the
// choice made there, nothing read back), so that a decode step can be recorded.
bool moe_decode_stays_on_backend(const Backend& backend, const MoeFfnWeights& w,
                                 const experts::ExpertSource& source, int64_t layer,
                                 const MoeScratch& scratch, const Backend* expert_backend);

// expert_backend (a host-memory backend other than `backend`: the CPU while the rest runs on the
// GPU, llama.cpp's `-ot exps=CPU`): the routed rows are downloaded, the experts computed there
// from the source's host views (by the stacked paths when the source has stacks: a decode
// token's choices one product per part), and the sum uploaded — the same numbers the expert
// backend computes on its own. nullptr: the experts run on `backend`.
void moe_compute(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
                 int64_t layer, const float* x, int64_t n_tokens, int64_t n_embd,
                 MoeScratch& scratch, float* out, const Trace& trace,
                 Backend* expert_backend = nullptr);

// Speculation, while this layer's experts load and compute: normalises x [n_tokens, n_embd]
// (the hidden state as it is now) with the next layer's FFN norm, routes it with the next
// layer's router and asks the source to prefetch the choices. Decode steps only: on the
// Qwen3-30B-A3B-shaped benchmark (docs/BENCHMARKS.md) guesses made 62% right gave decode +36%,
// while guesses for prefill chunks sped nothing up and wasted reads. Uses its own scratch: the
// real routing's numbers are untouched.
void moe_prefetch(Backend& backend, const MoeFfnWeights& next, const std::vector<float>& next_norm,
                  float norm_eps, experts::ExpertSource& source, int64_t next_layer, const float* x,
                  int64_t n_tokens, int64_t n_embd, MoeScratch& spec_scratch);

}  // namespace sluice::model
