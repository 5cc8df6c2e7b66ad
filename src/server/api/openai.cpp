// The OpenAI API: GET /v1/models, POST /v1/chat/completions and POST /v1/completions, streamed
// as server-sent events in OpenAI's chunk shapes (ending "data: [DONE]") or answered whole.
// Sampling defaults are OpenAI's (temperature 1, top_p 1, a fresh seed unless one is given).
#include <memory>

#include "server/api/common.h"
#include "server/api/routes.h"
#include "server/responses.h"

namespace sluice::server::api {
namespace {

constexpr const char* kFingerprint = "sluice";

// One chat or completion call, shared by its handler and (when streaming) its stream.
struct Call {
  const ServedModel* served = nullptr;
  bool chat = true;
  std::string id;
  int64_t created = 0;
  Json tools;  // offered tools, or null
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  std::unique_ptr<ToolCallGrammar::StreamFilter> filter;  // streaming with tools
  bool role_sent = false;
};

void read_sampling(const Fields& body, GenerationRequest& request, int64_t n_ctx) {
  SamplingParams& s = request.sampling;
  s.temperature = float(body.number("temperature", 0, 2).value_or(1.0));
  s.top_p = float(body.number("top_p", 0, 1).value_or(1.0));
  s.presence_penalty = float(body.number("presence_penalty", -2, 2).value_or(0));
  s.frequency_penalty = float(body.number("frequency_penalty", -2, 2).value_or(0));
  // llama.cpp's server takes these too; clients written for it send them.
  s.top_k = int32_t(body.integer("top_k", 0, 1 << 30).value_or(0));
  s.min_p = float(body.number("min_p", 0, 1).value_or(0));
  s.repeat_penalty = float(body.number("repeat_penalty", 1e-6, 10).value_or(1));
  if (s.top_p == 0) s.top_p = 1e-6f;
  s.seed = body.has("seed") ? uint64_t(*body.integer("seed", INT64_MIN, INT64_MAX)) : random_seed();
  if (const Json* bias = body.object("logit_bias")) {
    for (const auto& [key, value] : bias->items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || !value.is_number()) {
        body.fail("logit_bias", "must map token ids to numbers");
      }
      s.logit_bias[int32_t(id)] = value.get<float>();
    }
  }
  const std::optional<int64_t> max_tokens =
      body.has("max_completion_tokens") ? body.integer("max_completion_tokens", 0, INT32_MAX)
                                        : body.integer("max_tokens", 0, INT32_MAX);
  request.max_tokens = max_tokens.value_or(n_ctx);
  request.stop_strings = string_list(body, "stop", 16);
  if (body.integer("n", 1, 1000).value_or(1) != 1) body.fail("n", "must be 1 (one choice)");
}

void read_logprobs(const Fields& body, GenerationRequest& request, Call& call, bool chat) {
  if (chat) {
    call.logprobs = body.boolean("logprobs").value_or(false);
    request.top_logprobs = int32_t(body.integer("top_logprobs", 0, 20).value_or(0));
    if (request.top_logprobs > 0 && !call.logprobs) {
      body.fail("top_logprobs", "needs 'logprobs': true");
    }
  } else if (auto n = body.integer("logprobs", 0, 5)) {
    call.logprobs = true;
    request.top_logprobs = int32_t(*n);
  }
  request.logprobs = call.logprobs;
}

void read_stream_options(const Fields& body, Call& call) {
  call.stream = body.boolean("stream").value_or(false);
  if (const Json* options = body.object("stream_options")) {
    call.include_usage =
        Fields(*options, "stream_options").boolean("include_usage").value_or(false);
  }
}

void refuse_constrained_output(const Fields& body) {
  if (const Json* format = body.object("response_format")) {
    const std::string type = Fields(*format, "response_format").string("type").value_or("text");
    if (type != "text") {
      throw ApiError(400,
                     "'response_format' of type '" + type +
                         "' needs constrained decoding, which this server does not do",
                     "response_format");
    }
  }
}

// tools / tool_choice → the tools the template sees (null: none).
Json read_tools(const Fields& body, const ServedModel& served) {
  if (const Json* value = body.get("tool_choice")) {
    if (!value->is_string()) {
      body.fail("tool_choice",
                "naming one function needs constrained decoding, which this "
                "server does not do; use \"auto\" or \"none\"");
    }
    const std::string choice = value->get<std::string>();
    if (choice == "required") {
      body.fail("tool_choice",
                "'required' needs constrained decoding, which this server does "
                "not do; use \"auto\" or \"none\"");
    }
    if (choice != "auto" && choice != "none") body.fail("tool_choice", "must be auto or none");
    if (choice == "none") return nullptr;
  }
  return offered_tools(body, served);
}

const char* finish_reason(StopReason reason, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  switch (reason) {
    case StopReason::kMaxTokens:
    case StopReason::kContextFull:
      return "length";
    default:
      return "stop";
  }
}

Json usage(const GenerationStats& stats) {
  return {{"prompt_tokens", stats.n_prompt},
          {"completion_tokens", stats.n_generated},
          {"total_tokens", stats.n_prompt + stats.n_generated},
          {"prompt_tokens_details", {{"cached_tokens", stats.n_prompt_reused}}}};
}

Json bytes_array(const std::string& bytes) {
  Json out = Json::array();
  for (unsigned char c : bytes) out.push_back(int(c));
  return out;
}

Json chat_logprob(const ServedModel& served, int32_t id, float logprob,
                  const std::vector<TokenLogprob>* top) {
  const std::string bytes = token_bytes(served, id);
  Json entry = {{"token", bytes}, {"logprob", logprob}, {"bytes", bytes_array(bytes)}};
  if (top != nullptr) {
    Json alternatives = Json::array();
    for (const TokenLogprob& t : *top)
      alternatives.push_back(chat_logprob(served, t.id, t.logprob, nullptr));
    entry["top_logprobs"] = std::move(alternatives);
  }
  return entry;
}

Json logprobs_of(const Call& call, const std::vector<TokenEvent>& events) {
  Json content = Json::array();
  for (const TokenEvent& e : events) {
    // The end-of-turn token is not part of the content, so not of its logprobs either.
    if (e.id >= 0 && !e.ends)
      content.push_back(chat_logprob(*call.served, e.id, e.logprob, &e.top));
  }
  if (call.chat) return {{"content", content}};
  // The legacy completions shape: parallel arrays.
  Json tokens = Json::array(), values = Json::array(), top = Json::array();
  for (const Json& entry : content) {
    tokens.push_back(entry["token"]);
    values.push_back(entry["logprob"]);
    Json alternatives = Json::object();
    for (const Json& alt : entry["top_logprobs"])
      alternatives[alt["token"].get<std::string>()] = alt["logprob"];
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", top}};
}

Json tool_calls_json(const std::vector<ParsedToolCall>& calls, bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json call = {{"id", calls[i].id.empty() ? random_id("call_") : calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments_json}}}};
    if (with_index) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

Json chunk(const Call& call, Json choice) {
  Json out = {{"id", call.id},
              {"object", call.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", call.created},
              {"model", call.served->name},
              {"system_fingerprint", kFingerprint},
              {"choices", Json::array({std::move(choice)})}};
  if (call.include_usage) out["usage"] = nullptr;
  return out;
}

std::string sse(const Json& data) {
  return "data: " + dump(data) + "\n\n";
}

Json delta_choice(const Call& call, Json delta, const Json& logprobs, const char* finish) {
  Json choice = {{"index", 0}};
  if (call.chat) {
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = delta.value("content", std::string());
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish == nullptr ? Json(nullptr) : Json(finish);
  return choice;
}

std::string stream_events(Call& call, std::vector<TokenEvent>& events) {
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  if (call.filter) text = call.filter->feed(text);
  std::string out;
  if (call.chat && !call.role_sent) {
    call.role_sent = true;
    out += sse(chunk(
        call, delta_choice(call, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)));
  }
  const Json logprobs = call.logprobs ? logprobs_of(call, events) : Json(nullptr);
  if (text.empty() && logprobs.is_null()) return out;
  return out + sse(chunk(call, delta_choice(call, {{"content", text}}, logprobs, nullptr)));
}

std::string stream_end(Call& call, const JobChannel& channel) {
  if (channel.failed()) {
    return sse({{"error", {{"message", channel.error()}, {"type", "server_error"}}}}) +
           "data: [DONE]\n\n";
  }
  const GenerationResult& result = channel.result();
  std::string out;
  bool calls = false;
  if (call.filter) {
    const std::string tail = call.filter->finish();
    if (!tail.empty())
      out += sse(chunk(call, delta_choice(call, {{"content", tail}}, nullptr, nullptr)));
    if (call.filter->marker_seen()) {
      const AssistantOutput parsed = split_output(*call.served, result.text, call.tools, true);
      calls = !parsed.tool_calls.empty();
      if (calls) {
        out += sse(chunk(
            call, delta_choice(call, {{"tool_calls", tool_calls_json(parsed.tool_calls, true)}},
                               nullptr, nullptr)));
      }
      // Text after the marker that was not a call goes out as content.
      if (!parsed.content.empty() && !calls) {
        out +=
            sse(chunk(call, delta_choice(call, {{"content", parsed.content}}, nullptr, nullptr)));
      }
    }
  }
  out += sse(chunk(
      call, delta_choice(call, Json::object(), nullptr, finish_reason(result.stop_reason, calls))));
  if (call.include_usage) {
    Json last = chunk(call, nullptr);
    last["choices"] = Json::array();
    last["usage"] = usage(result.stats);
    out += sse(last);
  }
  return out + "data: [DONE]\n\n";
}

Json whole_answer(const Call& call, const CollectedOutput& output) {
  const GenerationResult& result = output.result;
  Json choice = {{"index", 0}};
  bool calls = false;
  if (call.chat) {
    const AssistantOutput parsed =
        split_output(*call.served, result.text, call.tools, !call.tools.is_null());
    calls = !parsed.tool_calls.empty();
    Json message = {
        {"role", "assistant"},
        {"content", calls && parsed.content.empty() ? Json(nullptr) : Json(parsed.content)}};
    if (!parsed.reasoning_content.empty()) message["reasoning_content"] = parsed.reasoning_content;
    if (calls) message["tool_calls"] = tool_calls_json(parsed.tool_calls, false);
    message["refusal"] = nullptr;
    choice["message"] = std::move(message);
  } else {
    choice["text"] = result.text;
  }
  choice["logprobs"] = call.logprobs ? logprobs_of(call, output.events) : Json(nullptr);
  choice["finish_reason"] = finish_reason(result.stop_reason, calls);
  return {{"id", call.id},
          {"object", call.chat ? "chat.completion" : "text_completion"},
          {"created", call.created},
          {"model", call.served->name},
          {"system_fingerprint", kFingerprint},
          {"choices", Json::array({std::move(choice)})},
          {"usage", usage(result.stats)}};
}

void answer(Service& service, std::shared_ptr<Call> call, Job job, httplib::Response& res,
            const std::shared_ptr<RequestRecord>& record) {
  const bool stream = call->stream;
  answer_call(service, {Api::kOpenAI, "text/event-stream", ": keep-alive\n\n"}, std::move(call),
              std::move(job), stream, stream_events, stream_end, whole_answer, res, record);
}

// The prompt of /v1/completions: text, one-element text list, token ids, or one list of ids.
std::vector<int32_t> completion_prompt(const Fields& body, const ServedModel& served) {
  const Json* prompt = body.get("prompt");
  if (prompt == nullptr) body.fail("prompt", "is required");
  const Json* value = prompt;
  if (prompt->is_array() && !prompt->empty() &&
      (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() != 1) body.fail("prompt", "may hold one prompt only (n = 1)");
    value = &prompt->front();
  }
  if (value->is_string()) {
    return served.model->tokenizer().encode(value->get<std::string>(), true, true);
  }
  if (!value->is_array()) body.fail("prompt", "must be text, token ids, or a list of one of them");
  std::vector<int32_t> ids;
  const int64_t n_vocab = served.model->info().n_vocab;
  for (const Json& id : *value) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab) {
      body.fail("prompt", "token ids must be integers in [0, " + std::to_string(n_vocab) + ")");
    }
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

void chat_completions(Service& service, const httplib::Request& req, httplib::Response& res,
                      const std::shared_ptr<RequestRecord>& record, bool chat) {
  const Json body_json = parse_body(req.body);
  const Fields body(body_json, "");
  auto call = std::make_shared<Call>();
  call->served = &service.model(body.required_string("model"));
  record->set_model(call->served->name);
  call->chat = chat;
  call->id = random_id(chat ? "chatcmpl-" : "cmpl-");
  call->created = unix_time();
  read_stream_options(body, *call);
  Job job;
  read_sampling(body, job.request, service.scheduler().n_ctx());
  read_logprobs(body, job.request, *call, chat);
  body.string("user");  // OpenAI's end-user id: checked, not used
  if (auto session = body.string("session")) job.session = *session;
  if (chat) {
    refuse_constrained_output(body);
    call->tools = read_tools(body, *call->served);
    const Json messages =
        template_messages_from_openai(body.required_array("messages"), "messages");
    job.request.prompt = service.chat_prompt(*call->served, messages, call->tools);
  } else {
    if (body.has("suffix")) body.fail("suffix", "(fill-in-the-middle) is not supported");
    if (body.boolean("echo").value_or(false)) body.fail("echo", "is not supported");
    job.request.prompt = completion_prompt(body, *call->served);
  }
  answer(service, std::move(call), std::move(job), res, record);
}

Json model_entry(const ServedModel& served) {
  return {{"id", served.name},
          {"object", "model"},
          {"created",
           std::chrono::duration_cast<std::chrono::seconds>(served.loaded_at.time_since_epoch())
               .count()},
          {"owned_by", "sluice"}};
}

}  // namespace

void add_openai_routes(httplib::Server& http, Service& service) {
  http.Get("/v1/models",
           route(service, Api::kOpenAI,
                 [&service](const httplib::Request&, httplib::Response& res, const auto&) {
                   Json data = Json::array();
                   if (const ServedModel* served = service.model_if_ready())
                     data.push_back(model_entry(*served));
                   write_json(res, {{"object", "list"}, {"data", data}});
                 }));
  http.Get(R"(/v1/models/(.+))",
           route(service, Api::kOpenAI,
                 [&service](const httplib::Request& req, httplib::Response& res, const auto&) {
                   write_json(res, model_entry(service.model(req.matches[1])));
                 }));
  http.Post(
      "/v1/chat/completions",
      route(service, Api::kOpenAI, [&service](const auto& req, auto& res, const auto& record) {
        chat_completions(service, req, res, record, true);
      }));
  http.Post("/v1/completions", route(service, Api::kOpenAI,
                                     [&service](const auto& req, auto& res, const auto& record) {
                                       chat_completions(service, req, res, record, false);
                                     }));
}

}  // namespace sluice::server::api
