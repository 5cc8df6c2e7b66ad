// Model::load and LoadedModel: opening, checking and summarising a model.
#include "runtime/loaded_model.h"

#include <sched.h>

#include <filesystem>
#include <thread>

#include "core/error.h"
#include "experts/resident_experts.h"
#include "format/model_file_open.h"
#include "model/registry.h"

namespace sluice {

int default_thread_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

LoadedModel::LoadedModel(const std::string& path, const ModelOptions& options)
    : file_(read_model_file(path)),
      language_model_(model::load_language_model(file_)),
      tokenizer_(TextTokenizer::from_model_file(path)) {
  if (options.backend != "cpu") {
    fail("backend '", options.backend, "' is not available (this build has: cpu)");
  }
  if (options.n_threads < 0 || options.n_threads > 1024) {
    fail("threads must be between 1 and 1024 (or 0 for automatic), got ", options.n_threads);
  }
  const model::ModelSummary& summary = language_model_->summary();
  if (int64_t(tokenizer_.n_vocab()) > summary.n_vocab) {
    fail(path, ": the tokenizer has ", tokenizer_.n_vocab(), " tokens but the model only ",
         summary.n_vocab, " logits");
  }
  info_.path = path;
  info_.architecture = summary.architecture;
  const MetaValue* name = file_.find("general.name");
  info_.name = name != nullptr && name->as_string() != nullptr
                   ? *name->as_string()
                   : std::filesystem::path(path).filename().string();
  info_.n_ctx_train = summary.n_ctx_train;
  info_.n_vocab = summary.n_vocab;
  info_.n_layer = summary.n_layer;
  info_.n_embd = summary.n_embd;
  for (const TensorInfo& tensor : file_.tensors()) info_.weight_bytes += tensor.n_bytes;
  const experts::ExpertLayout& layout = language_model_->expert_layout();
  if (!layout.empty()) experts_ = std::make_unique<experts::ResidentExperts>(layout);
  pool_ = std::make_unique<ThreadPool>(options.n_threads > 0 ? options.n_threads
                                                             : default_thread_count());
}

std::shared_ptr<Model> Model::load(const std::string& path, const ModelOptions& options) {
  return std::make_shared<LoadedModel>(path, options);
}

}  // namespace sluice
