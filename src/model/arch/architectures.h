// The factories of the architecture files in this folder, one per family; only registry.cpp
// calls them. Each reads its hyper-parameters, binds and checks its tensors, and returns its
// forward.
#pragma once

#include <memory>

#include "format/model_file.h"
#include "model/language_model.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_llama(const ModelFile& file);
std::unique_ptr<LanguageModel> make_qwen2(const ModelFile& file);
std::unique_ptr<LanguageModel> make_qwen3(const ModelFile& file);
std::unique_ptr<LanguageModel> make_gemma3(const ModelFile& file);
std::unique_ptr<LanguageModel> make_gemma4(const ModelFile& file);
std::unique_ptr<LanguageModel> make_muse_glimmer(const ModelFile& file);
std::unique_ptr<LanguageModel> make_qwen3moe(const ModelFile& file);
std::unique_ptr<LanguageModel> make_olmoe(const ModelFile& file);
std::unique_ptr<LanguageModel> make_glm4moe(const ModelFile& file);
std::unique_ptr<LanguageModel> make_deepseek2(const ModelFile& file);
std::unique_ptr<LanguageModel> make_glm_dsa(const ModelFile& file);
std::unique_ptr<LanguageModel> make_deepseek4(const ModelFile& file);
std::unique_ptr<LanguageModel> make_gpt_oss(const ModelFile& file);
std::unique_ptr<LanguageModel> make_qwen35(const ModelFile& file);
std::unique_ptr<LanguageModel> make_qwen35moe(const ModelFile& file);
std::unique_ptr<LanguageModel> make_qwen3next(const ModelFile& file);
std::unique_ptr<LanguageModel> make_laguna(const ModelFile& file);
std::unique_ptr<LanguageModel> make_kimi_linear(const ModelFile& file);

}  // namespace sluice::model
