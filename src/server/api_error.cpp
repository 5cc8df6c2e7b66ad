// Error bodies as each API's clients parse them: OpenAI {"error": {message, type, param, code}},
// Anthropic {"type": "error", "error": {type, message}}, Ollama {"error": message}.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace sluice::server {
namespace {

const char* openai_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

const char* anthropic_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

const char* api_name(Api api) {
  switch (api) {
    case Api::kOllama:
      return "ollama";
    case Api::kOpenAI:
      return "openai";
    case Api::kAnthropic:
      return "anthropic";
    case Api::kPlain:
      return "http";
  }
  return "http";
}

std::string error_body(Api api, int status, const std::string& message, const std::string& param) {
  using nlohmann::json;
  json body;
  switch (api) {
    case Api::kOpenAI:
      body["error"] = {{"message", message},
                       {"type", openai_type(status)},
                       {"param", param.empty() ? json(nullptr) : json(param)},
                       {"code", nullptr}};
      break;
    case Api::kAnthropic:
      body = {{"type", "error"},
              {"error", {{"type", anthropic_type(status)}, {"message", message}}}};
      break;
    case Api::kOllama:
    case Api::kPlain:
      body["error"] = message;
      break;
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace sluice::server
