// The output head block.
#include "model/blocks/output_head.h"

#include <cstring>

namespace sluice::model {

OutputHead bind_output_head(WeightBinder& binder, const MatrixView& token_embd, int64_t n_embd,
                            int64_t n_vocab) {
  OutputHead head;
  head.norm = binder.vector("output_norm.weight", n_embd);
  head.output = binder.optional_matrix("output.weight", n_embd, n_vocab).value_or(token_embd);
  return head;
}

void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, const Trace& trace) {
  const int64_t n_embd = head.output.n_cols;
  backend.rms_norm(x, head.norm.data(), x, n_rows, n_embd, eps);
  Trace rows = trace;
  rows.n_tokens = n_rows;
  rows("result_norm", -1, x, n_embd);
  backend.matmul(head.output, x, logits, n_rows);
  rows("result_output", -1, logits, head.output.n_rows);
}

LogitRows logit_rows(const ForwardRequest& request, float* x, int64_t n_tokens, int64_t n_embd) {
  if (request.all_logits) return {x, n_tokens};
  if (request.sequences.size() <= 1) return {x + (n_tokens - 1) * n_embd, 1};
  int64_t row = 0;
  for (const SequenceRun& run : request.sequences) {
    const int64_t last = run.row0 + run.n_tokens - 1;  // >= row: rows only move forward
    if (last != row) std::memmove(x + row * n_embd, x + last * n_embd, sizeof(float) * n_embd);
    ++row;
  }
  return {x, row};
}

}  // namespace sluice::model
