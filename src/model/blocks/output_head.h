// The end of a decoder: final RMS norm and the vocabulary projection (its own output.weight, or
// the token embedding when the model ties them), on the rows whose logits were asked for.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/blocks/trace.h"
#include "model/weights.h"

namespace sluice::model {

struct OutputHead {
  std::vector<float> norm;  // [n_embd] output_norm.weight
  MatrixView output;        // [n_embd, n_vocab]
};

// output.weight when present, else token_embd.weight (tied embeddings).
OutputHead bind_output_head(WeightBinder& binder, const MatrixView& token_embd, int64_t n_embd,
                            int64_t n_vocab);

// logits [n_rows, n_vocab] from x [n_rows, n_embd] (x is normed in place).
void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, const Trace& trace);

}  // namespace sluice::model
