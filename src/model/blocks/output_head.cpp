// The output head block.
#include "model/blocks/output_head.h"

#include "core/error.h"

namespace sluice::model {

OutputHead bind_output_head(WeightBinder& binder, const MatrixView& token_embd, int64_t n_embd,
                            int64_t n_vocab) {
  OutputHead head;
  head.norm = binder.vector("output_norm.weight", n_embd);
  head.output = binder.optional_matrix("output.weight", n_embd, n_vocab).value_or(token_embd);
  return head;
}

void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, BackendArray<float>& scratch, const Trace& trace,
                   const LogitsFinish& finish) {
  const int64_t n_embd = head.output.n_cols;
  const int64_t n_logits = n_rows * head.output.n_rows;
  float* out = logits;
  if (!backend.host_memory()) {
    if (int64_t(scratch.size()) < n_logits) scratch.resize(backend, size_t(n_logits));
    out = scratch.data();
  }
  backend.rms_norm(x, head.norm.data(), x, n_rows, n_embd, eps);
  Trace rows = trace;
  rows.n_tokens = n_rows;
  rows("result_norm", -1, x, n_embd);
  backend.matmul(head.output, x, out, n_rows);
  rows("result_output", -1, out, head.output.n_rows);
  if (finish.scale != 1.0f) backend.scale(out, finish.scale, n_logits);
  if (finish.softcap > 0.0f) backend.softcap(out, finish.softcap, n_logits);
  if (finish.scale_after != 1.0f) backend.scale(out, finish.scale_after, n_logits);
  if (out != logits) backend.download(logits, out, size_t(n_logits) * sizeof(float));
}

void output_logits(Backend& backend, const OutputHead& head, float* x, int64_t n_rows, float eps,
                   float* logits, const Trace& trace) {
  if (!backend.host_memory()) fail("output head: this architecture's forward runs on the CPU only");
  BackendArray<float> unused;
  output_logits(backend, head, x, n_rows, eps, logits, unused, trace);
}

LogitRows logit_rows(Backend& backend, const ForwardRequest& request, float* x, int64_t n_tokens,
                     int64_t n_embd) {
  if (request.all_logits) return {x, n_tokens};
  if (request.sequences.size() <= 1) return {x + (n_tokens - 1) * n_embd, 1};
  int64_t row = 0;
  for (const SequenceRun& run : request.sequences) {
    const int64_t last = run.row0 + run.n_tokens - 1;  // >= row: rows only move forward
    if (last != row) backend.copy(x + row * n_embd, x + last * n_embd, sizeof(float) * n_embd);
    ++row;
  }
  return {x, row};
}

}  // namespace sluice::model
