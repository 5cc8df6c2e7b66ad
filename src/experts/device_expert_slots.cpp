// DeviceExpertSlots: LRU slots in device memory over a host expert source.
#include "experts/device_expert_slots.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kPartAlign = 256;  // what the wide loads of the matmul kernels need, and more
constexpr uintptr_t kPage = 4096;     // the unit host memory is page-locked in

uint64_t aligned(uint64_t bytes) {
  return (bytes + kPartAlign - 1) / kPartAlign * kPartAlign;
}

// Parts of one expert that go over as one copy (Backend::upload_rows): `rows` rows of `width`
// bytes, `host_pitch` apart in host memory and `slot_pitch` apart in the slot.
struct CopyRun {
  const uint8_t* host = nullptr;
  uint64_t offset = 0;  // in the slot
  uint64_t width = 0, rows = 0, host_pitch = 0, slot_pitch = 0;

  // Whether the part at `data`, `offset` in the slot, joins the run: lying as the slot lays
  // it out after a run of one row (an expert-major sidecar: the host's padding between the parts
  // lands in the slot's own), or as the next row (the GGUF's gate, up and down stacks: parts of
  // one size, one stack's size apart).
  bool extend(const uint8_t* data, uint64_t part_offset, uint64_t bytes) {
    if (rows == 0) return false;
    if (rows == 1 && data == host + (part_offset - offset)) {
      width = part_offset - offset + bytes;
      return true;
    }
    if (bytes != width) return false;
    if (rows == 1 && data >= host + width) {
      host_pitch = uint64_t(data - host), slot_pitch = part_offset - offset;
    } else if (data != host + rows * host_pitch || part_offset != offset + rows * slot_pitch) {
      return false;
    }
    ++rows;
    return true;
  }
};

}  // namespace

uint64_t DeviceExpertSlots::slot_bytes(const ExpertLayout& layout) {
  uint64_t largest = 0;
  for (const ExpertLayerLayout& l : layout.layers) {
    uint64_t bytes = 0;
    for (const ExpertTensor& part : l.parts) bytes += aligned(part.expert_bytes);
    largest = std::max(largest, bytes);
  }
  return largest;
}

DeviceExpertSlots::DeviceExpertSlots(std::unique_ptr<ExpertSource> host, const ExpertLayout& layout,
                                     Backend& backend, int64_t n_slots)
    : host_(std::move(host)), layout_(layout), backend_(backend), slot_bytes_(slot_bytes(layout)) {
  if (n_slots < 1) fail("device expert slots: at least one slot is needed, got ", n_slots);
  arena_.resize(backend, size_t(n_slots) * slot_bytes_);
  // The host tier's stacks (the mapped file's experts) page-locked where the backend can: the
  // misses' copies then run at the bus's rate (H200: 55 GB/s pinned against 8 pageable). A page
  // can be locked once, so stacks that overlap (an expert-major sidecar's parts interleave) or
  // share a page (a GGUF's expert tensors often abut) are locked as one range.
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end)
  for (size_t layer = 0; layer < layout.layers.size(); ++layer) {
    for (size_t p = 0; p < kExpertParts; ++p) {
      ExpertStack stack;
      if (!host_->stack(int64_t(layer), ExpertPart(p), stack)) continue;
      const uint64_t bytes =
          uint64_t((stack.count - 1) * stack.stride) + layout.layers[layer].parts[p].expert_bytes;
      const auto begin = reinterpret_cast<uintptr_t>(stack.data);
      ranges.emplace_back(begin, begin + bytes);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 0; i < ranges.size();) {
    auto [begin, end] = ranges[i];
    for (++i; i < ranges.size() && ranges[i].first / kPage <= (end - 1) / kPage; ++i) {
      end = std::max(end, ranges[i].second);
    }
    if (backend.pin_host_memory(reinterpret_cast<const void*>(begin), end - begin)) {
      pinned_bytes_ += end - begin;
    }
  }
  owner_.assign(size_t(n_slots), -1);
  last_use_.assign(size_t(n_slots), 0);
  pinned_.assign(size_t(n_slots), 0);
  ahead_.assign(size_t(n_slots), 0);
  guessed_.assign(size_t(n_slots), 0);
}

ExpertWeights DeviceExpertSlots::views(int64_t layer, int64_t slot) const {
  const ExpertLayerLayout& l = layout_.layers[size_t(layer)];
  const uint8_t* at = arena_.data() + uint64_t(slot) * slot_bytes_;
  ExpertWeights weights;
  for (size_t p = 0; p < kExpertParts; ++p) {
    const ExpertTensor& part = l.parts[p];
    if (!part.present()) continue;
    weights.parts[p] = MatrixView{part.type, at, part.n_cols, part.n_rows};
    at += aligned(part.expert_bytes);
  }
  return weights;
}

bool DeviceExpertSlots::stack(int64_t layer, ExpertPart p, ExpertStack& out) const {
  const ExpertLayerLayout& l = layout_.layers[size_t(layer)];
  if (!l.part(p).present()) return false;
  uint64_t offset = 0;  // the part's place in a slot, as views() lays the parts out
  for (size_t q = 0; q < size_t(p); ++q) offset += aligned(l.parts[q].expert_bytes);
  const ExpertTensor& part = l.part(p);
  out = {part.type,  arena_.data() + offset, int64_t(slot_bytes_), n_slots(), part.n_cols,
         part.n_rows};
  return true;
}

int32_t DeviceExpertSlots::stack_index(int64_t layer, int32_t id) const {
  const auto found = slot_.find(key(layer, id));
  if (found == slot_.end())
    fail("device expert slots: expert ", id, " of layer ", layer, " is not in a slot");
  return int32_t(found->second);
}

DeviceExpertSlots::~DeviceExpertSlots() {
  // Copies still in flight into the arena must land before it is freed.
  backend_.join_ahead();
}

void DeviceExpertSlots::start_prefetches() {
  for (const AheadFill& f : ahead_fills_) {
    fill(f.layer, f.slot, f.host, true);
    ahead_in_flight_.push_back(f.slot);
  }
  ahead_fills_.clear();
}

void DeviceExpertSlots::join_prefetches() {
  if (ahead_in_flight_.empty()) return;
  backend_.join_ahead();
  for (int64_t slot : ahead_in_flight_) ahead_[size_t(slot)] = 0;
  ahead_in_flight_.clear();
}

void DeviceExpertSlots::acquire(int64_t layer, std::span<const int32_t> ids) {
  start_prefetches();  // guesses given slots since the last release: their bytes are owed
  ++tick_;
  waits_owed_ = ids.size();
  host_ids_.clear();
  for (int32_t id : ids) {
    const auto found = slot_.find(key(layer, id));
    if (found == slot_.end()) {
      host_ids_.push_back(id);
      continue;
    }
    pin(found->second);
    ++counters_.hits;
    if (const uint8_t rank = guessed_[size_t(found->second)]; rank != 0) {
      ranks_.used(rank - 1u);
      ++counters_.prefetch_used;
    }
    guessed_[size_t(found->second)] = 0;
  }
  if (!host_ids_.empty()) host_->acquire(layer, host_ids_);
  current_layer_ = layer;
}

bool DeviceExpertSlots::ready(int64_t layer, int32_t id) {
  return slot_.count(key(layer, id)) != 0 || host_->ready(layer, id);
}

// The least recently used slot this acquire has not pinned (empty slots have tick 0).
int64_t DeviceExpertSlots::victim() const {
  int64_t best = -1;
  for (size_t s = 0; s < owner_.size(); ++s) {
    if (pinned_[s] || ahead_[s]) continue;
    if (best < 0 || last_use_[s] < last_use_[size_t(best)]) best = int64_t(s);
  }
  if (best < 0) fail("device expert slots: all ", owner_.size(), " slots are pinned");
  return best;
}

ExpertWeights DeviceExpertSlots::wait(int64_t layer, int32_t id) {
  // Not at acquire: the host reads the next layer's guess between acquire and the first wait,
  // and that read must not wait for these copies too.
  join_prefetches();
  // The acquire's last wait: every miss's copy is queued, so the guesses' copies may follow
  // them now and overlap this layer's compute.
  waits_owed_ -= waits_owed_ > 0 ? 1 : 0;
  int64_t slot = -1;
  if (const auto found = slot_.find(key(layer, id)); found != slot_.end()) {
    slot = found->second;
  } else {
    const ExpertWeights host = host_->wait(layer, id);
    slot = take_slot(layer, id);
    pin(slot);
    fill(layer, slot, host, false);
    ++counters_.misses;
  }
  if (waits_owed_ == 0) start_prefetches();
  return views(layer, slot);
}

int64_t DeviceExpertSlots::take_slot(int64_t layer, int32_t id) {
  const int64_t slot = victim();
  if (owner_[size_t(slot)] >= 0) slot_.erase(uint64_t(owner_[size_t(slot)]));
  guessed_[size_t(slot)] = 0;
  owner_[size_t(slot)] = int64_t(key(layer, id));
  slot_[key(layer, id)] = slot;
  return slot;
}

void DeviceExpertSlots::fill(int64_t layer, int64_t slot, const ExpertWeights& host, bool ahead) {
  const ExpertLayerLayout& l = layout_.layers[size_t(layer)];
  uint8_t* const base = arena_.data() + uint64_t(slot) * slot_bytes_;
  // As few copies as the parts' places in host memory allow: the bus moves one 2.5 MiB copy,
  // contiguous or of rows, ~10% faster than three of 864 KiB (docs/BENCHMARKS.md).
  CopyRun run;
  const auto copy_run = [&] {
    if (run.rows == 0) return;
    backend_.upload_rows(base + run.offset, run.slot_pitch, run.host, run.host_pitch, run.width,
                         run.rows, ahead);
    counters_.bytes_copied += run.width * run.rows;
    ++counters_.copies;
  };
  uint64_t offset = 0;
  for (size_t p = 0; p < kExpertParts; ++p) {
    const ExpertTensor& part = l.parts[p];
    if (!part.present()) continue;
    const auto* data = static_cast<const uint8_t*>(host.parts[p].data);
    if (!run.extend(data, offset, part.expert_bytes)) {
      copy_run();
      run = CopyRun{data, offset, part.expert_bytes, 1};
    }
    offset += aligned(part.expert_bytes);
  }
  copy_run();
}

void DeviceExpertSlots::pin(int64_t slot) {
  pinned_[size_t(slot)] = 1;
  pinned_slots_.push_back(slot);
  last_use_[size_t(slot)] = tick_;
}

void DeviceExpertSlots::release(int64_t layer) {
  start_prefetches();
  for (int64_t slot : pinned_slots_) pinned_[size_t(slot)] = 0;
  pinned_slots_.clear();
  if (!host_ids_.empty()) host_->release(layer);
  host_ids_.clear();
}

void DeviceExpertSlots::prefetch(int64_t layer, std::span<const int32_t> ids) {
  if (!host_->always_in_stack()) {
    prefetch_ids_.clear();
    for (int32_t id : ids) {
      if (slot_.count(key(layer, id)) == 0) prefetch_ids_.push_back(id);
    }
    if (!prefetch_ids_.empty()) host_->prefetch(layer, prefetch_ids_);
    return;
  }
  // Slots left once the current acquire's misses (not loaded yet) have theirs.
  int64_t free =
      n_slots() - int64_t(pinned_slots_.size() + ahead_in_flight_.size() + ahead_fills_.size());
  for (int32_t id : host_ids_) {
    if (slot_.count(key(current_layer_, id)) == 0) --free;
  }
  for (size_t rank = 0; rank < ids.size() && free > 0; ++rank) {
    if (slot_.count(key(layer, ids[rank])) != 0 || !ranks_.worth_copying(rank)) continue;
    const int64_t slot = take_slot(layer, ids[rank]);
    ahead_[size_t(slot)] = 1;
    guessed_[size_t(slot)] = uint8_t(std::min<size_t>(rank + 1, 255));
    last_use_[size_t(slot)] = tick_;
    ahead_fills_.push_back({layer, slot, host_->wait(layer, ids[rank])});
    ranks_.copied(rank);
    ++counters_.prefetched;
    --free;
  }
}

size_t DeviceExpertSlots::max_acquire() const {
  return std::min(host_->max_acquire(), owner_.size());
}

}  // namespace sluice::experts
