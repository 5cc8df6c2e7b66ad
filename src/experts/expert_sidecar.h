// The expert-major sidecar (`sluice repack`): a file beside the model holding every routed
// expert as one contiguous, 4 KiB-aligned extent (gate, up and down back to back), so a cache
// miss is one large direct read instead of one per part. The model file stays canonical (the
// resident weights are mapped from it, llama.cpp still loads it); the sidecar records the
// model's identity (size and a hash of its header) and is refused when stale. Format in
// docs/FORMATS.md. Knows layouts and bytes, no architecture.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "experts/expert_layout.h"

namespace sluice::experts {

// Where a model's sidecar is looked for: "<model path>.experts".
std::string default_sidecar_path(const std::string& model_path);

// Writes the sidecar of `layout` (read from the model at `model_path`) to `out_path`, through a
// temporary name. progress(done_bytes, total_bytes) is called now and then. `order`, when not
// empty ([n_layer], each empty or a permutation of the layer's experts), stores layer il's
// expert order[il][p] at position p — e.g. coactivation_order(), so that experts chosen
// together are adjacent and the cache reads them with one request.
void write_expert_sidecar(const ExpertLayout& layout, const std::string& model_path,
                          const std::string& out_path,
                          const std::function<void(uint64_t, uint64_t)>& progress = {},
                          const std::vector<std::vector<int32_t>>& order = {});

// Points `layout`'s parts at the sidecar's extents. Throws sluice::Error naming the file when
// it is not a sidecar, belongs to another model file (stale), or its experts do not match.
void use_expert_sidecar(ExpertLayout& layout, const std::string& model_path,
                        const std::string& sidecar_path);

}  // namespace sluice::experts
