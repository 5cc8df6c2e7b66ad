// The architecture registry: general.architecture → the family's factory. The only place that
// switches on the architecture name; an unknown one is refused with the list of known ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/model_file.h"
#include "model/language_model.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> load_language_model(const ModelFile& file);
std::vector<std::string> supported_architectures();

}  // namespace sluice::model
