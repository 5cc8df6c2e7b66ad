// ApiError: a failure answered with an HTTP status and a message naming what was wrong (the
// field, the model, the limit). The adapters throw it; the route wrapper writes it in the
// error shape of the API the request came through. Never crosses the engine thread.
#pragma once

#include <stdexcept>
#include <string>

namespace sluice::server {

enum class Api { kOllama, kOpenAI, kAnthropic, kPlain };
const char* api_name(Api api);  // "ollama", "openai", "anthropic", "http"

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = {})
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }  // the offending field, when one is

 private:
  int status_;
  std::string param_;
};

// The JSON body of an error in `api`'s own shape.
std::string error_body(Api api, int status, const std::string& message,
                       const std::string& param = {});

}  // namespace sluice::server
