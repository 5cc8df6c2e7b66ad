// Trace: forwards named intermediate tensors to the request's ActivationObserver, if any. The
// names follow llama.cpp's graph callbacks (attn_norm, Qcur, ffn_out, l_out …) so a divergence
// can be matched against its eval-callback dumps. Tensors in a device backend's memory are
// copied to the host first (only when someone observes).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/language_model.h"

namespace sluice::model {

struct Trace {
  ActivationObserver* observer = nullptr;
  int64_t n_tokens = 0;
  Backend* backend = nullptr;  // whose memory `data` is in; nullptr: host memory

  void operator()(std::string_view name, int64_t layer, const float* data, int64_t row) const {
    if (observer == nullptr) return;
    if (backend == nullptr || backend->host_memory()) {
      observer->observe(name, layer, data, n_tokens, row);
      return;
    }
    std::vector<float> host(size_t(n_tokens * row));
    backend->download(host.data(), data, host.size() * sizeof(float));
    observer->observe(name, layer, host.data(), n_tokens, row);
  }
};

}  // namespace sluice::model
