// KvCache's storage, the prefix-reuse rule for sliding rings and the no-rewind rule for recurrent
// states.
#include "model/kv_cache.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"

namespace sluice::model {

KvCache::KvCache(std::vector<KvLayerSpec> layers, int64_t n_ctx, int64_t n_batch, KvElement type,
                 Backend& backend)
    : layers_(std::move(layers)), n_ctx_(n_ctx), n_batch_(n_batch), type_(type) {
  if (n_ctx < 1 || n_batch < 1) fail("kv cache: n_ctx and n_batch must be positive");
  const size_t element = type == KvElement::kF16 ? 2 : 4;
  storage_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const KvLayerSpec& spec = layers_[i];
    Layer& layer = storage_[i];
    if (spec.is_recurrent()) {
      layer.conv.resize(backend, size_t(spec.conv_state));  // zeroed
      layer.state.resize(backend, size_t(spec.recurrent_state));
      continue;
    }
    layer.capacity = spec.window > 0 ? std::min(n_ctx, spec.window + n_batch - 1) : n_ctx;
    layer.k.resize(backend, size_t(layer.capacity * spec.n_head_kv * spec.head_dim_k) * element);
    layer.v.resize(backend, size_t(layer.capacity * spec.n_head_kv * spec.head_dim_v) * element);
  }
}

KvLayerView KvCache::layer(int64_t index) {
  const KvLayerSpec& spec = layers_[size_t(index)];
  Layer& layer = storage_[size_t(index)];
  return KvLayerView{type_,          layer.k.data(),  layer.v.data(), layer.capacity,
                     spec.n_head_kv, spec.head_dim_k, spec.head_dim_v};
}

RecurrentLayerView KvCache::recurrent(int64_t index, int64_t pos0) {
  if (!layers_[size_t(index)].is_recurrent()) fail("kv cache: layer ", index, " is not recurrent");
  Layer& layer = storage_[size_t(index)];
  if (pos0 == 0) {
    // Only when a sequence starts (a prefill), never in a decode step.
    const std::vector<float> zeros(std::max(layer.conv.size(), layer.state.size()), 0.0f);
    for (BackendArray<float>* part : {&layer.conv, &layer.state}) {
      if (!part->empty()) {
        part->backend()->upload(part->data(), zeros.data(), part->size() * sizeof(float));
      }
    }
    layer.positions = 0;
  } else if (pos0 != layer.positions) {
    fail("kv cache: recurrent layer ", index, " holds ", layer.positions,
         " positions and cannot continue at ", pos0, " (its state cannot be rewound)");
  }
  return RecurrentLayerView{layer.conv.data(), layer.state.data(), &layer.positions};
}

bool KvCache::has_recurrent_layers() const {
  return std::any_of(layers_.begin(), layers_.end(),
                     [](const KvLayerSpec& spec) { return spec.is_recurrent(); });
}

uint64_t KvCache::bytes() const {
  uint64_t total = 0;
  for (const Layer& layer : storage_) {
    total +=
        layer.k.size() + layer.v.size() + (layer.conv.size() + layer.state.size()) * sizeof(float);
  }
  return total;
}

int64_t KvCache::reusable_prefix(int64_t n_keep, int64_t n_written) const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    // A recurrent state is the whole written sequence folded together: a shorter prefix would
    // need the state as it was at n_keep, which is gone. A state that holds other than the
    // written positions (a forward failed after this layer ran) cannot be continued either.
    if (layers_[i].is_recurrent() && (n_keep != n_written || storage_[i].positions != n_written)) {
      return 0;
    }
    const int64_t window = layers_[i].window;
    if (window <= 0 || storage_[i].capacity >= n_ctx_) continue;
    // The next query (at n_keep) reads back to n_keep - window + 1; that cell must not have
    // been overwritten by a later position already written.
    const int64_t oldest_needed = std::max<int64_t>(0, n_keep - window + 1);
    if (n_written - 1 - oldest_needed >= storage_[i].capacity) return 0;
  }
  return n_keep;
}

void KvCache::copy_prefix_from(const KvCache& source, int64_t n, int64_t n_written) {
  if (source.n_ctx_ != n_ctx_ || source.n_batch_ != n_batch_ || source.type_ != type_ ||
      source.layers_.size() != layers_.size()) {
    fail("kv cache: copying a prefix between caches of different shapes");
  }
  if (n > n_written || source.reusable_prefix(n, n_written) != n) {
    fail("kv cache: the source no longer holds the first ", n, " positions");
  }
  const size_t element = type_ == KvElement::kF16 ? 2 : 4;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const KvLayerSpec& spec = layers_[i];
    Layer& to = storage_[i];
    const Layer& from = source.storage_[i];
    if (spec.is_recurrent()) {
      // reusable_prefix allowed only n == n_written (or n == 0, a fresh start): the state is
      // copied whole, or left to be reset by the first forward at position 0.
      if (n > 0 && from.positions != n) {
        fail("kv cache: recurrent layer ", i, " of the source holds ", from.positions,
             " positions, not ", n);
      }
      for (auto [dst, src] : {std::pair{&to.conv, &from.conv}, std::pair{&to.state, &from.state}}) {
        if (!dst->empty())
          dst->backend()->copy(dst->data(), src->data(), dst->size() * sizeof(float));
      }
      to.positions = n > 0 ? from.positions : 0;
      continue;
    }
    const size_t k_cell = size_t(spec.n_head_kv * spec.head_dim_k) * element;
    const size_t v_cell = size_t(spec.n_head_kv * spec.head_dim_v) * element;
    // Positions [first, n) sit in cells first % capacity onwards, wrapping at most once.
    const int64_t first = std::max<int64_t>(0, n - to.capacity);
    for (int64_t pos = first; pos < n;) {
      const int64_t cell = pos % to.capacity;
      const int64_t cells = std::min(n - pos, to.capacity - cell);
      Backend& backend = *to.k.backend();
      backend.copy(to.k.data() + cell * k_cell, from.k.data() + cell * k_cell, cells * k_cell);
      backend.copy(to.v.data() + cell * v_cell, from.v.data() + cell * v_cell, cells * v_cell);
      pos += cells;
    }
  }
}

}  // namespace sluice::model
