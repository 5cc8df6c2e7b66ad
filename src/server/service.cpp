// Service: model loading and addressing, prompt building and job submission.
#include "server/service.h"

#include <sys/stat.h>

#include <filesystem>

#include "server/api_error.h"
#include "sluice/chat_prompt.h"
#include "sluice/error.h"

namespace sluice::server {
namespace {

std::string default_name(const std::string& path) {
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p)) p = p.lexically_normal().parent_path() / p.filename();
  std::string stem =
      p.has_extension() && p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
  return stem.empty() ? std::string("model") : stem;
}

uint64_t bytes_on_disk(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) return std::filesystem::file_size(path, error);
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    if (entry.is_regular_file(error)) total += entry.file_size(error);
  }
  return total;
}

std::chrono::system_clock::time_point modification_time(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::chrono::system_clock::now();
  return std::chrono::system_clock::from_time_t(info.st_mtime);
}

}  // namespace

Service::Service(const ServerOptions& options) : options_(options) {}

Service::~Service() {
  shutdown(0);
}

void Service::load() {
  try {
    auto served = std::make_unique<ServedModel>(ServedModel{
        options_.model_name.empty() ? default_name(options_.model_path) : options_.model_name,
        options_.model_path, Model::load(options_.model_path, options_.model), "",
        ToolCallGrammar(""), std::chrono::system_clock::now(),
        modification_time(options_.model_path), bytes_on_disk(options_.model_path)});
    served->chat_template = options_.chat_template_override.empty()
                                ? served->model->chat_template()
                                : options_.chat_template_override;
    served->tool_calls = ToolCallGrammar(served->chat_template);
    SchedulerLimits limits{options_.parallel, options_.cached_sessions, options_.max_queue};
    scheduler_ = std::make_unique<Scheduler>(served->model, options_.session, limits);
    served_ = std::move(served);
    state_ = State::kReady;
  } catch (const std::exception& e) {
    load_error_ = e.what();
    state_ = State::kFailed;
    throw;
  }
}

void Service::shutdown(double grace_seconds) {
  if (scheduler_) scheduler_->shutdown(grace_seconds);
}

const ServedModel* Service::model_if_ready() const {
  return state_ == State::kReady ? served_.get() : nullptr;
}

const ServedModel& Service::ready_model() const {
  const ServedModel* served = model_if_ready();
  if (served == nullptr) {
    throw ApiError(503, state_ == State::kLoading ? "the model is still loading"
                                                  : "the model failed to load: " + load_error_);
  }
  return *served;
}

const ServedModel& Service::model(const std::string& requested) const {
  const ServedModel* served = &ready_model();
  // Ollama clients append a tag; the path and the bare file name work as well.
  const std::string& name = served->name;
  if (requested == name || requested == name + ":latest" || requested == served->path ||
      requested == default_name(served->path)) {
    return *served;
  }
  throw ApiError(404, "model '" + requested + "' not found (this server serves '" + name + "')",
                 "model");
}

std::vector<int32_t> Service::chat_prompt(const ServedModel& served, const Json& messages,
                                          const Json& tools) const {
  ChatPromptOptions prompt_options;
  prompt_options.template_override = options_.chat_template_override;
  if (tools.is_array() && !tools.empty()) prompt_options.tools_json = tools.dump();
  const std::string json = messages.dump(-1, ' ', false, Json::error_handler_t::replace);
  try {
    return build_chat_prompt(*served.model, json, prompt_options).tokens;
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(), "messages");
  }
}

std::shared_ptr<JobChannel> Service::submit(Job job) {
  if (job.request.prompt.empty()) throw ApiError(400, "the prompt is empty", "prompt");
  if (int64_t(job.request.prompt.size()) >= scheduler_->n_ctx()) {
    throw ApiError(400,
                   "the prompt has " + std::to_string(job.request.prompt.size()) +
                       " tokens; the context holds " + std::to_string(scheduler_->n_ctx()),
                   "messages");
  }
  std::shared_ptr<JobChannel> channel = job.channel;
  switch (scheduler_->submit(std::move(job))) {
    case Scheduler::Admission::kQueued:
      return channel;
    case Scheduler::Admission::kQueueFull:
      throw ApiError(429, "too many requests are waiting; retry shortly");
    case Scheduler::Admission::kStopping:
      throw ApiError(503, "the server is shutting down");
  }
  return channel;
}

}  // namespace sluice::server
