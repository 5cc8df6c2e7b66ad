// CudaBackend's copies ahead of need (backend.h: upload_ahead / join_ahead): a side stream, and
// events in both directions, never a device-wide wait. The side copy of a slot starts after
// everything queued before it (an earlier layer may still read that slot); the ops after the
// join (the next layer's experts) start after the copies.
#include "backend/cuda/cuda_backend.h"

namespace sluice::cuda {

void CudaBackend::upload_ahead(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  if (graph_.recording()) return upload(dst, host, bytes);
  copy_to_device(dst, host, bytes, started_ahead_stream());
}

const Stream& CudaBackend::started_ahead_stream() {
  ahead_start_.record(stream_);
  ahead_start_.wait_on(ahead_stream_);
  ahead_pending_ = true;
  return ahead_stream_;
}

void CudaBackend::join_ahead() {
  if (!ahead_pending_) return;
  ahead_done_.record(ahead_stream_);
  ahead_done_.wait_on(stream_);
  ahead_pending_ = false;
}

}  // namespace sluice::cuda
