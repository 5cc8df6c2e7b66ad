// Multi-head latent attention, step for step as llama.cpp's deepseek2 graph with is_mla (the
// split attn_k_b / attn_v_b form): the latent is normed after the rotary parts are split off,
// the queries are [absorbed latent | roped part] and the cached key [latent | roped part].
#include "model/blocks/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace sluice::model {
namespace {

// dst[t * dst_stride ..+ n] = src[t * src_stride ..+ n] for t < n_tokens.
void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t n,
               int64_t n_tokens) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::memcpy(dst + t * dst_stride, src + t * src_stride, size_t(n) * sizeof(float));
  }
}

// A Hugging Face snapshot's per-head K and V up-projections (model/hf_snapshot.cpp): V as it is,
// K ([kv_lora, head_dim_nope] each) transposed element by element into w.k_b_storage.
void bind_hf_kv_b(WeightBinder& binder, int64_t layer, const MlaShape& s, MlaWeights& w) {
  std::vector<MatrixView> k_t;
  for (int64_t h = 0; h < s.n_head; ++h) {
    const std::string k = "attn_k_b_t." + std::to_string(h) + ".weight";
    const std::string v = "attn_v_b." + std::to_string(h) + ".weight";
    k_t.push_back(binder.matrix(layer_tensor(layer, k.c_str()), s.kv_lora_rank, s.head_dim_nope));
    w.wv_b.push_back(binder.matrix(layer_tensor(layer, v.c_str()), s.kv_lora_rank, s.head_dim_v));
  }
  const QType type = k_t[0].type;
  const size_t element = type == QType::F32 ? 4 : type == QType::F16 || type == QType::BF16 ? 2 : 0;
  if (element == 0) {
    fail("blk.", layer, ".attn_k_b_t: type ", qtype_name(type), " cannot be transposed at load");
  }
  const size_t n = size_t(s.kv_lora_rank * s.head_dim_nope);
  w.k_b_storage.resize(size_t(s.n_head) * n * element);
  for (int64_t h = 0; h < s.n_head; ++h) {
    if (k_t[size_t(h)].type != type) fail("blk.", layer, ".attn_k_b_t: heads of several types");
    const uint8_t* src = static_cast<const uint8_t*>(k_t[size_t(h)].data);
    uint8_t* dst = w.k_b_storage.data() + size_t(h) * n * element;
    // src: head_dim_nope rows of kv_lora; dst: kv_lora rows of head_dim_nope.
    for (int64_t i = 0; i < s.head_dim_nope; ++i) {
      for (int64_t r = 0; r < s.kv_lora_rank; ++r) {
        std::memcpy(dst + size_t(r * s.head_dim_nope + i) * element,
                    src + size_t(i * s.kv_lora_rank + r) * element, element);
      }
    }
  }
  for (int64_t h = 0; h < s.n_head; ++h) {
    w.wk_b.push_back(MatrixView{type, w.k_b_storage.data() + size_t(h) * n * element,
                                s.head_dim_nope, s.kv_lora_rank});
  }
}

}  // namespace

MlaWeights bind_mla_attention(WeightBinder& binder, int64_t layer, const MlaShape& s) {
  MlaWeights w;
  const int64_t q_dim = s.n_head * s.head_dim_q();
  if (s.q_lora_rank > 0) {
    w.wq_a = binder.matrix(layer_tensor(layer, "attn_q_a.weight"), s.n_embd, s.q_lora_rank);
    w.q_a_norm = binder.vector(layer_tensor(layer, "attn_q_a_norm.weight"), s.q_lora_rank);
    w.wq_b = binder.matrix(layer_tensor(layer, "attn_q_b.weight"), s.q_lora_rank, q_dim);
  } else {
    w.wq = binder.matrix(layer_tensor(layer, "attn_q.weight"), s.n_embd, q_dim);
  }
  w.wkv_a = binder.matrix(layer_tensor(layer, "attn_kv_a_mqa.weight"), s.n_embd,
                          s.kv_lora_rank + s.n_rot);
  w.kv_a_norm = binder.vector(layer_tensor(layer, "attn_kv_a_norm.weight"), s.kv_lora_rank);
  if (binder.has(layer_tensor(layer, "attn_kv_b.weight")) &&
      !binder.has(layer_tensor(layer, "attn_k_b.weight"))) {
    fail("blk.", layer,
         ".attn_kv_b.weight: the combined MLA up-projection of older conversions is "
         "not supported; convert the model again (split attn_k_b / attn_v_b)");
  }
  if (!binder.has(layer_tensor(layer, "attn_k_b.weight")) &&
      binder.has(layer_tensor(layer, "attn_k_b_t.0.weight"))) {
    bind_hf_kv_b(binder, layer, s, w);
  } else {
    w.wk_b = binder.matrix_stack(layer_tensor(layer, "attn_k_b.weight"), s.head_dim_nope,
                                 s.kv_lora_rank, s.n_head);
    w.wv_b = binder.matrix_stack(layer_tensor(layer, "attn_v_b.weight"), s.kv_lora_rank,
                                 s.head_dim_v, s.n_head);
  }
  w.wo =
      binder.matrix(layer_tensor(layer, "attn_output.weight"), s.n_head * s.head_dim_v, s.n_embd);
  return w;
}

void MlaScratch::reserve(const MlaShape& s, int64_t n_batch) {
  const int64_t dk = s.kv_lora_rank + s.n_rot;
  q_a.resize(size_t(n_batch * s.q_lora_rank));
  q.resize(size_t(n_batch * s.n_head * s.head_dim_q()));
  kv.resize(size_t(n_batch * dk));
  q_pe.resize(size_t(n_batch * s.n_head * s.n_rot));
  k_pe.resize(size_t(n_batch * s.n_rot));
  q_head.resize(size_t(n_batch * std::max(s.head_dim_nope, s.kv_lora_rank)));
  head.resize(size_t(n_batch * std::max(s.kv_lora_rank, s.head_dim_v)));
  q_mqa.resize(size_t(n_batch * s.n_head * dk));
  k_row.resize(size_t(n_batch * dk));
  v_row.resize(size_t(n_batch * s.kv_lora_rank));
  latent.resize(size_t(n_batch * s.n_head * s.kv_lora_rank));
  attn.resize(size_t(n_batch * s.n_head * s.head_dim_v));
}

// Everything before the cache write: the queries attention reads (scratch.q_mqa) and the key and
// value rows the cache stores (scratch.k_row, scratch.v_row).
void mla_project(Backend& backend, const MlaWeights& w, const MlaShape& s, const RopeConfig& rope,
                 int64_t layer, const float* x, int64_t n, std::span<const SequenceRun> sequences,
                 MlaScratch& m, const Trace& trace) {
  const int64_t n_head = s.n_head, nope = s.head_dim_nope, n_rot = s.n_rot;
  const int64_t lora = s.kv_lora_rank, dq = s.head_dim_q();
  const int64_t dk = lora + n_rot;  // the cached key row
  float* q = m.q.data();
  if (s.q_lora_rank > 0) {
    backend.matmul(w.wq_a, x, m.q_a.data(), n);
    backend.rms_norm(m.q_a.data(), w.q_a_norm.data(), m.q_a.data(), n, s.q_lora_rank, s.norm_eps);
    backend.matmul(w.wq_b, m.q_a.data(), q, n);
  } else {
    backend.matmul(w.wq, x, q, n);
  }
  trace("q", layer, q, n_head * dq);
  float* kv = m.kv.data();
  backend.matmul(w.wkv_a, x, kv, n);
  trace("kv_cmpr_pe", layer, kv, dk);

  // The rotary parts, gathered into whole heads of n_rot for the rotation.
  copy_rows(q + nope, dq, m.q_pe.data(), n_rot, n_rot, n * n_head);
  copy_rows(kv + lora, dk, m.k_pe.data(), n_rot, n_rot, n);
  for (const SequenceRun& run : sequences) {
    backend.rope(m.q_pe.data() + run.row0 * n_head * n_rot, run.n_tokens, n_head, n_rot, run.pos0,
                 rope);
    backend.rope(m.k_pe.data() + run.row0 * n_rot, run.n_tokens, 1, n_rot, run.pos0, rope);
  }
  trace("q_pe", layer, m.q_pe.data(), n_head * n_rot);
  trace("k_pe", layer, m.k_pe.data(), n_rot);

  // Cached rows: key [normed latent | roped key part], value the normed latent itself (llama.cpp
  // stores the key alone and reads the value as a view of its first kv_lora_rank elements).
  for (int64_t t = 0; t < n; ++t) {
    backend.rms_norm(kv + t * dk, w.kv_a_norm.data(), m.k_row.data() + t * dk, 1, lora, s.norm_eps);
  }
  copy_rows(m.k_pe.data(), n_rot, m.k_row.data() + lora, dk, n_rot, n);
  copy_rows(m.k_row.data(), dk, m.v_row.data(), lora, lora, n);

  // Queries [absorbed | roped]: each head's non-rotary part taken into latent space by its
  // attn_k_b.
  for (int64_t h = 0; h < n_head; ++h) {
    copy_rows(q + h * dq, n_head * dq, m.q_head.data(), nope, nope, n);
    backend.matmul(w.wk_b[size_t(h)], m.q_head.data(), m.head.data(), n);
    copy_rows(m.head.data(), lora, m.q_mqa.data() + h * dk, n_head * dk, lora, n);
  }
  copy_rows(m.q_pe.data(), n_rot, m.q_mqa.data() + lora, dk, n_rot, n * n_head);
  trace("Qcur", layer, m.q_mqa.data(), n_head * dk);
  trace("Kcur", layer, m.k_row.data(), dk);
  trace("Vcur", layer, m.v_row.data(), lora);
}

void mla_attend(Backend& backend, const MlaShape& s, float scale,
                std::span<const SequenceRun> sequences, int64_t layer, MlaScratch& m,
                KeySelection* keys) {
  const int64_t n_head = s.n_head, lora = s.kv_lora_rank;
  const int64_t dk = lora + s.n_rot;
  for (const SequenceRun& run : sequences) {
    const KvLayerView kv_layer = run.kv->layer(layer);
    backend.kv_store(kv_layer, m.k_row.data() + run.row0 * dk, m.v_row.data() + run.row0 * lora,
                     run.n_tokens, run.pos0);
    AttentionCall call;
    call.q = m.q_mqa.data() + run.row0 * n_head * dk;
    call.out = m.latent.data() + run.row0 * n_head * lora;
    call.n_tokens = run.n_tokens;
    call.n_head = n_head;
    call.pos0 = run.pos0;
    call.scale = scale;
    call.kv = kv_layer;
    if (keys != nullptr) {
      attend_selected(backend, call, *keys, run.row0);
    } else {
      backend.attention(call);
    }
  }
}

void mla_output(Backend& backend, const MlaWeights& w, const MlaShape& s, int64_t layer,
                int64_t n_tokens, MlaScratch& m, float* out, const Trace& trace) {
  const int64_t n = n_tokens, n_head = s.n_head, lora = s.kv_lora_rank, dv = s.head_dim_v;
  // Each head's latent output through its attn_v_b.
  for (int64_t h = 0; h < n_head; ++h) {
    copy_rows(m.latent.data() + h * lora, n_head * lora, m.q_head.data(), lora, lora, n);
    backend.matmul(w.wv_b[size_t(h)], m.q_head.data(), m.head.data(), n);
    copy_rows(m.head.data(), dv, m.attn.data() + h * dv, n_head * dv, dv, n);
  }
  trace("kqv_out", layer, m.attn.data(), n_head * dv);
  backend.matmul(w.wo, m.attn.data(), out, n);
  trace("attn_out", layer, out, s.n_embd);
}

void mla_attention(Backend& backend, const MlaWeights& w, const MlaShape& s, const RopeConfig& rope,
                   float scale, std::span<const SequenceRun> sequences, int64_t layer,
                   const float* x, int64_t n_tokens, MlaScratch& m, float* out,
                   const Trace& trace) {
  mla_project(backend, w, s, rope, layer, x, n_tokens, sequences, m, trace);
  mla_attend(backend, s, scale, sequences, layer, m, nullptr);
  mla_output(backend, w, s, layer, n_tokens, m, out, trace);
}

}  // namespace sluice::model
