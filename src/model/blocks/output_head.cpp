// The output head block.
#include "model/blocks/output_head.h"

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

}  // namespace sluice::model
