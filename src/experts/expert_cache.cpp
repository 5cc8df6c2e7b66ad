// ExpertCache: slots, the (layer, expert) table, reads and eviction.
#include "experts/expert_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kAlign = 4096;
uint64_t align_down(uint64_t v) {
  return v / kAlign * kAlign;
}
uint64_t align_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// One aligned read of an expert: bytes [begin, end) of a file land at `slot_pos` in the slot.
struct Extent {
  uint32_t file_index = 0;
  uint64_t begin = 0, end = 0;
  uint64_t slot_pos = 0;
};

// The extents of one expert: each part's aligned enclosing range, merged where they touch (the
// expert-major layout makes them one), and where each part then sits inside the slot.
size_t plan_extents(const ExpertLayerLayout& layer, int32_t expert,
                    std::array<Extent, kExpertParts>& out,
                    std::array<uint64_t, kExpertParts>& part_offset) {
  std::array<size_t, kExpertParts> order{};
  size_t n_parts = 0;
  for (size_t p = 0; p < kExpertParts; ++p) {
    if (layer.parts[p].present()) order[n_parts++] = p;
  }
  const auto before = [&](size_t a, size_t b) {
    const ExpertTensor &x = layer.parts[a], &y = layer.parts[b];
    return x.file_of(expert) != y.file_of(expert) ? x.file_of(expert) < y.file_of(expert)
                                                  : x.offset_of(expert) < y.offset_of(expert);
  };
  for (size_t i = 1; i < n_parts; ++i) {  // insertion sort of at most four parts
    for (size_t j = i; j > 0 && before(order[j], order[j - 1]); --j)
      std::swap(order[j], order[j - 1]);
  }
  size_t n = 0;
  uint64_t pos = 0;
  for (size_t i = 0; i < n_parts; ++i) {
    const ExpertTensor& part = layer.parts[order[i]];
    const uint64_t offset = part.offset_of(expert);
    const uint32_t file = part.file_of(expert);
    const uint64_t begin = align_down(offset), end = align_up(offset + part.expert_bytes);
    if (n > 0 && out[n - 1].file_index == file && begin <= out[n - 1].end) {
      Extent& last = out[n - 1];
      const uint64_t grown = std::max(last.end, end);
      pos += grown - last.end;
      last.end = grown;
    } else {
      out[n++] = Extent{file, begin, end, pos};
      pos += end - begin;
    }
    part_offset[order[i]] = out[n - 1].slot_pos + (offset - out[n - 1].begin);
  }
  return n;
}

uint64_t make_tag(int32_t slot, uint32_t generation, size_t extent) {
  return (uint64_t(uint32_t(slot)) << 32) | (uint64_t(generation & 0xFFFFFF) << 8) | extent;
}

// A merged read's tag: bit 63 set, the MergedRead's index below.
constexpr uint64_t kMergedTag = uint64_t(1) << 63;
// At most this many extents (and bytes) in one merged read: long enough to serve a token's
// co-activated experts of a layer at once, short enough that the first expert is not kept
// waiting behind a huge read.
constexpr size_t kMaxMerge = 16;
constexpr uint64_t kMaxMergeBytes = uint64_t(64) << 20;
constexpr size_t kMergedPool = 1024;

}  // namespace

uint64_t expert_slot_bytes(const ExpertLayout& layout) {
  const SlotClasses classes = slot_classes(layout);
  return classes.classes.empty() ? 0 : classes.classes.back().slot_bytes;
}

ExpertCache::ExpertCache(const ExpertLayout& layout, const ExpertCacheOptions& options)
    : layout_(layout),
      options_(options),
      classes_(slot_classes(layout, options.per_layer_pools)),
      stats_(layout.layers.size()) {
  const int64_t floor = layout.n_expert_used * int64_t(classes_.classes.size());
  if (options.n_slots < floor) {
    fail("expert cache: ", options.n_slots, " slots is below the floor of ", floor,
         " (the experts one token uses in a layer",
         options.per_layer_pools       ? ", for each layer"
         : classes_.classes.size() > 1 ? ", for each expert size"
                                       : "",
         ")");
  }
  io_ = make_io_engine(options.io_engine, options.queue_depth);
  direct_ = options.direct_io;
  try {
    for (const std::shared_ptr<File>& file : layout.files) {
      files_.push_back(File::open(file->path(), {.direct = direct_}));
    }
  } catch (const Error&) {
    if (!direct_) throw;
    direct_ = false;  // e.g. tmpfs refuses O_DIRECT; buffered reads give the same bytes
    files_.clear();
    for (const std::shared_ptr<File>& file : layout.files)
      files_.push_back(File::open(file->path()));
  }
  // kLruFrequency: each past use (up to four) is worth one token's worth of recency.
  frequency_bonus_ = uint64_t(std::max<int64_t>(layout.n_moe_layers(), 1));
  std::vector<int64_t> counts = classes_.split(options.n_slots, layout.n_expert_used);
  if (!options.layer_slots.empty()) {
    if (!options.per_layer_pools || options.layer_slots.size() != layout.layers.size())
      fail("expert cache: per-layer slot counts need per-layer pools and one count per layer");
    for (size_t il = 0; il < layout.layers.size(); ++il) {
      const int32_t c = classes_.class_of_layer[il];
      if (c < 0) continue;
      const int64_t n = options.layer_slots[il];
      if (n < layout.n_expert_used || n > layout.layers[il].n_expert)
        fail("expert cache: layer ", il, " given ", n, " slots (needs ", layout.n_expert_used,
             " to ", layout.layers[il].n_expert, ")");
      counts[size_t(c)] = n;
    }
  }
  const uint64_t arena_bytes = classes_.bytes(counts);
  arena_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, arena_bytes));
  if (arena_ == nullptr) fail("expert cache: cannot allocate ", arena_bytes, " bytes of slots");
  class_begin_.push_back(0);
  max_acquire_ = SIZE_MAX;
  uint8_t* next = arena_;
  for (size_t c = 0; c < counts.size(); ++c) {
    for (int64_t i = 0; i < counts[c]; ++i, next += classes_.classes[c].slot_bytes) {
      slots_.push_back(Slot{.base = next});
    }
    class_begin_.push_back(int32_t(slots_.size()));
    max_acquire_ = std::min(max_acquire_, size_t(counts[c]));
  }
  for (const ExpertLayerLayout& l : layout.layers)
    n_expert_max_ = std::max(n_expert_max_, l.n_expert);
  table_.assign(layout.layers.size() * size_t(n_expert_max_), -1);
  pinned_.reserve(slots_.size());
  demand_batch_.reserve(slots_.size());
  pending_extents_.reserve(slots_.size() * kExpertParts);
  merged_.resize(options.merge_reads ? std::min(kMergedPool, slots_.size() * kExpertParts / 2 + 1)
                                     : 0);
  for (size_t i = merged_.size(); i > 0; --i) {
    merged_[i - 1].segments.reserve(kMaxMerge);
    merged_[i - 1].members.reserve(kMaxMerge);
    merged_free_.push_back(int32_t(i - 1));
  }
  record_profile_ = options.record_profile;
  if (record_profile_) profile_ = ExpertProfile::for_layout(layout);
  completions_.resize(size_t(std::max(options.queue_depth, 1)) * kExpertParts);
  stats_.slots = uint64_t(slots_.size());
  stats_.slot_bytes = expert_slot_bytes(layout);
}

ExpertCache::~ExpertCache() {
  io_.reset();  // waits for reads in flight: they write into the arena
  std::free(arena_);
}

int32_t& ExpertCache::slot_of(int64_t layer, int32_t expert) {
  return table_[size_t(layer * n_expert_max_ + expert)];
}

// A slot of the layer's size class to (re)use: an empty one, else for a need a guess whose read
// has not started, else the least valuable slot that is neither pinned nor being read.
int32_t ExpertCache::find_victim(int64_t layer, bool for_demand) {
  const int32_t c = classes_.class_of_layer[size_t(layer)];
  int32_t best = -1;
  uint64_t best_score = UINT64_MAX;
  for (size_t i = size_t(class_begin_[size_t(c)]); i < size_t(class_begin_[size_t(c) + 1]); ++i) {
    const Slot& slot = slots_[i];
    if (slot.state == SlotState::kEmpty) return int32_t(i);
    if (slot.pins > 0 || slot.state == SlotState::kLoading) continue;
    // A queued guess is the cheapest victim for a need (nothing was read for it yet); another
    // guess never displaces one.
    if (slot.state == SlotState::kQueued) {
      if (for_demand) return int32_t(i);
      continue;
    }
    uint64_t score = slot.last_use;
    if (options_.policy != EvictionPolicy::kLru)
      score += std::min<uint32_t>(slot.uses, 4) * frequency_bonus_;
    if (options_.policy == EvictionPolicy::kNextLayer) {
      // Layers until this slot's layer runs again: the layer now acquiring (its unpinned
      // experts are next needed a whole token later) is furthest, the next layer nearest.
      const int64_t n = int64_t(layout_.layers.size());
      int64_t until = (slot.layer - layer + n) % n;
      if (until == 0) until = n;
      score += uint64_t(n - until) << 40;  // first by that distance, then by recency and use
    }
    if (score < best_score) {
      best_score = score;
      best = int32_t(i);
    }
  }
  return best;
}

void ExpertCache::forget(int32_t s) {
  Slot& slot = slots_[size_t(s)];
  if (slot.layer >= 0) {
    slot_of(slot.layer, slot.expert) = -1;
    if (slot.speculative && slot.state != SlotState::kQueued) ++stats_.last_step.speculative_wasted;
    if (slot.state == SlotState::kReady) {
      ++stats_.last_step.evictions;
      ++stats_.per_layer[size_t(slot.layer)].evictions;
    }
  }
  slot = Slot{.generation = slot.generation + 1, .base = slot.base};
}

void ExpertCache::note_io_busy() {
  if (busy_since_ns_ == 0 && io_->pending() > 0) busy_since_ns_ = now_ns();
}

void ExpertCache::assign(int32_t s, int64_t layer, int32_t expert, bool speculative) {
  if (slots_[size_t(s)].state == SlotState::kQueued) std::erase(spec_queue_, s);
  forget(s);
  Slot& slot = slots_[size_t(s)];
  slot.layer = layer;
  slot.expert = expert;
  slot.speculative = speculative;
  slot.state = SlotState::kQueued;
  slot_of(layer, expert) = s;
}

void ExpertCache::submit_reads(int32_t s, IoPriority priority) {
  Slot& slot = slots_[size_t(s)];
  std::array<Extent, kExpertParts> extents;
  const size_t n =
      plan_extents(layout_.layers[size_t(slot.layer)], slot.expert, extents, slot.part_offset);
  slot.state = SlotState::kLoading;
  slot.reads_left = int32_t(n);
  slot.demand_io = priority == IoPriority::kDemand;
  if (slot.demand_io) demand_reads_ += int32_t(n);
  ++stats_.last_step.experts_read;
  ++stats_.per_layer[size_t(slot.layer)].experts_read;
  if (slot.speculative) ++stats_.last_step.speculative_reads;
  uint8_t* base = slot.base;
  for (size_t i = 0; i < n; ++i) {
    const Extent& e = extents[i];
    File& file = files_[e.file_index];
    ReadRequest request;
    request.fd = file.fd();
    request.offset = e.begin;
    request.length = std::min(e.end, file.size()) - e.begin;
    // O_DIRECT reads whole blocks; a file's last extent rarely ends on one, so it goes through
    // the mapped file's buffered descriptor instead.
    if (direct_ && request.length % kAlign != 0) request.fd = layout_.files[e.file_index]->fd();
    request.dest = base + e.slot_pos;
    request.tag = make_tag(s, slot.generation, i);
    request.priority = priority;
    io_->submit(request);
    ++stats_.last_step.reads;
  }
  note_io_busy();
}

// Submits the reads of this acquire's misses at once, so that extents adjacent on disk (one
// expert's end is the next one's start, as in an expert-major sidecar) go as one scattered read
// straight into their slots. O_DIRECT extents only merge with O_DIRECT extents: a file's last,
// partial block goes through the buffered descriptor on its own.
void ExpertCache::submit_demand_batch() {
  if (demand_batch_.empty()) return;
  pending_extents_.clear();
  for (const int32_t s : demand_batch_) {
    Slot& slot = slots_[size_t(s)];
    std::array<Extent, kExpertParts> extents;
    const size_t n =
        plan_extents(layout_.layers[size_t(slot.layer)], slot.expert, extents, slot.part_offset);
    slot.state = SlotState::kLoading;
    slot.reads_left = int32_t(n);
    slot.demand_io = true;
    demand_reads_ += int32_t(n);
    ++stats_.last_step.experts_read;
    ++stats_.per_layer[size_t(slot.layer)].experts_read;
    for (size_t i = 0; i < n; ++i) {
      const Extent& e = extents[i];
      pending_extents_.push_back(
          {e.file_index, e.begin, e.end, slot.base + e.slot_pos, s, uint32_t(i)});
    }
  }
  demand_batch_.clear();
  std::sort(pending_extents_.begin(), pending_extents_.end(),
            [](const PendingExtent& a, const PendingExtent& b) {
              return a.file_index != b.file_index ? a.file_index < b.file_index : a.begin < b.begin;
            });
  const auto whole_blocks = [&](const PendingExtent& e) {
    return e.end <= files_[e.file_index].size();
  };
  for (size_t first = 0; first < pending_extents_.size();) {
    size_t last = first + 1;  // the run [first, last) merges into one read
    uint64_t bytes = pending_extents_[first].end - pending_extents_[first].begin;
    if (!merged_free_.empty() && whole_blocks(pending_extents_[first])) {
      while (last < pending_extents_.size() && last - first < kMaxMerge) {
        const PendingExtent &prev = pending_extents_[last - 1], &next = pending_extents_[last];
        if (next.file_index != prev.file_index || next.begin != prev.end || !whole_blocks(next) ||
            bytes + (next.end - next.begin) > kMaxMergeBytes)
          break;
        bytes += next.end - next.begin;
        ++last;
      }
    }
    const PendingExtent& head = pending_extents_[first];
    File& file = files_[head.file_index];
    ReadRequest request;
    request.fd = file.fd();
    request.offset = head.begin;
    request.priority = IoPriority::kDemand;
    if (last - first == 1) {
      request.length = std::min(head.end, file.size()) - head.begin;
      // O_DIRECT reads whole blocks; a file's last extent rarely ends on one, so it goes
      // through the mapped file's buffered descriptor instead.
      if (direct_ && request.length % kAlign != 0)
        request.fd = layout_.files[head.file_index]->fd();
      request.dest = head.dest;
      request.tag = make_tag(head.slot, slots_[size_t(head.slot)].generation, head.extent);
    } else {
      const int32_t index = merged_free_.back();
      merged_free_.pop_back();
      MergedRead& merged = merged_[size_t(index)];
      merged.segments.clear();
      merged.members.clear();
      for (size_t i = first; i < last; ++i) {
        const PendingExtent& e = pending_extents_[i];
        merged.segments.push_back(iovec{e.dest, size_t(e.end - e.begin)});
        merged.members.emplace_back(e.slot, slots_[size_t(e.slot)].generation);
      }
      request.length = bytes;
      request.segments = merged.segments.data();
      request.n_segments = uint32_t(merged.segments.size());
      request.tag = kMergedTag | uint64_t(index);
    }
    io_->submit(request);
    ++stats_.last_step.reads;
    first = last;
  }
  note_io_busy();
}

// Starts queued guesses while no demand read is in flight and the engine has free places: a
// guess reads while the layer computes, never while the layer waits.
void ExpertCache::pump_speculation() {
  if (demand_reads_ > 0) return;
  size_t taken = 0;
  while (taken < spec_queue_.size() && io_->pending() < size_t(options_.queue_depth)) {
    submit_reads(spec_queue_[taken++], IoPriority::kSpeculative);
  }
  spec_queue_.erase(spec_queue_.begin(), spec_queue_.begin() + std::ptrdiff_t(taken));
}

void ExpertCache::complete_extent(int32_t s, uint32_t generation, int error) {
  Slot& slot = slots_[size_t(s)];
  if ((generation & 0xFFFFFF) != (slot.generation & 0xFFFFFF)) return;
  if (error != 0 && slot.error == 0) slot.error = error;
  if (slot.demand_io) --demand_reads_;
  if (--slot.reads_left > 0) return;
  slot.state = SlotState::kReady;
  if (slot.error == 0) {
    const uint64_t bytes = layout_.layers[size_t(slot.layer)].expert_bytes();
    stats_.last_step.bytes_read += bytes;
    stats_.per_layer[size_t(slot.layer)].bytes_read += bytes;
  }
}

void ExpertCache::reap(size_t min_count) {
  const size_t n = io_->reap(completions_, min_count);
  for (size_t i = 0; i < n; ++i) {
    const ReadCompletion& done = completions_[i];
    if ((done.tag & kMergedTag) != 0) {
      const int32_t index = int32_t(done.tag & ~kMergedTag);
      for (const auto& [slot, generation] : merged_[size_t(index)].members)
        complete_extent(slot, generation, done.error);
      merged_free_.push_back(index);
    } else {
      complete_extent(int32_t(done.tag >> 32), uint32_t(done.tag >> 8), done.error);
    }
  }
  if (busy_since_ns_ != 0 && io_->pending() == 0) {
    stats_.last_step.read_ns += now_ns() - busy_since_ns_;
    busy_since_ns_ = 0;
  }
  pump_speculation();
}

void ExpertCache::acquire(int64_t layer, std::span<const int32_t> ids) {
  ++tick_;
  if (record_profile_) profile_.record(layer, ids);
  ExpertCounters& layer_counters = stats_.per_layer[size_t(layer)];
  for (const int32_t id : ids) {
    int32_t s = slot_of(layer, id);
    if (s >= 0 && slots_[size_t(s)].state == SlotState::kQueued) {
      // A guess whose read never started: it saved nothing, so it is a miss read on demand.
      Slot& slot = slots_[size_t(s)];
      std::erase(spec_queue_, s);
      slot.speculative = false;
      slot.state = SlotState::kLoading;  // its reads go with the batch below
      demand_batch_.push_back(s);
      ++stats_.last_step.misses;
      ++layer_counters.misses;
    } else if (s >= 0) {
      Slot& slot = slots_[size_t(s)];
      ++stats_.last_step.hits;
      ++layer_counters.hits;
      if (slot.speculative) {  // a guess read (or being read) before it was needed
        slot.speculative = false;
        ++stats_.last_step.speculative_used;
      }
    } else {
      s = find_victim(layer, true);
      while (s < 0) {
        submit_demand_batch();  // what this acquire already needs may be all there is to wait on
        if (io_->pending() == 0) {
          fail("expert cache: all slots of layer ", layer, "'s size are pinned (it needs more at",
               " once)");
        }
        reap(1);
        s = find_victim(layer, true);
      }
      assign(s, layer, id, /*speculative=*/false);
      slots_[size_t(s)].state = SlotState::kLoading;  // its reads go with the batch below
      demand_batch_.push_back(s);
      ++stats_.last_step.misses;
      ++layer_counters.misses;
    }
    Slot& slot = slots_[size_t(s)];
    ++slot.pins;
    ++slot.uses;
    slot.last_use = tick_;
    pinned_.push_back(s);
  }
  submit_demand_batch();
}

int64_t ExpertCache::prewarm(const ExpertProfile& profile) {
  struct Candidate {
    uint64_t uses;
    int64_t layer;
    int32_t expert;
  };
  std::vector<Candidate> candidates;
  int64_t loaded = 0;
  for (size_t c = 0; c + 1 < class_begin_.size(); ++c) {
    candidates.clear();
    for (size_t il = 0; il < layout_.layers.size() && il < profile.layers.size(); ++il) {
      if (classes_.class_of_layer[il] != int32_t(c)) continue;
      const ExpertProfile::Layer& layer = profile.layers[il];
      for (size_t e = 0; e < layer.uses.size(); ++e) {
        if (layer.uses[e] > 0 && slot_of(int64_t(il), int32_t(e)) < 0)
          candidates.push_back({layer.uses[e], int64_t(il), int32_t(e)});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.uses > b.uses; });
    for (const Candidate& candidate : candidates) {
      const int32_t s = find_victim(candidate.layer, true);
      if (s < 0 || slots_[size_t(s)].state != SlotState::kEmpty) break;  // the pool is full
      assign(s, candidate.layer, candidate.expert, /*speculative=*/false);
      slots_[size_t(s)].state = SlotState::kLoading;
      demand_batch_.push_back(s);
      ++loaded;
    }
  }
  submit_demand_batch();
  while (io_->pending() > 0) reap(1);
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].layer >= 0 && slots_[s].error != 0) forget(int32_t(s));  // read again on need
  }
  // Not a step's reads: the first token must not look slower or faster for them.
  stats_.prewarm.add(stats_.last_step);
  stats_.last_step = {};
  return loaded;
}

bool ExpertCache::ready(int64_t layer, int32_t id) {
  const int32_t s = slot_of(layer, id);
  if (s < 0) return false;
  if (slots_[size_t(s)].state == SlotState::kLoading && io_->pending() > 0) reap(0);
  return slots_[size_t(s)].state == SlotState::kReady;
}

ExpertWeights ExpertCache::wait(int64_t layer, int32_t id) {
  const int32_t s = slot_of(layer, id);
  if (s < 0) fail("expert cache: expert ", id, " of layer ", layer, " was not acquired");
  Slot& slot = slots_[size_t(s)];
  if (slot.state == SlotState::kLoading) {
    const uint64_t start = now_ns();
    while (slot.state == SlotState::kLoading) reap(1);
    const uint64_t waited = now_ns() - start;
    stats_.last_step.io_wait_ns += waited;
    stats_.per_layer[size_t(layer)].io_wait_ns += waited;
  }
  if (slot.error != 0) {
    const int error = slot.error;
    const ExpertTensor& first = layout_.layers[size_t(layer)].parts[0];
    forget(s);  // a later acquire reads it again
    fail("reading expert ", id, " of layer ", layer, " (", first.name, ") from ",
         layout_.files[first.file_index]->path(), ": ", std::strerror(error));
  }
  const ExpertLayerLayout& l = layout_.layers[size_t(layer)];
  const uint8_t* base = slot.base;
  ExpertWeights weights;
  for (size_t p = 0; p < kExpertParts; ++p) {
    const ExpertTensor& part = l.parts[p];
    if (part.present())
      weights.parts[p] =
          MatrixView{part.type, base + slot.part_offset[p], part.n_cols, part.n_rows};
  }
  return weights;
}

void ExpertCache::release(int64_t) {
  for (const int32_t s : pinned_) --slots_[size_t(s)].pins;
  pinned_.clear();
}

// Guesses for other layers that have not started are dropped: their layer has been acquired
// (what it needed is known) or a newer guess replaces them.
void ExpertCache::drop_stale_speculation(int64_t layer) {
  size_t kept = 0;
  for (const int32_t s : spec_queue_) {
    if (slots_[size_t(s)].layer == layer) {
      spec_queue_[kept++] = s;
    } else {
      forget(s);
    }
  }
  spec_queue_.resize(kept);
}

void ExpertCache::prefetch(int64_t layer, std::span<const int32_t> ids) {
  if (!options_.prefetch) return;
  drop_stale_speculation(layer);
  for (const int32_t id : ids) {
    if (slot_of(layer, id) >= 0) continue;
    const int32_t s = find_victim(layer, false);
    if (s < 0) break;  // every slot busy: guesses never wait
    assign(s, layer, id, /*speculative=*/true);
    spec_queue_.push_back(s);
  }
  pump_speculation();
}

void ExpertCache::end_step() {
  if (record_profile_) profile_.end_step();
  if (io_->pending() > 0) reap(0);
  stats_.close_step();
}

}  // namespace sluice::experts
