// The end of a decoder: final RMS norm and the vocabulary projection (its own output.weight, or
// the token embedding when the model ties them), on the rows whose logits were asked for.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
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
LogitRows logit_rows(Backend& backend, const ForwardRequest& request, float* x, int64_t n_tokens,
                     int64_t n_embd);

// What becomes of the logits after the projection (Gemma's final scale and soft-cap).
struct LogitsFinish {
  float scale = 1.0f;    // 1: none
  float softcap = 0.0f;  // 0: none
  // 1: none; else the capped logits times it (Gemma 4 caps as scale 1/cap, tanh, scale cap:
  // {1 / cap, 1, cap}, whose roundings differ from softcap = cap).
  float scale_after = 1.0f;
};

// logits [n_rows, n_vocab] (host memory) from x [n_rows, n_embd] (x is normed in place). On a
// backend whose memory is not the host's they are computed in `scratch` (grown as needed) and
// downloaded — the forward's one read back.
void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, BackendArray<float>& scratch, const Trace& trace,
                   const LogitsFinish& finish = {});
// The same for host-memory backends only (architectures whose forward runs on the CPU).
void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, const Trace& trace);

}  // namespace sluice::model
