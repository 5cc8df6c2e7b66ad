// serve(): binds the listener, loads the model behind it, wires the routes of the three APIs
// and the operational endpoints (/health, /metrics, /api/capabilities), applies the safety
// rules every request passes (API key, body cap, CORS), and shuts down gracefully on SIGINT or
// SIGTERM: stop accepting, let in-flight requests finish within the grace period, exit 0.
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdio>
#include <thread>

#include <httplib.h>

#include "server/api/routes.h"
#include "server/responses.h"
#include "server/service.h"
#include "sluice/error.h"
#include "sluice/server.h"
#include "sluice/version.h"

namespace sluice {
namespace server {
namespace {

Api api_of(const std::string& path) {
  if (path.starts_with("/v1/messages")) return Api::kAnthropic;
  if (path.starts_with("/v1/")) return Api::kOpenAI;
  if (path.starts_with("/api/")) return Api::kOllama;
  return Api::kPlain;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.starts_with("127.");
}

// The key from "Authorization: Bearer KEY" or "x-api-key: KEY" (Anthropic's header).
bool authorized(const httplib::Request& req, const std::string& key) {
  if (req.get_header_value("x-api-key") == key) return true;
  return req.get_header_value("Authorization") == "Bearer " + key;
}

// httplib caps form-encoded bodies at 8 KiB whatever --max-body says; curl -d sends that type.
std::string too_large_message(const httplib::Request& req, uint64_t max_body) {
  if (req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded")) {
    return "form-encoded bodies are limited to 8 KiB; send the JSON with 'Content-Type: "
           "application/json'";
  }
  return "the request body exceeds " + std::to_string(max_body) + " bytes (--max-body)";
}

void add_safety_rules(httplib::Server& http, Service& service) {
  const ServerOptions& options = service.options();
  http.set_payload_max_length(options.max_body_bytes);
  http.set_pre_routing_handler([&service, &options](const httplib::Request& req,
                                                    httplib::Response& res) {
    if (!options.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", options.cors_origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers",
                       "Authorization, Content-Type, x-api-key, anthropic-version");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // /health stays open: probes and load balancers ask it without credentials.
    if (!options.api_key.empty() && req.path != "/health" && !authorized(req, options.api_key)) {
      write_error(res, api_of(req.path), 401,
                  "missing or wrong API key (send 'Authorization: Bearer KEY' or 'x-api-key')");
      RequestRecord record(service.metrics(), api_of(req.path), req.method + " " + req.path,
                           options.access_log);
      record.set_status(401);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib itself answers (unknown route 404, body too large 413, bad request 400)
  // get a JSON body in the shape of the API the path belongs to.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&options](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = res.status == 404   ? "no route " + req.method + " " + req.path
                              : res.status == 413 ? too_large_message(req, options.max_body_bytes)
                                                  : "the request could not be read (HTTP " +
                                                        std::to_string(res.status) + ")";
        write_error(res, api_of(req.path), res.status, message);
        return httplib::Server::HandlerResponse::Handled;
      }));
}

void add_operational_routes(httplib::Server& http, Service& service) {
  http.Get("/health", [&service](const httplib::Request&, httplib::Response& res) {
    switch (service.state()) {
      case Service::State::kReady:
        return write_json(res, {{"status", "ok"}});
      case Service::State::kLoading:
        return write_json(res, {{"status", "loading"}}, 503);
      case Service::State::kFailed:
        return write_json(res, {{"status", "error"}, {"error", service.load_error()}}, 503);
    }
  });
  http.Get("/metrics", [&service](const httplib::Request&, httplib::Response& res) {
    const ServedModel* served = service.model_if_ready();
    std::optional<SchedulerCounts> counts;
    std::optional<ExpertTelemetry> experts;
    if (served != nullptr) {
      counts = service.scheduler().counts();
      experts = served->model->expert_telemetry();
    }
    res.set_content(
        service.metrics().render(counts ? &*counts : nullptr, experts ? &*experts : nullptr),
        "text/plain; version=0.0.4");
  });
  http.Get("/api/capabilities",
           route(service, Api::kOllama, [&service](const auto&, auto& res, const auto&) {
             const ServedModel& served = service.ready_model();
             const ModelInfo& info = served.model->info();
             const ExpertTelemetry experts = served.model->expert_telemetry();
             write_json(res,
                        {{"models", Json::array({{{"name", served.name},
                                                  {"architecture", info.architecture},
                                                  {"backend", info.backend},
                                                  {"context_length", service.scheduler().n_ctx()},
                                                  {"context_length_trained", info.n_ctx_train},
                                                  {"streams_experts", experts.streaming},
                                                  {"tools", served.tool_calls.known()},
                                                  {"tool_call_format", served.tool_calls.name()},
                                                  {"chat_template", !served.chat_template.empty()},
                                                  {"batched_decode", true},
                                                  {"parallel", service.options().parallel}}})}});
           }));
}

// SIGINT and SIGTERM are blocked in every thread and taken by sigwait here.
sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace
}  // namespace server

int serve(const ServerOptions& options) {
  using namespace server;
  const sigset_t signals = termination_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Service service(options);
  httplib::Server http;
  // Streams hold a connection thread each; enough for the queue, the active set and a margin.
  const size_t n_threads = size_t(options.max_queue + options.parallel + 8);
  http.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  http.set_keep_alive_timeout(2);
  // httplib's default adds SO_REUSEPORT, which lets a second server bind a port in use and
  // silently share its connections; SO_REUSEADDR alone still allows a quick restart.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  add_safety_rules(http, service);
  add_operational_routes(http, service);
  api::add_openai_routes(http, service);
  api::add_ollama_routes(http, service);
  api::add_anthropic_routes(http, service);
  if (!http.bind_to_port(options.host, options.port)) {
    throw Error("serve: cannot listen on " + options.host + ":" + std::to_string(options.port) +
                " (in use, or not an address of this machine)");
  }
  if (!is_loopback(options.host)) {
    std::fprintf(stderr, "sluice: warning: listening on %s, reachable from other machines%s\n",
                 options.host.c_str(), options.api_key.empty() ? " without an API key" : "");
  }
  std::fprintf(stderr, "sluice: listening on http://%s:%d (loading %s)\n", options.host.c_str(),
               options.port, options.model_path.c_str());
  std::thread listener([&http] { http.listen_after_bind(); });
  int code = 0;
  try {
    service.load();
    std::fprintf(stderr, "sluice: ready: %s\n", service.model_if_ready()->name.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: error: %s\n", e.what());
    code = 1;
  }
  if (code == 0) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    std::fprintf(stderr, "sluice: %s: finishing requests in flight (up to %.0f s), then exiting\n",
                 signal_number == SIGINT ? "SIGINT" : "SIGTERM", options.shutdown_grace_seconds);
  }
  http.stop();  // no new connections; listen_after_bind returns once open ones end
  service.shutdown(options.shutdown_grace_seconds);
  listener.join();
  std::fprintf(stderr, "sluice: stopped\n");
  return code;
}

}  // namespace sluice
