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

#include <sys/uio.h>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "experts/expert_profile.h"
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
  // With per_layer_pools: each layer's slots ([n_layer], 0 where a layer has no routed experts;
  // e.g. layer_budgets_from_profile); empty: n_slots shared out equally.
  std::vector<int64_t> layer_slots{};
  // One read request for the demand misses of one acquire whose extents are adjacent on disk
  // (an expert-major sidecar ordered by co-activation puts experts chosen together side by side).
  bool merge_reads = true;
  bool record_profile = false;  // count what the router asks for (profile())
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

  // Loads the experts the profile used most — per pool, the most used (layer, expert) pairs of
  // its layers, as many as it has slots — and waits for them, before the first token. Its reads
  // are counted in stats().prewarm, not in any step. Returns how many experts it loaded.
  int64_t prewarm(const ExpertProfile& profile);
  // What the router asked for since the cache was made (record_profile), else nullptr.
  const ExpertProfile* profile() const { return record_profile_ ? &profile_ : nullptr; }

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
  void submit_demand_batch();
  void complete_extent(int32_t slot, uint32_t generation, int error);
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
  std::vector<int32_t> pinned_;        // slots pinned by the current acquire
  std::vector<int32_t> spec_queue_;    // kQueued slots, oldest first
  std::vector<int32_t> demand_batch_;  // slots of this acquire's misses, reads not yet submitted
  // A read request covering extents of several slots; its tag has bit 63 set and its index.
  struct MergedRead {
    std::vector<iovec> segments;                        // [<= kMaxMerge] one per extent
    std::vector<std::pair<int32_t, uint32_t>> members;  // [<= kMaxMerge] (slot, generation)
  };
  // An extent of a demand miss waiting in submit_demand_batch: file range and where it lands.
  struct PendingExtent {
    uint32_t file_index = 0;
    uint64_t begin = 0, end = 0;
    uint8_t* dest = nullptr;
    int32_t slot = -1;
    uint32_t extent = 0;  // its index among the slot's extents (the tag of an unmerged read)
  };
  std::vector<PendingExtent> pending_extents_;  // reserved up front
  std::vector<MergedRead> merged_;              // a pool, reserved up front
  std::vector<int32_t> merged_free_;            // indices into merged_
  int32_t demand_reads_ = 0;                    // demand extents in flight
  std::vector<ReadCompletion> completions_;
  uint64_t tick_ = 0;             // advances once per acquire (one layer)
  uint64_t frequency_bonus_ = 0;  // ticks one past use is worth (kLruFrequency)
  uint64_t busy_since_ns_ = 0;    // when reads went from none to some in flight
  ExpertStats stats_;
  bool record_profile_ = false;
  ExpertProfile profile_;
};

}  // namespace sluice::experts
