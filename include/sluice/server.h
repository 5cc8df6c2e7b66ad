// `sluice serve` through the public API: one model behind the Ollama, OpenAI and Anthropic HTTP
// APIs. The CLI parses flags into ServerOptions and calls serve(); everything else (listener,
// adapters, scheduler, sessions, metrics) stays behind it.
#pragma once

#include <cstdint>
#include <string>

#include "sluice/engine.h"

namespace sluice {

struct ServerOptions {
  std::string model_path;  // GGUF file or safetensors snapshot directory
  std::string model_name;  // the name clients address it by; "": the file name
  ModelOptions model;
  SessionOptions session;
  std::string host = "127.0.0.1";
  int port = 11435;
  std::string api_key;      // "": no authentication
  std::string cors_origin;  // "": no CORS headers
  uint64_t max_body_bytes = uint64_t(32) << 20;
  int parallel = 4;         // requests generating at once (each step advances each one token)
  int cached_sessions = 8;  // KV caches kept for prefix reuse (>= parallel)
  int max_queue = 64;       // requests waiting beyond `parallel`; more: 429
  std::string chat_template_override;  // Jinja text replacing the model's template
  double shutdown_grace_seconds = 10;  // SIGINT/SIGTERM: in-flight requests get this long
  bool access_log = true;              // one line per request on stderr
};

// Listens, loads the model in the background (/health says 503 until it is ready), serves until
// SIGINT or SIGTERM, then stops accepting, lets in-flight requests finish within the grace
// period (cancelling the rest) and returns 0. Throws sluice::Error when it cannot listen or
// load the model.
int serve(const ServerOptions& options);

}  // namespace sluice
