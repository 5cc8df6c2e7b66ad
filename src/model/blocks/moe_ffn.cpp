// The MoE block: route, acquire the chunk's experts, run each on its tokens, sum in order.
#include "model/blocks/moe_ffn.h"

#include <algorithm>

#include "core/error.h"
#include "quant/dequantize.h"

namespace sluice::model {
namespace {

using experts::ExpertPart;

// The distinct experts among the first n_chosen choices, in order of first choice.
void distinct_experts(const RouterScratch& r, int64_t n_chosen, std::vector<int32_t>& out) {
  out.clear();
  for (int64_t i = 0; i < n_chosen; ++i) {
    const int32_t e = r.selected[size_t(i)];
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
}

// Pins experts[0..n) and puts those already in memory first: they compute while the others
// load. The order changes no numbers.
void acquire_window(experts::ExpertSource& source, int64_t layer, int32_t* experts, size_t n) {
  source.acquire(layer, {experts, n});
  std::partition(experts, experts + n, [&](int32_t e) { return source.ready(layer, e); });
}

// Adds expert's row of a per-expert bias table (if any) to each of the m rows of x.
void add_expert_bias(Backend& backend, const std::vector<float>& bias, int32_t expert, float* x,
                     int64_t m, int64_t n) {
  if (!bias.empty()) backend.add_bias(x, bias.data() + int64_t(expert) * n, m, n);
}

// A [n, n_expert] float tensor of per-expert biases, read whole to float32.
std::vector<float> expert_biases(WeightBinder& binder, const std::string& name, int64_t n,
                                 int64_t n_expert) {
  const MatrixView view = binder.matrix(name, n, n_expert);
  if (!traits_of(view.type).is_float) {
    fail("tensor '", name, "' has type ", qtype_name(view.type), ", expected floating point");
  }
  std::vector<float> values(size_t(n * n_expert));
  dequantize_row(view.type, view.data, values.data(), n * n_expert);
  return values;
}

// Multiplies the m rows of x [m, n] by expert's entry of a per-expert scale table (if any).
void scale_by_expert(Backend& backend, const std::vector<float>& scale, int32_t expert, float* x,
                     int64_t m, int64_t n) {
  if (!scale.empty()) backend.scale(x, scale[size_t(expert)], m * n);
}

// An optional [n_expert] float tensor of per-expert scales, read to float32.
std::vector<float> expert_scales(WeightBinder& binder, const std::string& name, int64_t n_expert) {
  return binder.optional_vector(name, n_expert).value_or(std::vector<float>{});
}

// gate and up [m, n_ff] from the expert's weights: two matmuls, or one fused [m, 2 n_ff] whose
// rows hold the gate half then the up half (llama.cpp's views of the fused result).
void gate_and_up(Backend& backend, const MoeFfnWeights& w, const experts::ExpertWeights& ew,
                 int32_t expert, int64_t m, MoeScratch& s) {
  if (!w.fused_gate_up) {
    const MatrixView ws[] = {ew.part(ExpertPart::kGate), ew.part(ExpertPart::kUp)};
    float* const ys[] = {s.gate.data(), s.up.data()};
    backend.matmul_shared_input(ws, ys, 2, s.x_expert.data(), m);
    scale_by_expert(backend, w.gate_scale, expert, s.gate.data(), m, w.n_ff);
    scale_by_expert(backend, w.up_scale, expert, s.up.data(), m, w.n_ff);
    return;
  }
  backend.matmul(ew.part(ExpertPart::kGateUp), s.x_expert.data(), s.gate_up.data(), m);
  scale_by_expert(backend, w.up_scale, expert, s.gate_up.data(), m, 2 * w.n_ff);
  // Row i of the fused output is rows 2i (gate) and 2i + 1 (up) of n_ff floats.
  s.halves.resize(size_t(2 * m));
  for (int64_t i = 0; i < m; ++i) {
    s.halves[size_t(i)] = int32_t(2 * i);
    s.halves[size_t(m + i)] = int32_t(2 * i + 1);
  }
  backend.gather_rows(s.gate_up.data(), s.halves.data(), m, w.n_ff, s.gate.data());
  backend.gather_rows(s.gate_up.data(), s.halves.data() + m, m, w.n_ff, s.up.data());
}

// Runs one expert's gated FFN on the tokens routed to it and files each output row under
// (token, choice). Biases follow llama.cpp's order: up, gate and down each right after their
// matmul.
void run_expert(Backend& backend, const MoeFfnWeights& w, const experts::ExpertWeights& ew,
                int32_t expert, const float* x, int64_t n_embd, MoeScratch& s) {
  const int64_t k = w.config.n_expert_used;
  int64_t m = 0;
  for (int64_t r = s.bucket_start[size_t(expert)]; r < s.bucket_start[size_t(expert + 1)]; ++r) {
    const int32_t slot = s.bucket_rows[size_t(r)];  // token * k + choice
    s.tokens[size_t(m)] = int32_t(slot / k);
    s.slots[size_t(m)] = slot;
    ++m;
  }
  backend.gather_rows(x, s.tokens.data(), m, n_embd, s.x_expert.data());
  gate_and_up(backend, w, ew, expert, m, s);
  add_expert_bias(backend, w.up_bias, expert, s.up.data(), m, w.n_ff);
  add_expert_bias(backend, w.gate_bias, expert, s.gate.data(), m, w.n_ff);
  if (w.swiglu_limit > 0.0f) {
    backend.clamp_swiglu(s.gate.data(), s.up.data(), m * w.n_ff, w.swiglu_limit);
  }
  backend.glu(w.act, s.gate.data(), s.up.data(), m, w.n_ff);
  backend.matmul(ew.part(ExpertPart::kDown), s.gate.data(), s.y_expert.data(), m);
  scale_by_expert(backend, w.down_scale, expert, s.y_expert.data(), m, n_embd);
  add_expert_bias(backend, w.down_bias, expert, s.y_expert.data(), m, n_embd);
  backend.scatter_rows(s.y_expert.data(), s.slots.data(), m, n_embd, s.outputs.data());
}

}  // namespace

MoeFfnWeights bind_moe_ffn(WeightBinder& binder, int64_t layer, int64_t n_embd, int64_t n_ff,
                           const RouterConfig& config, experts::ExpertLayout& layout) {
  MoeFfnWeights w;
  w.config = config;
  w.n_ff = n_ff;
  const int64_t n_expert = config.n_expert;
  w.router.gate = binder.matrix(layer_tensor(layer, "ffn_gate_inp.weight"), n_embd, n_expert);
  w.router.selection_bias =
      binder.optional_vector(layer_tensor(layer, "exp_probs_b.bias"), n_expert)
          .value_or(std::vector<float>{});
  experts::ExpertLayerLayout& l = layout.layers.at(size_t(layer));
  l.n_expert = n_expert;
  const std::string gate_up = layer_tensor(layer, "ffn_gate_up_exps.weight");
  w.fused_gate_up = binder.has(gate_up);
  if (w.fused_gate_up) {
    l.parts[size_t(ExpertPart::kGateUp)] =
        binder.expert_matrices(gate_up, n_embd, 2 * n_ff, n_expert);
    w.up_scale = expert_scales(binder, layer_tensor(layer, "ffn_gate_up_exps.scale"), n_expert);
  } else {
    l.parts[size_t(ExpertPart::kGate)] =
        binder.expert_matrices(layer_tensor(layer, "ffn_gate_exps.weight"), n_embd, n_ff, n_expert);
    l.parts[size_t(ExpertPart::kUp)] =
        binder.expert_matrices(layer_tensor(layer, "ffn_up_exps.weight"), n_embd, n_ff, n_expert);
    w.gate_scale = expert_scales(binder, layer_tensor(layer, "ffn_gate_exps.scale"), n_expert);
    w.up_scale = expert_scales(binder, layer_tensor(layer, "ffn_up_exps.scale"), n_expert);
  }
  w.down_scale = expert_scales(binder, layer_tensor(layer, "ffn_down_exps.scale"), n_expert);
  l.parts[size_t(ExpertPart::kDown)] =
      binder.expert_matrices(layer_tensor(layer, "ffn_down_exps.weight"), n_ff, n_embd, n_expert);
  return w;
}

void bind_moe_biases(WeightBinder& binder, int64_t layer, int64_t n_embd, MoeFfnWeights& w) {
  const int64_t n_expert = w.config.n_expert;
  w.router.gate_bias = binder.vector(layer_tensor(layer, "ffn_gate_inp.bias"), n_expert);
  w.gate_bias = expert_biases(binder, layer_tensor(layer, "ffn_gate_exps.bias"), w.n_ff, n_expert);
  w.up_bias = expert_biases(binder, layer_tensor(layer, "ffn_up_exps.bias"), w.n_ff, n_expert);
  w.down_bias = expert_biases(binder, layer_tensor(layer, "ffn_down_exps.bias"), n_embd, n_expert);
}

void MoeScratch::reserve(Backend& backend, const MoeFfnWeights& w, int64_t n_embd,
                         int64_t n_batch) {
  const int64_t k = w.config.n_expert_used;
  router.reserve(backend, w.config, n_batch);
  x_expert.resize(backend, size_t(n_batch * n_embd));
  x_normed.resize(backend, size_t(n_batch * n_embd));
  gate.resize(backend, size_t(n_batch * w.n_ff));
  up.resize(backend, size_t(n_batch * w.n_ff));
  if (w.fused_gate_up) gate_up.resize(backend, size_t(n_batch * 2 * w.n_ff));
  y_expert.resize(backend, size_t(n_batch * n_embd));
  outputs.resize(backend, size_t(n_batch * k * n_embd));
  experts.reserve(size_t(n_batch * k));
  tokens.resize(size_t(n_batch));
  slots.resize(size_t(n_batch));
  choice_ids.resize(backend, size_t(n_batch * k));
  choice_weights.resize(backend, size_t(n_batch * k));
  this->n_batch = n_batch;
  stacked = false;
  choose_on_backend = !backend.host_memory();
  if (choose_on_backend) use_stacks(backend, w, n_embd);
  hybrid.reset();
}

void MoeScratch::use_stacks(Backend& backend, const MoeFfnWeights& w, int64_t n_embd) {
  const int64_t rows = n_batch * w.config.n_expert_used;
  grouped_in.resize(backend, size_t(rows * n_embd));
  grouped_out.resize(backend, size_t(rows * n_embd));
  grouped_gate.resize(backend, size_t(rows * w.n_ff));
  grouped_up.resize(backend, size_t(rows * w.n_ff));
  group_ids.reserve(size_t(rows));
  group_offsets.reserve(size_t(rows + 1));
  row_tokens.reserve(size_t(rows));
  row_slots.reserve(size_t(rows));
  row_experts.reserve(size_t(rows));
  expert_ids.resize(backend, size_t(rows));
  stacked = true;
}

namespace {

// A layer's expert stacks, when the stacked path can run it: gate and up apart, and no clamp
// (per-expert biases and scales it applies by id).
struct LayerStacks {
  ExpertStack gate, up, down;
};

bool layer_stacks(const MoeFfnWeights& w, const experts::ExpertSource& source, int64_t layer,
                  LayerStacks& out) {
  if (w.fused_gate_up || w.swiglu_limit > 0.0f) {
    return false;
  }
  return source.stack(layer, ExpertPart::kGate, out.gate) &&
         source.stack(layer, ExpertPart::kUp, out.up) &&
         source.stack(layer, ExpertPart::kDown, out.down);
}

}  // namespace

bool moe_decode_stays_on_backend(const Backend& backend, const MoeFfnWeights& w,
                                 const experts::ExpertSource& source, int64_t layer,
                                 const MoeScratch& s, const Backend* expert_backend) {
  // On the host the choice costs no round trip to keep, and is made there (choose_on_backend
  // off): every expert is then acquired, so the source counts its hits as on the per-expert
  // path.
  LayerStacks stacks;
  return s.choose_on_backend && (expert_backend == nullptr || expert_backend == &backend) &&
         s.stacked && source.always_in_stack() && selects_on_backend(w.config, s.router) &&
         layer_stacks(w, source, layer, stacks);
}

void moe_route(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
               int64_t layer, const float* x, int64_t n_tokens, MoeScratch& s, const Trace& trace,
               const Backend* expert_backend) {
  s.selected_on_backend = n_tokens == 1 && trace.observer == nullptr &&
                          moe_decode_stays_on_backend(backend, w, source, layer, s, expert_backend);
  if (s.selected_on_backend) {
    // Decode from experts that are all in place: the choice never leaves the backend, so the
    // step needs no host round trip (and a GPU can record it).
    route_tokens_on_backend(backend, w.router, w.config, layer, x, 1, s.router, s.choice_ids.data(),
                            s.choice_weights.data());
    return;
  }
  route_tokens(backend, w.router, w.config, layer, x, n_tokens, s.router, trace);
  distinct_experts(s.router, n_tokens * w.config.n_expert_used, s.experts);
  s.window = std::min(s.experts.size(), source.max_acquire());
  acquire_window(source, layer, s.experts.data(), s.window);
}

void moe_prefetch(Backend& backend, const MoeFfnWeights& next, const std::vector<float>& next_norm,
                  float norm_eps, experts::ExpertSource& source, int64_t next_layer, const float* x,
                  int64_t n_tokens, int64_t n_embd, MoeScratch& s) {
  if (!source.wants_prefetch() || n_tokens > 1) return;
  backend.rms_norm(x, next_norm.data(), s.x_normed.data(), n_tokens, n_embd, norm_eps);
  route_tokens(backend, next.router, next.config, next_layer, s.x_normed.data(), n_tokens, s.router,
               {});
  distinct_experts(s.router, n_tokens * next.config.n_expert_used, s.experts);
  source.prefetch(next_layer, s.experts);
}

namespace {

// The chunk's experts on `backend` with s's buffers, then their weighted sum into out.
// Each expert's rows (token * k + choice) in token order, by one counting pass over the choices:
// bucket_rows[bucket_start[e] .. bucket_start[e + 1]).
void bucket_rows_by_expert(const MoeFfnWeights& w, int64_t n_tokens, MoeScratch& s) {
  const int64_t n_chosen = n_tokens * w.config.n_expert_used;
  s.bucket_start.assign(size_t(w.config.n_expert + 1), 0);
  for (int64_t i = 0; i < n_chosen; ++i) ++s.bucket_start[size_t(s.router.selected[size_t(i)] + 1)];
  for (int64_t e = 0; e < w.config.n_expert; ++e)
    s.bucket_start[size_t(e + 1)] += s.bucket_start[size_t(e)];
  s.bucket_fill.assign(s.bucket_start.begin(), s.bucket_start.end() - 1);
  s.bucket_rows.resize(size_t(n_chosen));
  for (int64_t i = 0; i < n_chosen; ++i) {
    s.bucket_rows[size_t(s.bucket_fill[size_t(s.router.selected[size_t(i)])]++)] = int32_t(i);
  }
}

// More experts than the source can pin at once (a long prefill chunk through a small cache):
// windows of them, each acquired (the first by moe_route), run_window(begin, end) over
// s.experts[begin, end), then released.
template <class RunWindow>
void for_each_window(experts::ExpertSource& source, int64_t layer, MoeScratch& s,
                     RunWindow&& run_window) {
  for (size_t begin = 0; begin < s.experts.size();) {
    if (begin > 0) {
      s.window = std::min(s.experts.size() - begin, source.max_acquire());
      acquire_window(source, layer, s.experts.data() + begin, s.window);
    }
    run_window(begin, begin + s.window);
    source.release(layer);
    begin += s.window;
  }
}

// llama.cpp's MoE combine: each (token, choice) output times its weight, summed choice 0, 1, 2 …
void combine_choices(Backend& backend, const MoeFfnWeights& w, int64_t n_tokens, int64_t n_embd,
                     MoeScratch& s, float* out) {
  const int64_t k = w.config.n_expert_used;
  backend.upload(s.choice_weights.data(), s.router.weights.data(),
                 size_t(n_tokens * k) * sizeof(float));
  backend.weighted_sum(s.outputs.data(), s.choice_weights.data(), n_tokens, k, n_embd, out);
}

// The chunk's experts one by one on `backend` with s's buffers, then their weighted sum into out.
void compute_experts(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
                     int64_t layer, const float* x, int64_t n_tokens, int64_t n_embd, MoeScratch& s,
                     float* out) {
  bucket_rows_by_expert(w, n_tokens, s);
  for_each_window(source, layer, s, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const int32_t expert = s.experts[i];
      run_expert(backend, w, source.wait(layer, expert), expert, x, n_embd, s);
    }
  });
  combine_choices(backend, w, n_tokens, n_embd, s, out);
}

// Whether the stacked paths need each row's expert id (biases and scales are per expert).
bool has_per_expert_rows(const MoeFfnWeights& w) {
  return !w.gate_bias.empty() || !w.up_bias.empty() || !w.down_bias.empty() ||
         !w.gate_scale.empty() || !w.up_scale.empty() || !w.down_scale.empty();
}

// The stacked paths' bias step: x [m, n] += each row's expert's row of `table` (if any), the
// experts' ids in backend memory — the per-expert path's add_bias, row by row.
void add_bias_rows(Backend& backend, const MoeFfnWeights& w, const std::vector<float>& table,
                   const int32_t* ids, float* x, int64_t m, int64_t n) {
  if (!table.empty()) backend.add_expert_bias(x, table.data(), w.config.n_expert, ids, m, n);
}

// The stacked paths' scale step: x [m, n] *= each row's expert's scale (if any) — the per-expert
// path's scale_by_expert, row by row.
void scale_rows(Backend& backend, const MoeFfnWeights& w, const std::vector<float>& scales,
                const int32_t* ids, float* x, int64_t m, int64_t n) {
  if (!scales.empty()) backend.scale_expert_rows(x, scales.data(), w.config.n_expert, ids, m, n);
}

// The per-expert steps after the stacked gate / up products [m, n_ff] and after the down
// product [m, n_embd], in the per-expert path's order (gate_and_up's scales, then run_expert's
// up, gate and down biases); ids: each row's expert id, in backend memory.
void after_gate_up(Backend& backend, const MoeFfnWeights& w, const int32_t* ids, float* gate,
                   float* up, int64_t m) {
  scale_rows(backend, w, w.gate_scale, ids, gate, m, w.n_ff);
  scale_rows(backend, w, w.up_scale, ids, up, m, w.n_ff);
  add_bias_rows(backend, w, w.up_bias, ids, up, m, w.n_ff);
  add_bias_rows(backend, w, w.gate_bias, ids, gate, m, w.n_ff);
}
void after_down(Backend& backend, const MoeFfnWeights& w, const int32_t* ids, float* out, int64_t m,
                int64_t n_embd) {
  scale_rows(backend, w, w.down_scale, ids, out, m, n_embd);
  add_bias_rows(backend, w, w.down_bias, ids, out, m, n_embd);
}

// One token on the stacked path: gate and up of the k choices (one shared-input product, the CPU
// runs both as one loop), their scales and bias rows, their GLU, down and its scales and bias
// rows, the weighted sum.
// The choices are in backend memory already, or were made on the host (a source that loads:
// every one acquired, then looked up in its stack).
void compute_decode_stacked(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
                            int64_t layer, const LayerStacks& stacks, const float* x,
                            int64_t n_embd, MoeScratch& s, float* out) {
  const int64_t k = w.config.n_expert_used;
  // Chosen on the backend, the source keeps every expert at stack index id (always_in_stack):
  // the choices are the rows' expert ids too.
  const int32_t* row_expert_ids = s.choice_ids.data();
  if (!s.selected_on_backend) {
    s.row_slots.resize(size_t(k));
    for (int64_t c = 0; c < k; ++c) {
      const int32_t expert = s.router.selected[size_t(c)];
      source.wait(layer, expert);
      s.row_slots[size_t(c)] = source.stack_index(layer, expert);
    }
    backend.upload(s.choice_ids.data(), s.row_slots.data(), size_t(k) * sizeof(int32_t));
    backend.upload(s.choice_weights.data(), s.router.weights.data(), size_t(k) * sizeof(float));
    if (has_per_expert_rows(w)) {
      backend.upload(s.expert_ids.data(), s.router.selected.data(), size_t(k) * sizeof(int32_t));
      row_expert_ids = s.expert_ids.data();
    }
  }
  const ExpertStack gate_up[] = {stacks.gate, stacks.up};
  float* const gate_up_out[] = {s.grouped_gate.data(), s.grouped_up.data()};
  backend.matmul_experts_shared_input(gate_up, gate_up_out, 2, s.choice_ids.data(), k, x);
  after_gate_up(backend, w, row_expert_ids, s.grouped_gate.data(), s.grouped_up.data(), k);
  backend.glu(w.act, s.grouped_gate.data(), s.grouped_up.data(), k, w.n_ff);
  backend.matmul_experts(stacks.down, s.choice_ids.data(), k, s.grouped_gate.data(), false,
                         s.outputs.data());
  after_down(backend, w, row_expert_ids, s.outputs.data(), k, n_embd);
  if (!s.selected_on_backend) source.release(layer);
  backend.weighted_sum(s.outputs.data(), s.choice_weights.data(), 1, k, n_embd, out);
}

// A chunk on the stacked path: per window of acquired experts, the rows routed to them gathered
// expert by expert (tokens in order, as the per-expert path takes them), gate / up / down as one
// grouped product each (each followed by its scales and bias rows, the rows' expert ids uploaded
// once), the results scattered to (token, choice); then the weighted sum.
void compute_grouped(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
                     int64_t layer, const LayerStacks& stacks, const float* x, int64_t n_tokens,
                     int64_t n_embd, MoeScratch& s, float* out) {
  const int64_t k = w.config.n_expert_used;
  bucket_rows_by_expert(w, n_tokens, s);
  for_each_window(source, layer, s, [&](size_t begin, size_t end) {
    s.group_ids.clear();
    s.group_offsets.clear();
    s.row_tokens.clear();
    s.row_slots.clear();
    s.row_experts.clear();
    for (size_t i = begin; i < end; ++i) {
      const int32_t expert = s.experts[i];
      source.wait(layer, expert);
      s.group_ids.push_back(source.stack_index(layer, expert));
      s.group_offsets.push_back(int64_t(s.row_tokens.size()));
      for (int64_t r = s.bucket_start[size_t(expert)]; r < s.bucket_start[size_t(expert + 1)];
           ++r) {
        const int32_t slot = s.bucket_rows[size_t(r)];  // token * k + choice
        s.row_tokens.push_back(int32_t(slot / k));
        s.row_slots.push_back(slot);
        s.row_experts.push_back(expert);
      }
    }
    const int64_t m = int64_t(s.row_tokens.size());
    const int64_t n_groups = int64_t(s.group_ids.size());
    s.group_offsets.push_back(m);
    backend.gather_rows(x, s.row_tokens.data(), m, n_embd, s.grouped_in.data());
    backend.matmul_expert_groups(stacks.gate, s.group_ids.data(), s.group_offsets.data(), n_groups,
                                 s.grouped_in.data(), s.grouped_gate.data());
    backend.matmul_expert_groups(stacks.up, s.group_ids.data(), s.group_offsets.data(), n_groups,
                                 s.grouped_in.data(), s.grouped_up.data());
    const int32_t* row_expert_ids = s.expert_ids.data();
    if (has_per_expert_rows(w)) {
      backend.upload(s.expert_ids.data(), s.row_experts.data(), size_t(m) * sizeof(int32_t));
    }
    after_gate_up(backend, w, row_expert_ids, s.grouped_gate.data(), s.grouped_up.data(), m);
    backend.glu(w.act, s.grouped_gate.data(), s.grouped_up.data(), m, w.n_ff);
    backend.matmul_expert_groups(stacks.down, s.group_ids.data(), s.group_offsets.data(), n_groups,
                                 s.grouped_gate.data(), s.grouped_out.data());
    after_down(backend, w, row_expert_ids, s.grouped_out.data(), m, n_embd);
    backend.scatter_rows(s.grouped_out.data(), s.row_slots.data(), m, n_embd, s.outputs.data());
  });
  combine_choices(backend, w, n_tokens, n_embd, s, out);
}

// The chunk's experts on `backend` with s's buffers into out: by stack index where s is set up
// for it (use_stacks) and the source has stacks — decode only when one acquire holds every
// choice — else one by one.
void compute_routed(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
                    int64_t layer, const float* x, int64_t n_tokens, int64_t n_embd, MoeScratch& s,
                    float* out) {
  LayerStacks stacks;
  if (!s.stacked || !layer_stacks(w, source, layer, stacks)) {
    compute_experts(backend, w, source, layer, x, n_tokens, n_embd, s, out);
  } else if (n_tokens > 1) {
    compute_grouped(backend, w, source, layer, stacks, x, n_tokens, n_embd, s, out);
  } else if (s.selected_on_backend || s.window == s.experts.size()) {
    compute_decode_stacked(backend, w, source, layer, stacks, x, n_embd, s, out);
  } else {
    compute_experts(backend, w, source, layer, x, n_tokens, n_embd, s, out);
  }
}

// On the host (the CPU backend alone, or the hybrid's expert backend), a source with stacks
// (the resident file) takes the stacked paths: a decode token's k choices are one parallel loop
// per part instead of a matmul per matrix, with the same numbers. The buffers are made the first
// time: a streaming cache has no stacks.
void take_host_stacks(Backend& host, const MoeFfnWeights& w, const experts::ExpertSource& source,
                      int64_t layer, int64_t n_embd, MoeScratch& s) {
  LayerStacks stacks;
  if (!s.stacked && s.host_stacks && layer_stacks(w, source, layer, stacks)) {
    s.use_stacks(host, w, n_embd);
  }
}

// The scratch of the expert backend, with this chunk's routing.
MoeScratch& hybrid_scratch(Backend& expert_backend, const MoeFfnWeights& w, int64_t n_embd,
                           MoeScratch& s) {
  if (!expert_backend.host_memory()) {
    fail("MoE experts on another backend need that backend's memory to be the host's");
  }
  if (!s.hybrid || s.hybrid->input.backend() != &expert_backend) {
    s.hybrid = std::make_unique<MoeScratch>();
    s.hybrid->reserve(expert_backend, w, n_embd, s.n_batch);
    s.hybrid->input.resize(expert_backend, size_t(s.n_batch * n_embd));
    s.hybrid->sum.resize(expert_backend, size_t(s.n_batch * n_embd));
  }
  MoeScratch& h = *s.hybrid;
  h.router.selected = s.router.selected;
  h.router.weights = s.router.weights;
  h.experts = s.experts;
  h.window = s.window;
  return h;
}

}  // namespace

void moe_compute(Backend& backend, const MoeFfnWeights& w, experts::ExpertSource& source,
                 int64_t layer, const float* x, int64_t n_tokens, int64_t n_embd, MoeScratch& s,
                 float* out, const Trace& trace, Backend* expert_backend) {
  if (expert_backend == nullptr || expert_backend == &backend) {
    if (backend.host_memory()) take_host_stacks(backend, w, source, layer, n_embd, s);
    compute_routed(backend, w, source, layer, x, n_tokens, n_embd, s, out);
  } else {
    MoeScratch& h = hybrid_scratch(*expert_backend, w, n_embd, s);
    const size_t bytes = size_t(n_tokens * n_embd) * sizeof(float);
    backend.download(h.input.data(), x, bytes);
    take_host_stacks(*expert_backend, w, source, layer, n_embd, h);
    compute_routed(*expert_backend, w, source, layer, h.input.data(), n_tokens, n_embd, h,
                   h.sum.data());
    backend.upload(out, h.sum.data(), bytes);
  }
  trace("ffn_moe_out", layer, out, n_embd);
}

}  // namespace sluice::model
