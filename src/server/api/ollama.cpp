// The Ollama API: POST /api/chat and /api/generate (NDJSON streams by default, one JSON with
// "stream": false), GET /api/tags, /api/ps, /api/version and POST /api/show. Options map onto
// the sampler with Ollama's defaults (temperature 0.8, top_k 40, top_p 0.9, repeat_penalty 1.1
// over 64 tokens); `format` asks for constrained output, which the sampler cannot do: 400.
#include <chrono>
#include <memory>

#include "server/api/common.h"
#include "server/api/routes.h"
#include "server/responses.h"
#include "sluice/version.h"

namespace sluice::server::api {
namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  const ServedModel* served = nullptr;
  bool chat = true;
  Json tools;  // offered tools, or null
  std::vector<int32_t> prompt;
  Clock::time_point start = Clock::now();
  std::unique_ptr<ToolCallGrammar::StreamFilter> filter;
};

void read_options(const Fields& body, GenerationRequest& request, int64_t n_ctx) {
  SamplingParams& s = request.sampling;
  s.temperature = 0.8f, s.top_k = 40, s.top_p = 0.9f, s.repeat_penalty = 1.1f;
  s.seed = random_seed();
  request.max_tokens = n_ctx;  // -1 (Ollama's default): until the context is full
  const Json* options_json = body.object("options");
  if (options_json == nullptr) return;
  const Fields options(*options_json, "options");
  s.temperature = float(options.number("temperature", 0, 100).value_or(s.temperature));
  s.top_k = int32_t(options.integer("top_k", 0, 1 << 30).value_or(s.top_k));
  s.top_p = float(options.number("top_p", 0, 1).value_or(s.top_p));
  s.min_p = float(options.number("min_p", 0, 1).value_or(s.min_p));
  s.typical_p = float(options.number("typical_p", 0, 1).value_or(s.typical_p));
  s.repeat_penalty = float(options.number("repeat_penalty", 1e-6, 100).value_or(s.repeat_penalty));
  s.penalty_last_n =
      int32_t(options.integer("repeat_last_n", -1, 1 << 20).value_or(s.penalty_last_n));
  if (s.penalty_last_n == -1) s.penalty_last_n = int32_t(n_ctx);  // Ollama: -1 = the context
  s.presence_penalty = float(options.number("presence_penalty", -100, 100).value_or(0));
  s.frequency_penalty = float(options.number("frequency_penalty", -100, 100).value_or(0));
  if (s.top_p == 0) s.top_p = 1e-6f;
  if (auto seed = options.integer("seed", INT64_MIN, INT64_MAX); seed && *seed >= 0) {
    s.seed = uint64_t(*seed);  // Ollama: a negative seed means a random one
  }
  // num_predict: -1 until the context is full, -2 fill the context; num_ctx can only shrink
  // the server's context (every session of a server has one size).
  const int64_t num_ctx = options.integer("num_ctx", 1, INT32_MAX).value_or(n_ctx);
  const int64_t predict = options.integer("num_predict", -2, INT32_MAX).value_or(-1);
  request.max_tokens = predict < 0 ? std::min(n_ctx, num_ctx) : predict;
  request.stop_strings = string_list(options, "stop", 64);
  if (options.number("mirostat", 0, 2).value_or(0) != 0) {
    options.fail("mirostat", "sampling is not supported (use 0)");
  }
}

void refuse_unsupported(const Fields& body) {
  if (body.has("format")) {
    const Json& format = *body.get("format");
    if (!(format.is_string() && format.get<std::string>().empty())) {
      body.fail("format",
                "(constrained JSON output) needs a sampler that constrains tokens, "
                "which this server does not have");
    }
  }
  if (const Json* images = body.array("images"); images && !images->empty()) {
    body.fail("images", "are not supported: this server reads text only");
  }
}

// Ollama's chat messages into the template's shape: tool_calls' arguments are already objects.
Json template_messages(const Json& messages) {
  if (messages.empty()) throw ApiError(400, "'messages' must not be empty", "messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    Fields message(messages[i], "messages[" + std::to_string(i) + "]");
    const std::string role = message.required_string("role");
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      message.fail("role", "must be system, user, assistant or tool, got '" + role + "'");
    }
    if (const Json* images = message.array("images"); images && !images->empty()) {
      message.fail("images", "are not supported: this server reads text only");
    }
    Json converted = {{"role", role}, {"content", message.string("content").value_or("")}};
    if (auto name = message.string("tool_name")) converted["name"] = *name;
    if (const Json* calls = message.array("tool_calls")) {
      converted["tool_calls"] = template_tool_calls(message, *calls, /*arguments_as_text=*/false);
    }
    out.push_back(std::move(converted));
  }
  return out;
}

int64_t nanoseconds(double seconds) {
  return int64_t(seconds * 1e9);
}

const char* done_reason(StopReason reason) {
  return reason == StopReason::kMaxTokens || reason == StopReason::kContextFull ? "length" : "stop";
}

Json line_head(const Call& call) {
  return {{"model", call.served->name}, {"created_at", iso_time_now()}};
}

Json tool_calls_json(const std::vector<ParsedToolCall>& calls) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json arguments = Json::parse(calls[i].arguments_json, nullptr, false);
    out.push_back(
        {{"function", {{"index", i}, {"name", calls[i].name}, {"arguments", arguments}}}});
  }
  return out;
}

// The last line (or the whole answer): done, why, counts and durations in nanoseconds.
Json final_line(const Call& call, const GenerationResult& result, Json message_or_response) {
  Json line = line_head(call);
  if (call.chat) {
    line["message"] = std::move(message_or_response);
  } else {
    line["response"] = std::move(message_or_response);
  }
  line["done"] = true;
  line["done_reason"] = done_reason(result.stop_reason);
  if (!call.chat) {
    Json context = Json::array();
    for (int32_t id : call.prompt) context.push_back(id);
    for (int32_t id : result.tokens) context.push_back(id);
    line["context"] = std::move(context);
  }
  line["total_duration"] =
      nanoseconds(std::chrono::duration<double>(Clock::now() - call.start).count());
  line["load_duration"] = 0;
  line["prompt_eval_count"] = result.stats.n_prompt - result.stats.n_prompt_reused;
  line["prompt_eval_duration"] = nanoseconds(result.stats.prompt_seconds);
  line["eval_count"] = result.stats.n_generated;
  line["eval_duration"] = nanoseconds(result.stats.generate_seconds);
  return line;
}

Json assistant_message(std::string content) {
  return {{"role", "assistant"}, {"content", std::move(content)}};
}

Json whole_answer(const Call& call, const CollectedOutput& output) {
  const GenerationResult& result = output.result;
  if (!call.chat) return final_line(call, result, result.text);
  const AssistantOutput parsed =
      split_output(*call.served, result.text, call.tools, !call.tools.is_null());
  Json message = assistant_message(parsed.content);
  if (!parsed.reasoning_content.empty()) message["thinking"] = parsed.reasoning_content;
  if (!parsed.tool_calls.empty()) message["tool_calls"] = tool_calls_json(parsed.tool_calls);
  return final_line(call, result, std::move(message));
}

std::string ndjson(const Json& line) {
  return dump(line) + "\n";
}

Json text_line(const Call& call, std::string text) {
  Json line = line_head(call);
  if (call.chat) {
    line["message"] = assistant_message(std::move(text));
  } else {
    line["response"] = std::move(text);
  }
  line["done"] = false;
  return line;
}

std::string stream_events(Call& call, std::vector<TokenEvent>& events) {
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  if (call.filter) text = call.filter->feed(text);
  return text.empty() ? std::string() : ndjson(text_line(call, std::move(text)));
}

std::string stream_end(Call& call, const JobChannel& channel) {
  if (channel.failed()) return ndjson({{"error", channel.error()}});
  const GenerationResult& result = channel.result();
  std::string out;
  if (call.filter) {
    if (std::string tail = call.filter->finish(); !tail.empty()) {
      out += ndjson(text_line(call, std::move(tail)));
    }
    if (call.filter->marker_seen()) {
      const AssistantOutput parsed = split_output(*call.served, result.text, call.tools, true);
      Json message = assistant_message(parsed.tool_calls.empty() ? parsed.content : "");
      if (!parsed.tool_calls.empty()) message["tool_calls"] = tool_calls_json(parsed.tool_calls);
      Json line = text_line(call, "");
      line["message"] = std::move(message);
      out += ndjson(line);
    }
  }
  return out + ndjson(final_line(call, result, call.chat ? assistant_message("") : Json("")));
}

void answer(Service& service, std::shared_ptr<Call> call, Job job, bool stream,
            httplib::Response& res, const std::shared_ptr<RequestRecord>& record) {
  call->prompt = job.request.prompt;
  // NDJSON has no comment line, and Ollama's clients parse every line as JSON; a lone space
  // keeps the connection alive (and shows a disconnect) and only becomes leading whitespace
  // of the next line, which every JSON parser skips.
  answer_call(service, {Api::kOllama, "application/x-ndjson", " "}, std::move(call), std::move(job),
              stream, stream_events, stream_end, whole_answer, res, record);
}

void chat(Service& service, const httplib::Request& req, httplib::Response& res,
          const std::shared_ptr<RequestRecord>& record) {
  const Json body_json = parse_body(req.body);
  const Fields body(body_json, "");
  auto call = std::make_shared<Call>();
  call->served = &service.model(body.required_string("model"));
  record->set_model(call->served->name);
  refuse_unsupported(body);
  Job job;
  read_options(body, job.request, service.scheduler().n_ctx());
  job.session = body.string("session").value_or("");
  call->tools = offered_tools(body, *call->served);
  const Json* messages = body.array("messages");
  if (messages == nullptr || messages->empty()) {  // Ollama: an empty chat loads the model
    Json line = line_head(*call);
    line["message"] = assistant_message("");
    line["done_reason"] = "load";
    line["done"] = true;
    return write_json(res, line);
  }
  job.request.prompt =
      service.chat_prompt(*call->served, template_messages(*messages), call->tools);
  answer(service, std::move(call), std::move(job), body.boolean("stream").value_or(true), res,
         record);
}

std::vector<int32_t> generate_prompt(const Service& service, const Fields& body,
                                     const ServedModel& served, const std::string& prompt) {
  std::vector<int32_t> ids;
  if (const Json* context = body.array("context")) {  // the "context" of an earlier answer
    for (const Json& id : *context) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= served.model->info().n_vocab) {
        body.fail("context", "must hold token ids of this model");
      }
      ids.push_back(id.get<int32_t>());
    }
  }
  std::vector<int32_t> text_ids;
  if (body.boolean("raw").value_or(false)) {
    text_ids = served.model->tokenizer().encode(prompt, true, ids.empty());
  } else {
    Json messages = Json::array();
    if (auto system = body.string("system"); system && !system->empty()) {
      messages.push_back({{"role", "system"}, {"content", *system}});
    }
    messages.push_back({{"role", "user"}, {"content", prompt}});
    text_ids = service.chat_prompt(served, messages, nullptr);
  }
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  return ids;
}

void generate(Service& service, const httplib::Request& req, httplib::Response& res,
              const std::shared_ptr<RequestRecord>& record) {
  const Json body_json = parse_body(req.body);
  const Fields body(body_json, "");
  auto call = std::make_shared<Call>();
  call->chat = false;
  call->served = &service.model(body.required_string("model"));
  record->set_model(call->served->name);
  refuse_unsupported(body);
  if (auto suffix = body.string("suffix"); suffix && !suffix->empty()) {
    body.fail("suffix", "(fill-in-the-middle) is not supported");
  }
  if (auto custom = body.string("template"); custom && !custom->empty()) {
    body.fail("template",
              "(an Ollama Go template) is not supported; the model's own chat "
              "template is used (or raw: true)");
  }
  Job job;
  read_options(body, job.request, service.scheduler().n_ctx());
  const std::string prompt = body.string("prompt").value_or("");
  if (prompt.empty()) {  // Ollama: an empty prompt loads the model
    Json line = line_head(*call);
    line["response"] = "";
    line["done_reason"] = "load";
    line["done"] = true;
    return write_json(res, line);
  }
  job.request.prompt = generate_prompt(service, body, *call->served, prompt);
  answer(service, std::move(call), std::move(job), body.boolean("stream").value_or(true), res,
         record);
}

Json details(const ServedModel& served) {
  const ModelInfo& info = served.model->info();
  const bool gguf = served.path.ends_with(".gguf");
  return {{"parent_model", ""},          {"format", gguf ? "gguf" : "safetensors"},
          {"family", info.architecture}, {"families", Json::array({info.architecture})},
          {"parameter_size", ""},        {"quantization_level", ""}};
}

std::string modified_at(const ServedModel& served) {
  return iso_time(served.modified_at);
}

Json tag_entry(const ServedModel& served) {
  return {{"name", served.name},
          {"model", served.name},
          {"modified_at", modified_at(served)},
          {"size", served.file_bytes},
          {"details", details(served)}};
}

void show(Service& service, const httplib::Request& req, httplib::Response& res,
          const std::shared_ptr<RequestRecord>& record) {
  const Json body_json = parse_body(req.body);
  const Fields body(body_json, "");
  // Older clients send "name", newer ones "model".
  const std::string name =
      body.has("model") ? body.required_string("model") : body.required_string("name");
  const ServedModel& served = service.model(name);
  record->set_model(served.name);
  const ModelInfo& info = served.model->info();
  const std::string& arch = info.architecture;
  Json capabilities = Json::array({"completion"});
  if (served.tool_calls.known()) capabilities.push_back("tools");
  write_json(res, {{"modelfile", ""},
                   {"parameters", ""},
                   {"template", served.chat_template},
                   {"details", details(served)},
                   {"model_info",
                    {{"general.architecture", arch},
                     {"general.name", info.name},
                     {arch + ".context_length", info.n_ctx_train},
                     {arch + ".embedding_length", info.n_embd},
                     {arch + ".block_count", info.n_layer},
                     {"tokenizer.vocab_size", info.n_vocab}}},
                   {"capabilities", capabilities},
                   {"modified_at", modified_at(served)}});
}

}  // namespace

void add_ollama_routes(httplib::Server& http, Service& service) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Sluice is running", "text/plain");
  });
  http.Post("/api/chat", route(service, Api::kOllama,
                               [&service](const auto& req, auto& res, const auto& record) {
                                 chat(service, req, res, record);
                               }));
  http.Post("/api/generate", route(service, Api::kOllama,
                                   [&service](const auto& req, auto& res, const auto& record) {
                                     generate(service, req, res, record);
                                   }));
  http.Post("/api/show", route(service, Api::kOllama,
                               [&service](const auto& req, auto& res, const auto& record) {
                                 show(service, req, res, record);
                               }));
  http.Get("/api/tags",
           route(service, Api::kOllama, [&service](const auto&, auto& res, const auto&) {
             Json models = Json::array();
             if (const ServedModel* served = service.model_if_ready()) {
               models.push_back(tag_entry(*served));
             }
             write_json(res, {{"models", models}});
           }));
  http.Get("/api/ps", route(service, Api::kOllama, [&service](const auto&, auto& res, const auto&) {
             Json models = Json::array();
             if (const ServedModel* served = service.model_if_ready()) {
               Json entry = tag_entry(*served);
               entry.erase("modified_at");
               entry["expires_at"] = "2318-01-01T00:00:00Z";  // kept loaded until the server stops
               entry["size_vram"] = 0;
               entry["context_length"] = service.scheduler().n_ctx();
               models.push_back(std::move(entry));
             }
             write_json(res, {{"models", models}});
           }));
  http.Get("/api/version", route(service, Api::kOllama, [](const auto&, auto& res, const auto&) {
             write_json(res, {{"version", version()}});
           }));
}

}  // namespace sluice::server::api
