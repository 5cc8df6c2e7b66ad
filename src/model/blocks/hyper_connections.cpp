// Hyper-connections in llama.cpp's deepseek4 order of operations: products rounded before each
// add (ggml_mul then ggml_add), sums of rows in double, softmax scaled by 1 / Σ.
#include "model/blocks/hyper_connections.h"

#include <cmath>
#include <cstring>

namespace sluice::model {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// A row's softmax as ggml_soft_max computes it: exp(x - max), summed in double, times 1 / Σ.
void softmax(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += double(x[i]);
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// comb [src][dst] (dst fastest) becomes doubly stochastic: a softmax over dst for each src, + eps,
// then Σ over src = 1, and iterations - 1 more rounds of Σ over dst = 1 then Σ over src = 1
// (each divisor + eps).
void sinkhorn(float* comb, int64_t n, int64_t iterations, float eps) {
  for (int64_t src = 0; src < n; ++src) softmax(comb + src * n, n);
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

// x [n_tokens, n_embd] = Σ_h streams[h] · weights[h], in stream order.
void fold(const float* streams, const float* weights, int64_t n_tokens, int64_t n_stream,
          int64_t n_embd, float* x) {
  for (int64_t t = 0; t < n_tokens; ++t) {
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
}

// mixes [n_tokens, n_out] from the streams' joint RMS norm.
void mix(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
         const float* streams, int64_t n_tokens, HyperConnectionScratch& m) {
  const int64_t width = s.n_stream * s.n_embd;
  backend.rms_norm(streams, nullptr, m.normed.data(), n_tokens, width, s.norm_eps);
  backend.matmul(w.fn, m.normed.data(), m.mixes.data(), n_tokens);
}

}  // namespace

HyperConnectionWeights bind_hyper_connection(WeightBinder& binder, const std::string& prefix,
                                             const HyperConnectionShape& s, bool head) {
  const int64_t n_out = head ? s.n_stream : s.n_mix();
  HyperConnectionWeights w;
  w.fn = binder.matrix(prefix + "_fn.weight", s.n_stream * s.n_embd, n_out);
  w.base = binder.vector(prefix + "_base.weight", n_out);
  w.scale = binder.vector(prefix + "_scale.weight", head ? 1 : 3);
  return w;
}

void HyperConnectionScratch::reserve(const HyperConnectionShape& s, int64_t n_batch) {
  normed.resize(size_t(n_batch * s.n_stream * s.n_embd));
  mixes.resize(size_t(n_batch * s.n_mix()));
  pre.resize(size_t(n_batch * s.n_stream));
  post.resize(size_t(n_batch * s.n_stream));
  comb.resize(size_t(n_batch * s.n_stream * s.n_stream));
  mixed.resize(size_t(n_batch * s.n_stream * s.n_embd));
}

void hc_pre(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
            const float* streams, int64_t n, HyperConnectionScratch& m, float* x, const char* name,
            int64_t layer, const Trace& trace) {
  const int64_t hc = s.n_stream, n_mix = s.n_mix();
  mix(backend, w, s, streams, n, m);
  for (int64_t t = 0; t < n; ++t) {
    const float* mixes = m.mixes.data() + t * n_mix;
    float* pre = m.pre.data() + t * hc;
    float* post = m.post.data() + t * hc;
    float* comb = m.comb.data() + t * hc * hc;
    for (int64_t h = 0; h < hc; ++h) {
      pre[h] = sigmoid(mixes[h] * w.scale[0] + w.base[size_t(h)]) + s.eps;
      post[h] = sigmoid(mixes[hc + h] * w.scale[1] + w.base[size_t(hc + h)]) * 2.0f;
    }
    for (int64_t i = 0; i < hc * hc; ++i) {
      comb[i] = mixes[2 * hc + i] * w.scale[2] + w.base[size_t(2 * hc + i)];
    }
    sinkhorn(comb, hc, s.sinkhorn_iterations, s.eps);
  }
  fold(streams, m.pre.data(), n, hc, s.n_embd, x);
  trace(name, layer, x, s.n_embd);
}

void hc_post(const HyperConnectionShape& s, const float* branch, int64_t n,
             HyperConnectionScratch& m, float* streams) {
  const int64_t hc = s.n_stream, d = s.n_embd;
  for (int64_t t = 0; t < n; ++t) {
    const float* post = m.post.data() + t * hc;
    const float* comb = m.comb.data() + t * hc * hc;
    const float* in = streams + t * hc * d;
    const float* f = branch + t * d;
    for (int64_t dst = 0; dst < hc; ++dst) {
      float* out = m.mixed.data() + (t * hc + dst) * d;
      for (int64_t i = 0; i < d; ++i) out[i] = f[i] * post[dst];
      for (int64_t src = 0; src < hc; ++src) {
        const float c = comb[src * hc + dst];
        const float* stream = in + src * d;
        for (int64_t i = 0; i < d; ++i) {
          const float product = stream[i] * c;
          out[i] += product;
        }
      }
    }
  }
  std::memcpy(streams, m.mixed.data(), sizeof(float) * size_t(n * hc * d));
}

void hc_head(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
             const float* streams, int64_t n, HyperConnectionScratch& m, float* x) {
  const int64_t hc = s.n_stream;
  mix(backend, w, s, streams, n, m);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < hc; ++h) {
      m.pre[size_t(t * hc + h)] =
          sigmoid(m.mixes[size_t(t * hc + h)] * w.scale[0] + w.base[size_t(h)]) + s.eps;
    }
  }
  fold(streams, m.pre.data(), n, hc, s.n_embd, x);
}

}  // namespace sluice::model
