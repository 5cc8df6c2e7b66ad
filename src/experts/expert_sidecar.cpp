// The sidecar: a 16-byte preamble (magic, JSON length), a JSON header, then extents at 4 KiB.
#include "experts/expert_sidecar.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"
#include "io/output_file.h"

namespace sluice::experts {
namespace {

constexpr char kMagic[8] = {'S', 'L', 'X', 'P', 'E', 'R', 'T', '1'};
constexpr uint64_t kAlign = 4096;
uint64_t align_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

// Identity of a model file: its size and the FNV-1a hash of its first MiB (a GGUF header with
// its metadata and tensor table: any re-quantization, re-conversion or edit changes it).
std::string model_identity(const std::string& model_path) {
  File file = File::open(model_path);
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(file.size(), uint64_t(1) << 20)));
  file.read_at(0, head);
  const uint64_t hash = fnv1a64(head);
  char text[64];
  std::snprintf(text, sizeof text, "%llu:%016llx", static_cast<unsigned long long>(file.size()),
                static_cast<unsigned long long>(hash));
  return text;
}

// Bytes of one expert's extent: its parts back to back, each starting 64-byte aligned.
uint64_t extent_bytes(const ExpertLayerLayout& layer, std::array<uint64_t, kExpertParts>& at) {
  uint64_t bytes = 0;
  for (size_t p = 0; p < kExpertParts; ++p) {
    if (!layer.parts[p].present()) continue;
    at[p] = bytes;
    bytes = (bytes + layer.parts[p].expert_bytes + 63) / 64 * 64;
  }
  return align_up(bytes);
}

// Whether `order` is a permutation of [0, n).
bool is_permutation_of(const std::vector<int32_t>& order, int64_t n) {
  if (int64_t(order.size()) != n) return false;
  std::vector<bool> seen(size_t(n), false);
  for (const int32_t e : order) {
    if (e < 0 || e >= n || seen[size_t(e)]) return false;
    seen[size_t(e)] = true;
  }
  return true;
}

}  // namespace

std::string default_sidecar_path(const std::string& model_path) {
  return model_path + ".experts";
}

void write_expert_sidecar(const ExpertLayout& layout, const std::string& model_path,
                          const std::string& out_path,
                          const std::function<void(uint64_t, uint64_t)>& progress,
                          const std::vector<std::vector<int32_t>>& order) {
  if (layout.empty()) fail(model_path, ": has no routed experts to repack");
  if (!order.empty() && order.size() != layout.layers.size())
    fail(out_path, ": an expert order needs one entry per layer");
  const auto order_of = [&](size_t il) -> const std::vector<int32_t>* {
    return order.empty() || order[il].empty() ? nullptr : &order[il];
  };
  nlohmann::json header = {{"format", "sluice expert-major sidecar"},
                           {"version", 1},
                           {"model", model_identity(model_path)},
                           {"layers", nlohmann::json::array()}};
  uint64_t data = 0, total = 0;
  std::vector<std::array<uint64_t, kExpertParts>> part_at(layout.layers.size());
  std::vector<uint64_t> extent(layout.layers.size(), 0), first(layout.layers.size(), 0);
  for (size_t il = 0; il < layout.layers.size(); ++il) {
    const ExpertLayerLayout& layer = layout.layers[il];
    if (layer.n_expert == 0) continue;
    extent[il] = extent_bytes(layer, part_at[il]);
    first[il] = data;
    data += extent[il] * uint64_t(layer.n_expert);
    total += layer.expert_bytes() * uint64_t(layer.n_expert);
    nlohmann::json parts = nlohmann::json::array();
    for (size_t p = 0; p < kExpertParts; ++p) {
      const ExpertTensor& t = layer.parts[p];
      if (!t.present()) continue;
      parts.push_back({{"part", expert_part_name(ExpertPart(p))},
                       {"tensor", t.name},
                       {"type", std::string(qtype_name(t.type))},
                       {"bytes", t.expert_bytes},
                       {"offset", part_at[il][p]}});
    }
    nlohmann::json entry = {{"layer", il},
                            {"n_expert", layer.n_expert},
                            {"extent_bytes", extent[il]},
                            {"first_extent", first[il]},
                            {"parts", parts}};
    if (const std::vector<int32_t>* o = order_of(il)) {
      if (!is_permutation_of(*o, layer.n_expert))
        fail(out_path, ": the expert order of layer ", il, " is not a permutation");
      entry["order"] = *o;  // position -> expert
    }
    header["layers"].push_back(entry);
  }
  const std::string json = header.dump();
  const uint64_t data_start = align_up(16 + json.size());
  OutputFile out(out_path);
  const uint64_t json_length = json.size();
  out.write(kMagic, sizeof kMagic);
  out.write(&json_length, sizeof json_length);
  out.write(json.data(), json.size());
  out.write_zeros(data_start - out.position());

  std::vector<File> files;
  for (const std::shared_ptr<File>& f : layout.files) files.push_back(File::open(f->path()));
  std::vector<uint8_t> buffer;
  uint64_t done = 0;
  for (size_t il = 0; il < layout.layers.size(); ++il) {
    const ExpertLayerLayout& layer = layout.layers[il];
    buffer.assign(size_t(extent[il]), 0);
    const std::vector<int32_t>* o = order_of(il);
    for (int32_t position = 0; position < int32_t(layer.n_expert); ++position) {
      const int32_t e = o != nullptr ? (*o)[size_t(position)] : position;
      std::fill(buffer.begin(), buffer.end(), uint8_t(0));
      for (size_t p = 0; p < kExpertParts; ++p) {
        const ExpertTensor& t = layer.parts[p];
        if (!t.present()) continue;
        files[t.file_of(e)].read_at(t.offset_of(e),
                                    {buffer.data() + part_at[il][p], size_t(t.expert_bytes)});
        done += t.expert_bytes;
      }
      out.write(buffer.data(), buffer.size());
      if (progress) progress(done, total);
    }
  }
  out.commit();
}

void use_expert_sidecar(ExpertLayout& layout, const std::string& model_path,
                        const std::string& sidecar_path) {
  auto file = std::make_shared<File>(File::open(sidecar_path));
  char magic[8] = {};
  uint64_t json_length = 0;
  if (file->size() < 16) fail(sidecar_path, ": not an expert sidecar (too short)");
  file->read_at(0, {reinterpret_cast<uint8_t*>(magic), 8});
  file->read_at(8, {reinterpret_cast<uint8_t*>(&json_length), 8});
  if (std::memcmp(magic, kMagic, 8) != 0 || json_length > file->size() - 16) {
    fail(sidecar_path, ": not an expert sidecar (bad magic or header length)");
  }
  std::string json(size_t(json_length), '\0');
  file->read_at(16, {reinterpret_cast<uint8_t*>(json.data()), json.size()});
  nlohmann::json header = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.contains("model") || !header.contains("layers")) {
    fail(sidecar_path, ": not an expert sidecar (unreadable header)");
  }
  if (header["model"] != model_identity(model_path)) {
    fail(sidecar_path, ": stale: it was made from another version of ", model_path,
         " (re-run `sluice repack ", model_path, "`, or delete it)");
  }
  const uint64_t data_start = align_up(16 + json_length);
  const uint32_t file_index = uint32_t(layout.files.size());
  ExpertLayout updated = layout;
  for (const nlohmann::json& entry : header["layers"]) {
    const size_t il = entry.value("layer", size_t(0));
    if (il >= updated.layers.size() ||
        updated.layers[il].n_expert != entry.value("n_expert", int64_t(-1))) {
      fail(sidecar_path, ": layer ", il, " does not match the model's experts");
    }
    ExpertLayerLayout& layer = updated.layers[il];
    const uint64_t stride = entry.value("extent_bytes", uint64_t(0));
    std::vector<int32_t> order_of_position;
    if (entry.contains("order")) {
      const nlohmann::json& o = entry["order"];
      if (o.is_array()) {
        for (const nlohmann::json& e : o)
          order_of_position.push_back(e.is_number_integer() ? e.get<int32_t>() : -1);
      }
      if (!is_permutation_of(order_of_position, layer.n_expert))
        fail(sidecar_path, ": layer ", il, "'s expert order is not a permutation");
    }
    const uint64_t first = data_start + entry.value("first_extent", uint64_t(0));
    for (const nlohmann::json& part : entry["parts"]) {
      const std::string name = part.value("part", "");
      size_t p = 0;
      while (p < kExpertParts && name != expert_part_name(ExpertPart(p))) ++p;
      if (p == kExpertParts || layer.parts[p].expert_bytes != part.value("bytes", uint64_t(0)) ||
          std::string(qtype_name(layer.parts[p].type)) != part.value("type", "")) {
        fail(sidecar_path, ": layer ", il, " part '", name, "' does not match the model");
      }
      layer.parts[p].file_index = file_index;
      layer.parts[p].offset = first + part.value("offset", uint64_t(0));
      layer.parts[p].expert_stride = stride;
      layer.parts[p].expert_offsets.clear();  // the sidecar's extents are regular
      layer.parts[p].expert_files.clear();
      if (order_of_position.empty()) continue;
      // Ordered (by co-activation): expert order[q] sits at position q.
      std::vector<uint64_t>& offsets = layer.parts[p].expert_offsets;
      offsets.resize(size_t(layer.n_expert));
      for (size_t q = 0; q < order_of_position.size(); ++q)
        offsets[size_t(order_of_position[q])] = layer.parts[p].offset + q * stride;
    }
    if (first + stride * uint64_t(layer.n_expert) > file->size()) fail(sidecar_path, ": truncated");
  }
  for (size_t il = 0; il < updated.layers.size(); ++il) {
    for (const ExpertTensor& part : updated.layers[il].parts) {
      if (part.present() && part.file_index != file_index) {
        fail(sidecar_path, ": has no extents for layer ", il, " (", part.name, ")");
      }
    }
  }
  updated.files.push_back(std::move(file));
  layout = std::move(updated);
}

}  // namespace sluice::experts
