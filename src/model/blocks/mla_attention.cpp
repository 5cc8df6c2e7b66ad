// Multi-head latent attention, step for step as llama.cpp's deepseek2 graph with is_mla (the
// split attn_k_b / attn_v_b form): the latent is normed after the rotary parts are split off,
// the queries are [absorbed latent | roped part] and the cached key [latent | roped part].
// Every step is a backend op on backend memory (the forward runs on a GPU as it is): column
// blocks move with copy_strided_rows, the per-head products run as one matmul_experts.
#include "model/blocks/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "quant/qtype.h"

namespace sluice::model {
namespace {

// `heads` as one ExpertStack when they are same-typed, same-shaped and one after another with no
// gap; count 0 otherwise.
ExpertStack contiguous_stack(const std::vector<MatrixView>& heads) {
  if (heads.empty()) return {};
  const MatrixView& first = heads.front();
  const auto bytes = row_bytes(first.type, uint64_t(first.n_cols));
  if (!bytes) return {};
  const int64_t matrix = int64_t(*bytes) * first.n_rows;
  for (size_t h = 0; h < heads.size(); ++h) {
    const MatrixView& m = heads[h];
    if (m.type != first.type || m.n_cols != first.n_cols || m.n_rows != first.n_rows ||
        static_cast<const char*>(m.data) !=
            static_cast<const char*>(first.data) + int64_t(h) * matrix) {
      return {};
    }
  }
  return ExpertStack{first.type,   first.data,  matrix, int64_t(heads.size()),
                     first.n_cols, first.n_rows};
}

// y [n, n_head, heads.n_rows] = each head's matrix times x [n, n_head, heads.n_cols], head h of
// every token through matrix h: one matmul_experts over the n * n_head rows when the heads form
// a stack (the CPU's numbers are a matmul of each matrix on its one row, the same as a matmul
// per head of n tokens for every type that takes no tiled path), else per head, its rows moved
// out and back (q_head, head: [n, width] scratch).
void per_head_product(Backend& backend, const std::vector<MatrixView>& heads,
                      const ExpertStack& stack, const int32_t* head_ids, const float* x, float* y,
                      int64_t n, float* q_head, float* head) {
  const int64_t n_head = int64_t(heads.size());
  if (stack.count > 0) {
    backend.matmul_experts(stack, head_ids, n * n_head, x, false, y);
    return;
  }
  for (int64_t h = 0; h < n_head; ++h) {
    const MatrixView& w = heads[size_t(h)];
    backend.copy_strided_rows(x + h * w.n_cols, n_head * w.n_cols, q_head, w.n_cols, n, w.n_cols);
    backend.matmul(w, q_head, head, n);
    backend.copy_strided_rows(head, w.n_rows, y + h * w.n_rows, n_head * w.n_rows, n, w.n_rows);
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
  w.k_b_stack = contiguous_stack(w.wk_b);
  w.v_b_stack = contiguous_stack(w.wv_b);
  w.wo =
      binder.matrix(layer_tensor(layer, "attn_output.weight"), s.n_head * s.head_dim_v, s.n_embd);
  return w;
}

void MlaScratch::reserve(Backend& backend, const MlaShape& s, int64_t n_batch) {
  const int64_t dk = s.kv_lora_rank + s.n_rot;
  const int64_t rows = n_batch * s.n_head;  // (token, head) rows
  const auto grow = [&](BackendArray<float>& a, int64_t n) { a.resize(backend, size_t(n)); };
  grow(q_a, n_batch * std::max<int64_t>(s.q_lora_rank, 1));
  grow(q, rows * s.head_dim_q());
  grow(kv, n_batch * dk);
  grow(q_pe, rows * s.n_rot);
  grow(k_pe, n_batch * s.n_rot);
  grow(q_nope, rows * s.head_dim_nope);
  grow(q_absorb, rows * s.kv_lora_rank);
  grow(q_head, n_batch * std::max(s.head_dim_nope, s.kv_lora_rank));
  grow(head, n_batch * std::max(s.kv_lora_rank, s.head_dim_v));
  grow(q_mqa, rows * dk);
  grow(k_row, n_batch * dk);
  grow(v_row, n_batch * s.kv_lora_rank);
  grow(latent, rows * s.kv_lora_rank);
  grow(attn, rows * s.head_dim_v);
  // Row t * n_head + h reads matrix h; the same table for every layer and chunk, so uploaded once.
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[size_t(r)] = int32_t(r % s.n_head);
  head_ids.resize(backend, ids.size());
  backend.upload(head_ids.data(), ids.data(), ids.size() * sizeof(int32_t));
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
  backend.copy_strided_rows(q + nope, dq, m.q_pe.data(), n_rot, n * n_head, n_rot);
  backend.copy_strided_rows(kv + lora, dk, m.k_pe.data(), n_rot, n, n_rot);
  for (const SequenceRun& run : sequences) {
    backend.rope(m.q_pe.data() + run.row0 * n_head * n_rot, run.n_tokens, n_head, n_rot, run.pos0,
                 rope);
    backend.rope(m.k_pe.data() + run.row0 * n_rot, run.n_tokens, 1, n_rot, run.pos0, rope);
  }
  trace("q_pe", layer, m.q_pe.data(), n_head * n_rot);
  trace("k_pe", layer, m.k_pe.data(), n_rot);

  // Cached rows: value the normed latent (made contiguous so that one call norms every token),
  // key [normed latent | roped key part] (llama.cpp stores the key alone and reads the value as
  // a view of its first kv_lora_rank elements).
  backend.copy_strided_rows(kv, dk, m.v_row.data(), lora, n, lora);
  backend.rms_norm(m.v_row.data(), w.kv_a_norm.data(), m.v_row.data(), n, lora, s.norm_eps);
  backend.copy_strided_rows(m.v_row.data(), lora, m.k_row.data(), dk, n, lora);
  backend.copy_strided_rows(m.k_pe.data(), n_rot, m.k_row.data() + lora, dk, n, n_rot);

  // Queries [absorbed | roped]: each head's non-rotary part taken into latent space by its
  // attn_k_b.
  backend.copy_strided_rows(q, dq, m.q_nope.data(), nope, n * n_head, nope);
  per_head_product(backend, w.wk_b, w.k_b_stack, m.head_ids.data(), m.q_nope.data(),
                   m.q_absorb.data(), n, m.q_head.data(), m.head.data());
  backend.copy_strided_rows(m.q_absorb.data(), lora, m.q_mqa.data(), dk, n * n_head, lora);
  backend.copy_strided_rows(m.q_pe.data(), n_rot, m.q_mqa.data() + lora, dk, n * n_head, n_rot);
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
  // Each head's latent output through its attn_v_b.
  per_head_product(backend, w.wv_b, w.v_b_stack, m.head_ids.data(), m.latent.data(), m.attn.data(),
                   n_tokens, m.q_head.data(), m.head.data());
  trace("kqv_out", layer, m.attn.data(), s.n_head * s.head_dim_v);
  backend.matmul(w.wo, m.attn.data(), out, n_tokens);
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
