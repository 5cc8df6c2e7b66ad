// ResidualStream: the buffers every decoder's forward works in — the residual stream, the normed
// input of a branch, a branch's output and the chunk's token ids — in the backend's memory, sized
// for the largest chunk a session asked for. Knows nothing of layers or weights.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend_array.h"

namespace sluice::model {

struct ResidualStream {
  BackendArray<float> x;       // [n_batch, n_embd] the residual stream
  BackendArray<float> xn;      // [n_batch, n_embd] normed input of a branch
  BackendArray<float> branch;  // [n_batch, n_embd] attention or FFN output
  BackendArray<int32_t> ids;   // [n_batch] the chunk's token ids (backends without host memory)
  BackendArray<float> logits;  // the head's output on such backends, grown by output_logits
  int64_t n_batch = 0;

  // Grows the buffers to n_batch rows of `backend`'s memory; false when they already hold that
  // many there (so the decoder's other scratch is large enough too).
  bool grow(Backend& backend, int64_t rows, int64_t n_embd) {
    if (rows <= n_batch && x.backend() == &backend) return false;
    n_batch = rows;
    for (BackendArray<float>* buffer : {&x, &xn, &branch}) {
      buffer->resize(backend, size_t(rows * n_embd));
    }
    ids.resize(backend, size_t(rows));
    return true;
  }

  // The token ids as get_rows reads them: the request's own on a host-memory backend, else a
  // copy in the backend's memory.
  const int32_t* token_ids(Backend& backend, std::span<const int32_t> tokens) {
    if (backend.host_memory()) return tokens.data();
    backend.upload(ids.data(), tokens.data(), tokens.size_bytes());
    return ids.data();
  }
};

}  // namespace sluice::model
