// The end of a decoder: final RMS norm and the vocabulary projection (its own output.weight, or
// the token embedding when the model ties them), on the rows whose logits were asked for.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/blocks/trace.h"
#include "model/language_model.h"
#include "model/weights.h"

namespace sluice::model {

struct OutputHead {
  std::vector<float> norm;  // [n_embd] output_norm.weight
  MatrixView output;        // [n_embd, n_vocab]
};

// output.weight when present, else token_embd.weight (tied embeddings).
OutputHead bind_output_head(WeightBinder& binder, const MatrixView& token_embd, int64_t n_embd,
                            int64_t n_vocab);

// The rows of x [n_tokens, n_embd] whose logits `request` asks for: every row (all_logits),
// else the last row of each sequence run — one run: that row where it is; several (a batched
// step): gathered to the front of x in run order (x is not read again after this).
struct LogitRows {
  float* x;
  int64_t n_rows;
};
LogitRows logit_rows(const ForwardRequest& request, float* x, int64_t n_tokens, int64_t n_embd);

// logits [n_rows, n_vocab] from x [n_rows, n_embd] (x is normed in place).
void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, const Trace& trace);

}  // namespace sluice::model
