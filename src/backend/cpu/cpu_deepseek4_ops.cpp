// CpuBackend's DeepSeek V4 ops: the hyper-connections' mixer, fold and expansion, the clamped
// SwiGLU's clamp, the KV compressor's blocks and the gather of chosen key cells. Each is the host
// loop model/blocks/hyper_connections.cpp, kv_compressor.cpp and arch/deepseek4.cpp ran before
// they became ops, step for step (llama.cpp's order: products rounded before each add, sums of
// rows in double, softmax scaled by 1 / Σ), so the CPU's numbers did not move.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/expert_selection.h"
#include "core/error.h"

namespace sluice::cpu {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// comb [src][dst] (dst fastest) made doubly stochastic (backend.h's hyper_mix).
void sinkhorn(float* comb, int64_t n, int64_t iterations, float eps) {
  for (int64_t src = 0; src < n; ++src) softmax_row(comb + src * n, n);
  for (int64_t i = 0; i < n * n; ++i) comb[i] += eps;
  const auto normalise_src = [&] {  // for each dst, over src
    for (int64_t dst = 0; dst < n; ++dst) {
      double sum = 0.0;
      for (int64_t src = 0; src < n; ++src) sum += double(comb[src * n + dst]);
      const float total = float(sum) + eps;
      for (int64_t src = 0; src < n; ++src) comb[src * n + dst] /= total;
    }
  };
  const auto normalise_dst = [&] {  // for each src, over dst
    for (int64_t src = 0; src < n; ++src) {
      double sum = 0.0;
      for (int64_t dst = 0; dst < n; ++dst) sum += double(comb[src * n + dst]);
      const float total = float(sum) + eps;
      for (int64_t dst = 0; dst < n; ++dst) comb[src * n + dst] /= total;
    }
  };
  normalise_src();
  for (int64_t i = 1; i < iterations; ++i) {
    normalise_dst();
    normalise_src();
  }
}

}  // namespace

void CpuBackend::hyper_mix(const float* mixes, const float* scale, const float* base,
                           int64_t n_tokens, int64_t n_stream, int64_t iterations, float eps,
                           float* pre, float* post, float* comb) {
  const int64_t hc = n_stream;
  const bool head = post == nullptr;
  if (hc <= 0 || (head != (comb == nullptr))) {
    fail("hyper_mix: ", hc, " streams", head ? ", comb without post" : "");
  }
  const int64_t width = head ? hc : (2 + hc) * hc;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* m = mixes + t * width;
    float* p = pre + t * hc;
    for (int64_t h = 0; h < hc; ++h) p[h] = sigmoid(m[h] * scale[0] + base[h]) + eps;
    if (head) continue;
    float* q = post + t * hc;
    float* c = comb + t * hc * hc;
    for (int64_t h = 0; h < hc; ++h) q[h] = sigmoid(m[hc + h] * scale[1] + base[hc + h]) * 2.0f;
    for (int64_t i = 0; i < hc * hc; ++i) c[i] = m[2 * hc + i] * scale[2] + base[2 * hc + i];
    sinkhorn(c, hc, iterations, eps);
  }
}

void CpuBackend::hyper_fold(const float* streams, const float* weights, int64_t n_tokens,
                            int64_t n_stream, int64_t n_embd, float* x) {
  if (n_stream <= 0) fail("hyper_fold: ", n_stream, " streams");
  parallel(n_tokens, row_chunk(n_tokens), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const float* w = weights + t * n_stream;
      float* out = x + t * n_embd;
      const float* in = streams + t * n_stream * n_embd;
      for (int64_t i = 0; i < n_embd; ++i) out[i] = in[i] * w[0];
      for (int64_t h = 1; h < n_stream; ++h) {
        const float* stream = in + h * n_embd;
        for (int64_t i = 0; i < n_embd; ++i) {
          const float product = stream[i] * w[h];
          out[i] += product;
        }
      }
    }
  });
}

void CpuBackend::hyper_expand(const float* branch, const float* post, const float* comb,
                              const float* streams, int64_t n_tokens, int64_t n_stream,
                              int64_t n_embd, float* out) {
  const int64_t hc = n_stream, d = n_embd;
  parallel(n_tokens, row_chunk(n_tokens), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const float* p = post + t * hc;
      const float* c = comb + t * hc * hc;
      const float* in = streams + t * hc * d;
      const float* f = branch + t * d;
      for (int64_t dst = 0; dst < hc; ++dst) {
        float* o = out + (t * hc + dst) * d;
        for (int64_t i = 0; i < d; ++i) o[i] = f[i] * p[dst];
        for (int64_t src = 0; src < hc; ++src) {
          const float weight = c[src * hc + dst];
          const float* stream = in + src * d;
          for (int64_t i = 0; i < d; ++i) {
            const float product = stream[i] * weight;
            o[i] += product;
          }
        }
      }
    }
  });
}

void CpuBackend::clamp_swiglu(float* gate, float* up, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    gate[i] = std::min(gate[i], limit);
    up[i] = std::clamp(up[i], -limit, limit);
  }
}

void CpuBackend::kv_compress(const float* kv, const float* score, const float* ape, float* state,
                             int64_t n_tokens, int64_t pos0, int64_t ratio, int64_t head_dim,
                             bool overlap, float* keys) {
  const int64_t r = ratio, d = head_dim;
  if (r <= 0 || d <= 0 || pos0 < 0) {
    fail("kv_compress: ratio ", r, ", head_dim ", d, ", position ", pos0);
  }
  const int64_t width = (overlap ? 2 : 1) * d, span = (overlap ? 2 : 1) * r;
  const int64_t n_entries = overlap ? 2 * r : r;
  // Channel ch of position p's row: the candidate (score false) or its score + ape.
  const auto element = [&](int64_t p, int64_t ch, bool is_score) {
    if (p < pos0) return state[(p % span) * 2 * width + (is_score ? width : 0) + ch];
    const int64_t t = p - pos0;
    if (!is_score) return kv[t * width + ch];
    return score[t * width + ch] + ape[(p % r) * width + ch];
  };
  const int64_t first = pos0 / r, n_blocks = (pos0 + n_tokens) / r - first;
  parallel(n_blocks, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> entries(size_t(2 * n_entries));
    float* sc = entries.data();
    float* value = sc + n_entries;
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t block = first + i;
      for (int64_t c = 0; c < d; ++c) {
        for (int64_t e = 0; e < n_entries; ++e) {
          if (overlap && e < r) {
            // The previous block's token e, through the first half of the channels.
            if (block == 0) {
              value[e] = 0.0f;
              sc[e] = -INFINITY;
            } else {
              value[e] = element((block - 1) * r + e, c, false);
              sc[e] = element((block - 1) * r + e, c, true);
            }
            continue;
          }
          const int64_t j = overlap ? e - r : e;
          const int64_t offset = overlap ? d : 0;
          value[e] = element(block * r + j, offset + c, false);
          sc[e] = element(block * r + j, offset + c, true);
        }
        softmax_row(sc, n_entries);
        double sum = 0.0;
        for (int64_t e = 0; e < n_entries; ++e) sum += double(value[e] * sc[e]);
        keys[i * d + c] = float(sum);
      }
    }
  });
  // The run's last span rows join the ring (after the blocks above read the older ones).
  for (int64_t p = std::max(pos0, pos0 + n_tokens - span); p < pos0 + n_tokens; ++p) {
    float* to = state + (p % span) * 2 * width;
    for (int64_t ch = 0; ch < width; ++ch) {
      to[ch] = element(p, ch, false);
      to[width + ch] = element(p, ch, true);
    }
  }
}

void CpuBackend::gather_key_cells(const KvLayerView& kv, const int32_t* cells, int64_t n,
                                  void* dst) {
  if (kv.capacity <= 0) fail("gather_key_cells: capacity ", kv.capacity);
  const size_t cell = size_t(kv.n_head_kv * kv.head_dim_k) * (kv.type == KvElement::kF16 ? 2 : 4);
  for (int64_t i = 0; i < n; ++i) {
    if (cells[i] < 0) fail("gather_key_cells: cell ", cells[i]);
    std::memcpy(static_cast<uint8_t*>(dst) + size_t(i) * cell,
                static_cast<const uint8_t*>(kv.k) + size_t(cells[i] % kv.capacity) * cell, cell);
  }
}

}  // namespace sluice::cpu
