// read_model_file: opens a model by what it is — a GGUF file (by its magic) or safetensors (a
// .safetensors file, an index.json, or a snapshot directory). No format logic of its own.
#pragma once

#include <string>

#include "format/model_file.h"

namespace sluice {

ModelFile read_model_file(const std::string& path);

}  // namespace sluice
