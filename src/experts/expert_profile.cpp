// ExpertProfile: recording, the JSON file, per-layer budgets, pre-warm and co-activation order.
#include "experts/expert_profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace sluice::experts {
namespace {

constexpr const char* kFormat = "sluice expert profile";

[[noreturn]] void bad_profile(const std::string& path, const std::string& why) {
  fail(path, ": not a usable expert profile (", why, ")");
}

}  // namespace

ExpertProfile ExpertProfile::for_layout(const ExpertLayout& layout) {
  ExpertProfile profile;
  profile.n_expert_used = layout.n_expert_used;
  profile.layers.resize(layout.layers.size());
  for (size_t il = 0; il < layout.layers.size(); ++il) {
    Layer& layer = profile.layers[il];
    layer.n_expert = layout.layers[il].n_expert;
    layer.uses.assign(size_t(layer.n_expert), 0);
    layer.together.assign(size_t(layer.n_expert * layer.n_expert), 0);
    layer.step.reserve(size_t(layout.n_expert_used));
  }
  return profile;
}

void ExpertProfile::record(int64_t layer_index, std::span<const int32_t> ids) {
  Layer& layer = layers[size_t(layer_index)];
  for (const int32_t id : ids) {
    ++layer.uses[size_t(id)];
    if (layer.step.size() < size_t(n_expert_used)) {
      layer.step.push_back(id);
    } else {
      layer.step_overflow = true;
    }
  }
}

void ExpertProfile::end_step() {
  // Only one token's choice says which experts fire together: a prefill chunk acquires the
  // union of its tokens' experts (maybe in windows), so its pairs are not counted.
  bool first_moe_layer = true;
  for (Layer& layer : layers) {
    if (layer.n_expert == 0) continue;
    const size_t n = size_t(layer.n_expert);
    if (!layer.step_overflow && !layer.step.empty()) {
      if (first_moe_layer) ++tokens;
      for (size_t i = 0; i < layer.step.size(); ++i) {
        for (size_t j = i + 1; j < layer.step.size(); ++j) {
          ++layer.together[size_t(layer.step[i]) * n + size_t(layer.step[j])];
          ++layer.together[size_t(layer.step[j]) * n + size_t(layer.step[i])];
        }
      }
    }
    first_moe_layer = false;
    layer.step.clear();
    layer.step_overflow = false;
  }
}

void ExpertProfile::save(const std::string& path) const {
  nlohmann::json json = {{"format", kFormat},        {"version", 1},
                         {"n_layer", layers.size()}, {"n_expert_used", n_expert_used},
                         {"tokens", tokens},         {"layers", nlohmann::json::array()}};
  for (size_t il = 0; il < layers.size(); ++il) {
    const Layer& layer = layers[il];
    if (layer.n_expert == 0) continue;
    nlohmann::json pairs = nlohmann::json::array();  // [a, b, count] with a < b, count > 0
    const size_t n = size_t(layer.n_expert);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        if (layer.together[a * n + b] != 0) pairs.push_back({a, b, layer.together[a * n + b]});
      }
    }
    json["layers"].push_back(
        {{"layer", il}, {"n_expert", layer.n_expert}, {"uses", layer.uses}, {"together", pairs}});
  }
  // Beside the target, then renamed over it: a reader never sees half a profile.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << json.dump() << "\n";
    if (!out.flush()) {
      std::remove(temporary.c_str());
      fail(path, ": cannot write the expert profile");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    fail(path, ": cannot write the expert profile");
  }
}

ExpertProfile ExpertProfile::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the expert profile");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) bad_profile(path, "not JSON");
  if (json.value("format", "") != kFormat || json.value("version", 0) != 1)
    bad_profile(path, "wrong format or version");
  try {
    ExpertProfile profile;
    profile.n_expert_used = json.at("n_expert_used").get<int64_t>();
    profile.tokens = json.at("tokens").get<uint64_t>();
    const size_t n_layer = json.at("n_layer").get<size_t>();
    if (n_layer > 65536) bad_profile(path, "implausible n_layer");
    profile.layers.resize(n_layer);
    for (const nlohmann::json& entry : json.at("layers")) {
      const size_t il = entry.at("layer").get<size_t>();
      const int64_t n_expert = entry.at("n_expert").get<int64_t>();
      if (il >= n_layer || n_expert <= 0 || n_expert > 65536)
        bad_profile(path, "layer index or expert count out of range");
      Layer& layer = profile.layers[il];
      layer.n_expert = n_expert;
      layer.uses = entry.at("uses").get<std::vector<uint64_t>>();
      if (int64_t(layer.uses.size()) != n_expert) bad_profile(path, "uses of the wrong length");
      const size_t n = size_t(n_expert);
      layer.together.assign(n * n, 0);
      for (const nlohmann::json& pair : entry.at("together")) {
        const size_t a = pair.at(0).get<size_t>(), b = pair.at(1).get<size_t>();
        if (a >= n || b >= n) bad_profile(path, "co-activation pair out of range");
        layer.together[a * n + b] = layer.together[b * n + a] = pair.at(2).get<uint32_t>();
      }
    }
    return profile;
  } catch (const nlohmann::json::exception& e) {
    bad_profile(path, std::string("missing or mistyped field: ") + e.what());
  }
}

void ExpertProfile::check_matches(const ExpertLayout& layout, const std::string& path) const {
  if (layers.size() != layout.layers.size() || n_expert_used != layout.n_expert_used) {
    fail(path, ": the expert profile is of another model (", layers.size(), " layers, ",
         n_expert_used, " experts per token; this model has ", layout.layers.size(), " and ",
         layout.n_expert_used, ")");
  }
  for (size_t il = 0; il < layers.size(); ++il) {
    if (layers[il].n_expert != layout.layers[il].n_expert) {
      fail(path, ": the expert profile is of another model (layer ", il, " has ",
           layers[il].n_expert, " experts there, ", layout.layers[il].n_expert, " here)");
    }
  }
}

std::vector<int64_t> layer_budgets_from_profile(const ExpertProfile& profile, int64_t n_slots,
                                                int64_t floor) {
  std::vector<int64_t> budget(profile.layers.size(), 0);
  struct Candidate {
    uint64_t uses;
    size_t layer;
  };
  std::vector<Candidate> rest;  // every (layer, expert) beyond each layer's floor
  int64_t spare = n_slots;
  for (size_t il = 0; il < profile.layers.size(); ++il) {
    const ExpertProfile::Layer& layer = profile.layers[il];
    if (layer.n_expert == 0) continue;
    std::vector<uint64_t> uses = layer.uses;
    std::sort(uses.begin(), uses.end(), std::greater<>());
    budget[il] = std::min(floor, layer.n_expert);
    spare -= budget[il];
    for (size_t i = size_t(budget[il]); i < uses.size(); ++i) rest.push_back({uses[i], il});
  }
  // Most used first; equal counts go round-robin-ish by layer order (stable sort).
  std::stable_sort(rest.begin(), rest.end(),
                   [](const Candidate& a, const Candidate& b) { return a.uses > b.uses; });
  for (size_t i = 0; i < rest.size() && spare > 0; ++i, --spare) ++budget[rest[i].layer];
  return budget;
}

std::vector<int32_t> experts_by_use(const ExpertProfile::Layer& layer) {
  std::vector<int32_t> order(size_t(layer.n_expert));
  for (size_t e = 0; e < order.size(); ++e) order[e] = int32_t(e);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return layer.uses[size_t(a)] > layer.uses[size_t(b)];
  });
  return order;
}

std::vector<int32_t> coactivation_order(const ExpertProfile::Layer& layer) {
  const size_t n = size_t(layer.n_expert);
  const std::vector<int32_t> by_use = experts_by_use(layer);
  std::vector<int32_t> order;
  order.reserve(n);
  std::vector<bool> placed(n, false);
  size_t next_start = 0;  // into by_use
  while (order.size() < n) {
    int32_t tail = -1;
    if (!order.empty()) {
      // The unplaced expert most often chosen with the tail; none when it has no partner left.
      const size_t t = size_t(order.back());
      uint32_t best = 0;
      for (size_t e = 0; e < n; ++e) {
        if (!placed[e] && layer.together[t * n + e] > best) {
          best = layer.together[t * n + e];
          tail = int32_t(e);
        }
      }
    }
    if (tail < 0) {
      while (placed[size_t(by_use[next_start])]) ++next_start;
      tail = by_use[next_start];
    }
    placed[size_t(tail)] = true;
    order.push_back(tail);
  }
  return order;
}

}  // namespace sluice::experts
