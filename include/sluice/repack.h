// `sluice repack`: writes the expert-major sidecar of a Mixture-of-Experts model — every routed
// expert one contiguous 4 KiB-aligned extent, so a cache miss is one large direct read. The
// engine uses "<model>.experts" automatically when it is there and refuses it when stale.
// Format: docs/FORMATS.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace sluice {

// The path the engine looks for: "<model_path>.experts".
std::string expert_sidecar_path(const std::string& model_path);

// Reads the model's routed experts and writes the sidecar to out_path (temporary name, then
// renamed). Throws sluice::Error for a dense model or an unreadable file. With a
// `coactivation_profile` (an expert profile saved by a run, --expert-profile-out), each layer's
// experts are stored in co-activation order — experts chosen together side by side, so one read
// serves several misses; an unusable or mismatched profile is a one-line sluice::Error.
void repack_experts(const std::string& model_path, const std::string& out_path,
                    const std::function<void(uint64_t done, uint64_t total)>& progress = {},
                    const std::string& coactivation_profile = {});

}  // namespace sluice
