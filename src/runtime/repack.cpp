// repack_experts: binds the model (to learn where its experts are), then writes the sidecar.
#include "sluice/repack.h"

#include "experts/expert_profile.h"
#include "experts/expert_sidecar.h"
#include "format/model_file_open.h"
#include "model/registry.h"

namespace sluice {

std::string expert_sidecar_path(const std::string& model_path) {
  return experts::default_sidecar_path(model_path);
}

void repack_experts(const std::string& model_path, const std::string& out_path,
                    const std::function<void(uint64_t, uint64_t)>& progress,
                    const std::string& coactivation_profile) {
  const ModelFile file = read_model_file(model_path);
  const std::unique_ptr<model::LanguageModel> model = model::load_language_model(file);
  const experts::ExpertLayout& layout = model->expert_layout();
  std::vector<std::vector<int32_t>> order;
  if (!coactivation_profile.empty()) {
    const experts::ExpertProfile profile = experts::ExpertProfile::load(coactivation_profile);
    profile.check_matches(layout, coactivation_profile);
    for (const experts::ExpertProfile::Layer& layer : profile.layers)
      order.push_back(layer.n_expert > 0 ? experts::coactivation_order(layer)
                                         : std::vector<int32_t>{});
  }
  experts::write_expert_sidecar(layout, model_path, out_path, progress, order);
}

}  // namespace sluice
