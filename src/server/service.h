// Service: what every route handler shares — the options, the model once it has loaded (or why
// it failed), its scheduler, the metrics — and the steps common to all three APIs: resolve the
// model a request names, turn messages into prompt tokens, submit a job.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "sluice/server.h"
#include "sluice/tool_calls.h"

namespace sluice::server {

struct ServedModel {
  std::string name;  // what clients address it by ("name:latest" style accepted too)
  std::string path;
  std::shared_ptr<Model> model;
  std::string chat_template;  // the override, or the model's own
  ToolCallGrammar tool_calls;
  std::chrono::system_clock::time_point loaded_at;
  std::chrono::system_clock::time_point modified_at;  // of the model file (or directory)
  uint64_t file_bytes = 0;
};

class Service {
 public:
  explicit Service(const ServerOptions& options);
  ~Service();

  // Loads the model and starts its scheduler (on the caller's thread; /health says 503 meanwhile).
  void load();
  void shutdown(double grace_seconds);

  enum class State { kLoading, kReady, kFailed };
  State state() const { return state_.load(); }
  const std::string& load_error() const { return load_error_; }

  // The model a request names: 503 while loading, 404 when the name is not ours.
  const ServedModel& model(const std::string& requested) const;
  const ServedModel* model_if_ready() const;
  const ServedModel& ready_model() const;  // 503 while loading or after a failed load
  Scheduler& scheduler() { return *scheduler_; }
  Metrics& metrics() { return metrics_; }
  const ServerOptions& options() const { return options_; }

  // messages: [{"role", "content", …}] as Hugging Face templates take them; tools: OpenAI-style
  // list or null. Throws ApiError 400 with the template's message when rendering fails.
  std::vector<int32_t> chat_prompt(const ServedModel& served, const Json& messages,
                                   const Json& tools) const;
  // Queues the job (429 when the queue is full, 503 when stopping) and returns its channel.
  std::shared_ptr<JobChannel> submit(Job job);

 private:
  ServerOptions options_;
  std::atomic<State> state_{State::kLoading};
  std::string load_error_;
  std::unique_ptr<ServedModel> served_;
  std::unique_ptr<Scheduler> scheduler_;
  Metrics metrics_;
};

}  // namespace sluice::server
