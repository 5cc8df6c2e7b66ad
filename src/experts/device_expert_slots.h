// DeviceExpertSlots: the GPU tier of the routed experts. A fixed number of slots in a backend's
// memory (the device's), each holding one expert's parts, in front of a host ExpertSource — the
// streaming cache (host slots fed from NVMe) or the mapped file. An expert already in a slot is
// a device hit and costs nothing; a miss waits for the host source, copies the expert's bytes
// into the least recently used slot not pinned by this acquire, and hands out views of the copy.
// The bytes are copied as they are, so logits do not depend on the number of slots. Knows no
// architecture; the host source's counters stay its own, the device's are kept here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend_array.h"
#include "experts/expert_source.h"
#include "experts/guess_ranks.h"

namespace sluice::experts {

struct DeviceSlotCounters {
  uint64_t hits = 0;           // acquired experts already in a device slot
  uint64_t misses = 0;         // acquired experts copied in from the host tier
  uint64_t prefetched = 0;     // experts copied in ahead of need (prefetch)
  uint64_t prefetch_used = 0;  // of those, acquired before their slot was replaced
  uint64_t bytes_copied = 0;   // host → device
  uint64_t copies = 0;         // host → device transfers (Backend::upload_rows calls)
};

class DeviceExpertSlots final : public ExpertSource {
 public:
  // n_slots >= 1 slots of the layout's largest expert (each part 256-byte aligned).
  DeviceExpertSlots(std::unique_ptr<ExpertSource> host, const ExpertLayout& layout,
                    Backend& backend, int64_t n_slots);

  // Bytes one slot takes for this layout.
  static uint64_t slot_bytes(const ExpertLayout& layout);

  void acquire(int64_t layer, std::span<const int32_t> ids) override;
  bool ready(int64_t layer, int32_t id) override;
  ExpertWeights wait(int64_t layer, int32_t id) override;
  void release(int64_t layer) override;
  void prefetch(int64_t layer, std::span<const int32_t> ids) override;
  ~DeviceExpertSlots() override;
  size_t max_acquire() const override;
  // A guess: experts already in host memory (the mapped file's) get device slots at once — as
  // many as the slots left free by the current acquire allow — and are copied on the backend's
  // side channel (Backend::upload_ahead) from the current acquire's last wait on: after the
  // current layer's own misses, whose copies they would otherwise share the bus with, and
  // while the rest of the layer and the next one's attention compute. The next layer's first
  // wait joins the copies (not its acquire: the guess for the layer after, read by the host in
  // between, would wait for them too). Only the ranks of the guess that have been right often
  // enough lately are copied (GuessRanks). A host tier that loads (the streaming cache) gets the
  // guess to start its reads.
  bool wants_prefetch() const override {
    return host_->wants_prefetch() || host_->always_in_stack();
  }
  // Each part is a stack over the slots (stride: one slot), indexed by slot.
  bool stack(int64_t layer, ExpertPart part, ExpertStack& out) const override;
  int32_t stack_index(int64_t layer, int32_t id) const override;
  void end_step() override { host_->end_step(); }
  const ExpertStats& stats() const override { return host_->stats(); }

  const ExpertSource& host() const { return *host_; }
  ExpertSource& host() { return *host_; }  // the hybrid placement's decode reads it directly
  const DeviceSlotCounters& device_counters() const { return counters_; }
  int64_t n_slots() const { return int64_t(owner_.size()); }
  // Bytes of the host tier the backend page-locked (Backend::pin_host_memory).
  uint64_t pinned_bytes() const { return pinned_bytes_; }

 private:
  static uint64_t key(int64_t layer, int32_t id) { return (uint64_t(layer) << 32) | uint32_t(id); }
  ExpertWeights views(int64_t layer, int64_t slot) const;
  int64_t victim() const;
  void pin(int64_t slot);
  // Takes the least recently used unpinned slot for (layer, id), dropping what it held.
  int64_t take_slot(int64_t layer, int32_t id);
  // Copies the expert's parts from the host views into `slot`, ahead of need or at once.
  void fill(int64_t layer, int64_t slot, const ExpertWeights& host, bool ahead);
  // Enqueues the guesses' copies prefetch() deferred (the acquire's last wait; release and the
  // next acquire for any left).
  void start_prefetches();
  // The backend's next ops wait for the copies started ahead; their slots may be replaced again.
  void join_prefetches();

  std::unique_ptr<ExpertSource> host_;
  const ExpertLayout& layout_;
  Backend& backend_;
  uint64_t slot_bytes_ = 0;
  BackendArray<uint8_t> arena_;                 // [n_slots, slot_bytes_]
  std::unordered_map<uint64_t, int64_t> slot_;  // (layer, expert) → slot
  std::vector<int64_t> owner_;                  // [n_slots] key held, -1: empty
  std::vector<uint64_t> last_use_;              // [n_slots] tick of the last acquire
  std::vector<uint8_t> pinned_;                 // [n_slots] by the current acquire
  std::vector<uint8_t> ahead_;                  // [n_slots] given to a guess, not joined yet
  std::vector<uint8_t> guessed_;                // [n_slots] a guess not acquired yet: rank + 1
  std::vector<int64_t> pinned_slots_;           // which those are (release clears only them)
  std::vector<int32_t> host_ids_;               // the current acquire's device misses
  std::vector<int32_t> prefetch_ids_;           // a prefetch's guesses not on the device
  std::vector<int64_t> ahead_in_flight_;        // guesses' slots whose copies were started
  struct AheadFill {
    int64_t layer, slot;
    ExpertWeights host;
  };
  std::vector<AheadFill> ahead_fills_;  // guesses given slots, copies not yet enqueued
  GuessRanks ranks_;
  uint64_t tick_ = 0;
  int64_t current_layer_ = -1;  // of the last acquire (whose host_ids_ are its misses)
  size_t waits_owed_ = 0;       // the current acquire's experts not waited for yet
  uint64_t pinned_bytes_ = 0;
  DeviceSlotCounters counters_;
};

}  // namespace sluice::experts
