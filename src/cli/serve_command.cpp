// `sluice serve MODEL [--host H] [--port P] [--api-key K] [--cors ORIGIN] [--max-body SIZE]
// [--parallel N] [--sessions N] [--max-queue N] [--name NAME] [--chat-template FILE]
// [engine options]`: the Ollama, OpenAI and Anthropic HTTP APIs over one model until SIGINT or
// SIGTERM. Parses options into ServerOptions; the server itself lives in src/server.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "sluice/error.h"
#include "sluice/server.h"

namespace sluice::cli {
namespace {

struct ServeArgs {
  ServerOptions server;
  EngineArgs engine;
  std::string max_body = "32MiB";
  std::string chat_template_file;
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--chat-template: cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int run_serve(ServeArgs& args) {
  ServerOptions& options = args.server;
  options.model = model_options(args.engine);
  options.session = session_options(args.engine);
  options.max_body_bytes = parse_byte_size(args.max_body, "--max-body");
  if (options.api_key.empty()) {
    if (const char* key = std::getenv("SLUICE_API_KEY")) options.api_key = key;
  }
  if (!args.chat_template_file.empty()) {
    options.chat_template_override = read_text_file(args.chat_template_file);
  }
  if (options.cached_sessions < options.parallel) options.cached_sessions = options.parallel;
  return serve(options);
}

}  // namespace

Command add_serve_command(CLI::App& parent) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* app = parent.add_subcommand(
      "serve", "Serve a model over the Ollama, OpenAI and Anthropic HTTP APIs");
  app->footer(
      "Endpoints: /api/chat, /api/generate, /api/tags, /api/show, /api/ps, /api/version "
      "(Ollama); /v1/chat/completions, /v1/completions, /v1/models (OpenAI); /v1/messages "
      "(Anthropic); /health, /metrics, /api/capabilities. SIGINT/SIGTERM: finish requests in "
      "flight (up to --grace seconds), then exit 0. The API key may also come from "
      "SLUICE_API_KEY.");
  ServerOptions& s = args->server;
  app->add_option("model,--model,-m", s.model_path, "GGUF file or safetensors snapshot directory")
      ->required();
  app->add_option("--host", s.host, "Address to listen on")->capture_default_str();
  app->add_option("--port", s.port, "Port to listen on")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app->add_option("--name", s.model_name, "Name clients address the model by (default: file name)");
  app->add_option("--api-key", s.api_key,
                  "Require 'Authorization: Bearer KEY' or 'x-api-key: KEY' on every request");
  app->add_option("--cors", s.cors_origin, "Allow browsers from this origin (default: no CORS)");
  app->add_option("--max-body", args->max_body, "Largest request body (413 above)")
      ->capture_default_str();
  app->add_option("--parallel", s.parallel, "Requests generating at once")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app->add_option("--sessions", s.cached_sessions,
                  "KV caches kept for prefix reuse between requests (at least --parallel)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app->add_option("--max-queue", s.max_queue, "Requests waiting beyond --parallel (429 above)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app->add_option("--grace", s.shutdown_grace_seconds,
                  "Seconds in-flight requests get to finish on SIGINT/SIGTERM")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app->add_option("--chat-template", args->chat_template_file,
                  "Jinja chat template file to use instead of the model's");
  app->add_flag("--no-access-log{false}", s.access_log, "Do not log one line per request");
  add_engine_options(*app, args->engine);
  return {app, [args] { return run_serve(*args); }};
}

}  // namespace sluice::cli
