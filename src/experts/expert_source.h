// ExpertSource: how an MoE layer gets the weights of the experts its router chose. The layer
// acquires the chosen set (pinning it and starting loads for misses), computes each expert as
// it becomes ready, then releases the set. Two sources: ResidentExperts (views of the mapped
// file, always ready) and ExpertCache (bounded slots fed from disk). Which one is used never
// changes the numbers: the layer accumulates expert outputs in selection order, whatever order
// they arrive in. Knows no architecture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "experts/expert_layout.h"
#include "experts/expert_stats.h"

namespace sluice::experts {

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;

  // Pins experts `ids` (distinct) of `layer` and starts loading those not in memory. A layer
  // acquires once and releases before the next acquire of any layer.
  virtual void acquire(int64_t layer, std::span<const int32_t> ids) = 0;
  // Whether `wait` would return at once.
  virtual bool ready(int64_t layer, int32_t id) = 0;
  // Blocks until the expert (acquired before) is in memory; the views stay valid until
  // release(). A failed read is a sluice::Error naming the file and the expert.
  virtual ExpertWeights wait(int64_t layer, int32_t id) = 0;
  // Unpins what acquire pinned.
  virtual void release(int64_t layer) = 0;
  // A guess that these experts of `layer` are needed soon: a source with a cache may start
  // reading them, below any demand read. Never required for correctness.
  virtual void prefetch(int64_t layer, std::span<const int32_t> ids) = 0;
  // The most experts one acquire may pin (the cache's slots); a layer needing more acquires,
  // computes and releases them in windows of this size.
  virtual size_t max_acquire() const { return SIZE_MAX; }
  // Whether prefetch hints are worth computing (a cache that reads from disk).
  virtual bool wants_prefetch() const { return false; }
  // Stacks (backend.h's ExpertStack: same-shaped matrices at a fixed stride), which a GPU's MoE
  // multiplies by index, many experts per launch. stack() gives part `part` of `layer`'s experts
  // as one stack, or false when the source keeps no such stack (views one by one only); an
  // acquired expert's matrix is then stack.matrix(stack_index(layer, id)) — after wait() for a
  // source that loads. always_in_stack(): every expert sits in its stack at index id, nothing
  // to acquire or wait for, so the choice of experts may stay on the backend.
  virtual bool stack(int64_t, ExpertPart, ExpertStack&) const { return false; }
  virtual int32_t stack_index(int64_t, int32_t id) const { return id; }
  virtual bool always_in_stack() const { return false; }
  // Marks the end of one forward step (a decode token or a prefill chunk) for telemetry.
  virtual void end_step() {}

  virtual const ExpertStats& stats() const = 0;
};

}  // namespace sluice::experts
