// repack_experts: binds the model (to learn where its experts are), then writes the sidecar.
#include "sluice/repack.h"

#include "experts/expert_sidecar.h"
#include "format/model_file_open.h"
#include "model/registry.h"

namespace sluice {

std::string expert_sidecar_path(const std::string& model_path) {
  return experts::default_sidecar_path(model_path);
}

void repack_experts(const std::string& model_path, const std::string& out_path,
                    const std::function<void(uint64_t, uint64_t)>& progress) {
  const ModelFile file = read_model_file(model_path);
  const std::unique_ptr<model::LanguageModel> model = model::load_language_model(file);
  experts::write_expert_sidecar(model->expert_layout(), model_path, out_path, progress);
}

}  // namespace sluice
