// ExpertCache: the ExpertSource of a model whose routed experts stream from disk. A fixed pool
// of slots in RAM (each holds one expert: all its parts, read as 4 KiB-aligned extents so
// O_DIRECT works; one pool per slot size when layers store their experts in different types,
// slot_classes.h), a table from (layer, expert) to slot, and an IoEngine that reads misses at
// queue depth. A slot in use (pinned between acquire and release) or being read is never
// evicted. Demand reads go to the engine at once; speculative ones wait in the cache's own queue
// until no demand read is in flight (and the engine has a free place), so guesses read while
// the forward computes, and a stale guess still waiting is dropped whole. Single-threaded: the
// forward thread calls everything. Knows no architecture.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experts/expert_source.h"
#include "experts/slot_classes.h"
#include "io/io_engine.h"

namespace sluice::experts {

enum class EvictionPolicy : uint8_t {
  kLru,           // least recently used
  kLruFrequency,  // least recently used, with each past use worth some recency (capped)
  kNextLayer,     // the expert whose layer runs again last (layers run in order, token after
                  // token), ties by kLruFrequency
};

struct ExpertCacheOptions {
  int64_t n_slots = 0;  // >= the floor: n_expert_used per slot size class
  IoEngineKind io_engine = IoEngineKind::kAuto;
  int queue_depth = 32;
  bool direct_io = true;  // O_DIRECT; falls back to buffered reads where the file system refuses
  bool prefetch = true;   // act on prefetch hints
  EvictionPolicy policy = EvictionPolicy::kLruFrequency;
  bool per_layer_pools = false;  // one pool per layer instead of one per expert size
};

// Bytes of the largest slot for this layout: every part of the largest expert with room to read
// each part's 4 KiB-aligned enclosing extent.
uint64_t expert_slot_bytes(const ExpertLayout& layout);

class ExpertCache final : public ExpertSource {
 public:
  ExpertCache(const ExpertLayout& layout, const ExpertCacheOptions& options);
  ~ExpertCache() override;

  void acquire(int64_t layer, std::span<const int32_t> ids) override;
  bool ready(int64_t layer, int32_t id) override;
  ExpertWeights wait(int64_t layer, int32_t id) override;
  void release(int64_t layer) override;
  void prefetch(int64_t layer, std::span<const int32_t> ids) override;
  bool wants_prefetch() const override { return options_.prefetch; }
  size_t max_acquire() const override { return max_acquire_; }
  void end_step() override;
  const ExpertStats& stats() const override { return stats_; }

  const char* io_engine_name() const { return io_->name(); }
  bool direct_io() const { return direct_; }

 private:
  // kQueued: reserved for a guess whose reads have not been submitted yet.
  enum class SlotState : uint8_t { kEmpty, kQueued, kLoading, kReady };
  struct Slot {
    int64_t layer = -1;
    int32_t expert = -1;
    SlotState state = SlotState::kEmpty;
    int32_t pins = 0;
    int32_t reads_left = 0;    // extents still in flight
    int error = 0;             // errno of a failed read
    bool speculative = false;  // read on a guess and not yet acquired
    bool demand_io = false;    // its reads in flight count in demand_reads_
    uint64_t last_use = 0;
    uint32_t uses = 0;
    uint32_t generation = 0;  // tags completions, so a reused slot ignores nothing stale
    uint8_t* base = nullptr;  // its bytes in the arena
    std::array<uint64_t, kExpertParts> part_offset{};  // of each part inside the slot
  };

  int32_t& slot_of(int64_t layer, int32_t expert);
  int32_t find_victim(int64_t layer, bool for_demand);
  void assign(int32_t slot, int64_t layer, int32_t expert, bool speculative);
  void submit_reads(int32_t slot, IoPriority priority);
  void pump_speculation();
  void forget(int32_t slot);
  void reap(size_t min_count);
  void drop_stale_speculation(int64_t layer);
  void note_io_busy();

  const ExpertLayout& layout_;
  ExpertCacheOptions options_;
  std::unique_ptr<IoEngine> io_;
  std::vector<File> files_;  // the layout's files opened for streaming (O_DIRECT if allowed)
  bool direct_ = false;
  SlotClasses classes_;
  std::vector<int32_t> class_begin_;  // [n_classes + 1]: class c's slots are [begin[c], begin[c+1])
  size_t max_acquire_ = 0;            // the smallest class's slot count
  uint8_t* arena_ = nullptr;          // every slot, class by class, 4 KiB aligned
  std::vector<Slot> slots_;
  std::vector<int32_t> table_;  // [n_layer, n_expert_max] -> slot or -1
  int64_t n_expert_max_ = 0;
  std::vector<int32_t> pinned_;      // slots pinned by the current acquire
  std::vector<int32_t> spec_queue_;  // kQueued slots, oldest first
  int32_t demand_reads_ = 0;         // demand extents in flight
  std::vector<ReadCompletion> completions_;
  uint64_t tick_ = 0;             // advances once per acquire (one layer)
  uint64_t frequency_bonus_ = 0;  // ticks one past use is worth (kLruFrequency)
  uint64_t busy_since_ns_ = 0;    // when reads went from none to some in flight
  ExpertStats stats_;
};

}  // namespace sluice::experts
