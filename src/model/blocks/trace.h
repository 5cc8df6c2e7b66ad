// Trace: forwards named intermediate tensors to the request's ActivationObserver, if any. The
// names follow llama.cpp's graph callbacks (attn_norm, Qcur, ffn_out, l_out …) so a divergence
// can be matched against its eval-callback dumps.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/language_model.h"

namespace sluice::model {

struct Trace {
  ActivationObserver* observer = nullptr;
  int64_t n_tokens = 0;

  void operator()(std::string_view name, int64_t layer, const float* data, int64_t row) const {
    if (observer != nullptr) observer->observe(name, layer, data, n_tokens, row);
  }
};

}  // namespace sluice::model
