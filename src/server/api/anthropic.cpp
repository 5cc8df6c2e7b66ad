// The Anthropic Messages API: POST /v1/messages, answered whole or streamed as server-sent events
// in Anthropic's sequence (message_start, content blocks, message_delta, message_stop), and
// POST /v1/messages/count_tokens. Content blocks (text, tool_use, tool_result) become the chat
// template's messages; sampling defaults are Anthropic's (temperature 1, a fresh seed).
#include <memory>
#include <string_view>

#include "server/api/common.h"
#include "server/api/routes.h"
#include "server/responses.h"

namespace sluice::server::api {
namespace {

constexpr size_t kMaxStopSequences = 64;

// One /v1/messages call, shared by its handler and (when streaming) its stream.
struct Call {
  const ServedModel* served = nullptr;
  std::string id;
  Json tools;  // offered tools, OpenAI-style as templates take them, or null
  bool stream = false;
  int64_t n_prompt = 0;  // known before the job runs; message_start reports it
  std::unique_ptr<ToolCallGrammar::StreamFilter> filter;  // streaming with tools
  size_t n_released = 0;                                  // bytes of text streamed
  bool started = false;  // message_start and the text block's start sent
};

void read_sampling(const Fields& body, GenerationRequest& request) {
  SamplingParams& s = request.sampling;
  s.temperature = float(body.number("temperature", 0, 1).value_or(1.0));
  s.top_p = float(body.number("top_p", 0, 1).value_or(1.0));
  s.top_k = int32_t(body.integer("top_k", 0, 1 << 30).value_or(0));
  if (s.top_p == 0) s.top_p = 1e-6f;
  // Anthropic has no seed field; a non-standard one makes runs reproducible when wanted.
  s.seed = body.has("seed") ? uint64_t(*body.integer("seed", INT64_MIN, INT64_MAX)) : random_seed();
  const std::optional<int64_t> max_tokens = body.integer("max_tokens", 1, INT32_MAX);
  if (!max_tokens) body.fail("max_tokens", "is required");
  request.max_tokens = *max_tokens;
  body.array("stop_sequences");  // an array, not the single string string_list also takes
  request.stop_strings = string_list(body, "stop_sequences", kMaxStopSequences);
}

// A custom tool {name, description?, input_schema} → {"type": "function", "function": …}.
Json openai_tool(const Fields& tool) {
  if (auto type = tool.string("type"); type && *type != "custom") {
    tool.fail("type", "is '" + *type + "'; this server runs no tools of its own");
  }
  Json function = {{"name", tool.required_string("name")}};
  if (auto description = tool.string("description")) function["description"] = *description;
  const Json* schema = tool.object("input_schema");
  if (schema == nullptr) tool.fail("input_schema", "is required");
  function["parameters"] = *schema;
  return {{"type", "function"}, {"function", std::move(function)}};
}

// tools / tool_choice → the tools the template sees (null: none).
Json read_tools(const Fields& body, const ServedModel& served) {
  std::string choice = "auto";
  if (const Json* value = body.object("tool_choice")) {
    const Fields tool_choice(*value, "tool_choice");
    choice = tool_choice.required_string("type");
    if (choice == "any" || choice == "tool") {
      body.fail("tool_choice", "'" + choice +
                                   "' needs constrained decoding, which this server "
                                   "does not do; use \"auto\" or \"none\"");
    }
    if (choice != "auto" && choice != "none") {
      tool_choice.fail("type", "must be auto, any, tool or none");
    }
    tool_choice.boolean("disable_parallel_tool_use");  // checked, not enforced
  }
  const Json* tools = body.array("tools");
  if (tools == nullptr || tools->empty()) return nullptr;
  Json converted = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    converted.push_back(openai_tool(Fields((*tools)[i], "tools[" + std::to_string(i) + "]")));
  }
  if (choice == "none") return nullptr;
  if (!served.tool_calls.known()) {
    body.fail("tools",
              "cannot be used with this model: its chat template teaches no tool-call "
              "format this server parses");
  }
  return converted;
}

// A tool_use block of an assistant turn → a call as templates take it (arguments an object).
Json template_call(const Fields& block) {
  Json input = Json::object();
  if (const Json* value = block.object("input")) input = *value;
  return {{"id", block.required_string("id")},
          {"type", "function"},
          {"function", {{"name", block.required_string("name")}, {"arguments", input}}}};
}

// A tool_result block of a user turn → its own "tool" message.
Json tool_message(const Fields& block) {
  const Json* content = block.get("content");
  std::string text = content_text(content ? *content : Json(), block.name("content"));
  // Templates have no error flag for tool output: the model learns of the failure from the text.
  if (block.boolean("is_error").value_or(false)) text = "Error: " + text;
  return {
      {"role", "tool"}, {"tool_call_id", block.required_string("tool_use_id")}, {"content", text}};
}

// Anthropic merges consecutive turns of one role; so do we, for templates that insist on
// alternating roles.
void push_turn(Json& out, Json turn) {
  if (out.empty() || out.back()["role"] != turn["role"]) {
    out.push_back(std::move(turn));
    return;
  }
  Json& last = out.back();
  const std::string text = turn["content"].get<std::string>();
  std::string joined = last["content"].get<std::string>();
  if (!joined.empty() && !text.empty()) joined += "\n\n";
  last["content"] = joined + text;
  if (turn.contains("tool_calls")) {
    if (!last.contains("tool_calls")) last["tool_calls"] = Json::array();
    for (Json& call : turn["tool_calls"]) last["tool_calls"].push_back(std::move(call));
  }
}

// One turn's content blocks → its template messages: each tool result its own "tool" message
// (in order), then the turn's text with the assistant's calls.
void append_blocks(const Fields& message, const std::string& role, const Json& blocks, Json& out) {
  std::string text;
  Json calls = Json::array();
  size_t n_results = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Fields block(blocks[i], message.name("content") + "[" + std::to_string(i) + "]");
    const std::string type = block.required_string("type");
    if (type == "text") {
      text += block.required_string("text");
    } else if (type == "tool_use" && role == "assistant") {
      calls.push_back(template_call(block));
    } else if (type == "tool_result" && role == "user") {
      out.push_back(tool_message(block));
      ++n_results;
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Clients send earlier reasoning back; templates drop it from past turns anyway.
    } else if (type == "image" || type == "document") {
      block.fail("type", "is '" + type + "'; this server reads text only");
    } else {
      block.fail("type", "is '" + type + "', not a content block of " + role + " turns");
    }
  }
  if (role == "assistant") {
    Json turn = {{"role", role}, {"content", text}};
    if (!calls.empty()) turn["tool_calls"] = std::move(calls);
    push_turn(out, std::move(turn));
  } else if (!text.empty() || n_results == 0) {
    push_turn(out, {{"role", role}, {"content", text}});
  }
}

// system + messages → the template's messages, every field checked.
Json template_messages(const Fields& body) {
  Json out = Json::array();
  if (const Json* system = body.get("system")) {
    out.push_back({{"role", "system"}, {"content", content_text(*system, "system")}});
  }
  const Json& messages = body.required_array("messages");
  if (messages.empty()) body.fail("messages", "must not be empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Fields message(messages[i], "messages[" + std::to_string(i) + "]");
    const std::string role = message.required_string("role");
    if (role != "user" && role != "assistant") {
      message.fail("role", "must be user or assistant, got '" + role + "'");
    }
    const Json* content = message.get("content");
    if (content == nullptr) message.fail("content", "is required");
    if (content->is_string()) {
      push_turn(out, {{"role", role}, {"content", *content}});
    } else if (content->is_array()) {
      append_blocks(message, role, *content, out);
    } else {
      message.fail("content", "must be a string or an array of content blocks");
    }
  }
  return out;
}

// tools, system and messages → the prompt (shared by messages and count_tokens).
std::vector<int32_t> read_prompt(Service& service, const Fields& body, Call& call) {
  call.tools = read_tools(body, *call.served);
  const Json messages = template_messages(body);
  return service.chat_prompt(*call.served, messages, call.tools);
}

const char* stop_reason(StopReason reason, bool tool_calls) {
  if (tool_calls) return "tool_use";
  switch (reason) {
    case StopReason::kMaxTokens:
    case StopReason::kContextFull:
      return "max_tokens";
    case StopReason::kStopString:
      return "stop_sequence";
    default:
      return "end_turn";
  }
}

Json stop_sequence(const GenerationResult& result, bool tool_calls) {
  if (tool_calls || result.stop_reason != StopReason::kStopString) return nullptr;
  return result.stop_string;
}

Json message(const Call& call, Json content, Json reason, Json sequence, Json usage) {
  return {{"id", call.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", call.served->name},
          {"content", std::move(content)},
          {"stop_reason", std::move(reason)},
          {"stop_sequence", std::move(sequence)},
          {"usage", std::move(usage)}};
}

Json usage(const GenerationStats& stats) {
  return {{"input_tokens", stats.n_prompt}, {"output_tokens", stats.n_generated}};
}

std::string tool_use_id(const ParsedToolCall& call) {
  return call.id.empty() ? random_id("toolu_") : call.id;
}

Json tool_input(const ParsedToolCall& call) {
  Json input = Json::parse(call.arguments_json, nullptr, false);
  return input.is_object() ? input : Json::object();
}

Json whole_answer(const Call& call, const CollectedOutput& output) {
  const GenerationResult& result = output.result;
  const AssistantOutput parsed =
      split_output(*call.served, result.text, call.tools, !call.tools.is_null());
  const bool calls = !parsed.tool_calls.empty();
  Json content = Json::array();
  if (!parsed.reasoning_content.empty()) {
    content.push_back(
        {{"type", "thinking"}, {"thinking", parsed.reasoning_content}, {"signature", ""}});
  }
  if (!calls || !parsed.content.empty()) {
    content.push_back({{"type", "text"}, {"text", parsed.content}});
  }
  for (const ParsedToolCall& c : parsed.tool_calls) {
    content.push_back(
        {{"type", "tool_use"}, {"id", tool_use_id(c)}, {"name", c.name}, {"input", tool_input(c)}});
  }
  return message(call, std::move(content), stop_reason(result.stop_reason, calls),
                 stop_sequence(result, calls), usage(result.stats));
}

std::string event(const char* name, const Json& data) {
  return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
}

// message_start, the text block's start and a ping: sent with the first output.
std::string stream_start(Call& call) {
  if (call.started) return {};
  call.started = true;
  const Json shell = message(call, Json::array(), nullptr, nullptr,
                             {{"input_tokens", call.n_prompt}, {"output_tokens", 0}});
  return event("message_start", {{"type", "message_start"}, {"message", shell}}) +
         event("content_block_start", {{"type", "content_block_start"},
                                       {"index", 0},
                                       {"content_block", {{"type", "text"}, {"text", ""}}}}) +
         event("ping", {{"type", "ping"}});
}

std::string text_delta(Call& call, const std::string& text) {
  if (text.empty()) return {};
  call.n_released += text.size();
  return event("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", 0},
                                       {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string stream_events(Call& call, std::vector<TokenEvent>& events) {
  std::string text;
  for (const TokenEvent& e : events) text += e.text;
  if (call.filter) text = call.filter->feed(text);
  std::string out = stream_start(call);
  out += text_delta(call, text);
  return out;
}

std::string tool_use_events(size_t index, const ParsedToolCall& c) {
  const Json start = {
      {"type", "tool_use"}, {"id", tool_use_id(c)}, {"name", c.name}, {"input", Json::object()}};
  const Json delta = {{"type", "input_json_delta"}, {"partial_json", c.arguments_json}};
  return event("content_block_start",
               {{"type", "content_block_start"}, {"index", index}, {"content_block", start}}) +
         event("content_block_delta",
               {{"type", "content_block_delta"}, {"index", index}, {"delta", delta}}) +
         event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
}

// The parsed content past what was streamed already (empty when the parse reshaped that
// prefix, e.g. took reasoning out of it).
std::string content_after(const std::string& content, std::string_view released) {
  const size_t start = released.find_first_not_of(" \t\r\n");
  released = start == std::string_view::npos ? std::string_view() : released.substr(start);
  return content.starts_with(released) ? content.substr(released.size()) : std::string();
}

// The text the filter held back, and the calls parsed from the whole output.
std::vector<ParsedToolCall> finish_filter(Call& call, const GenerationResult& result,
                                          std::string& out) {
  std::vector<ParsedToolCall> calls;
  if (!call.filter) return calls;
  std::string tail = call.filter->finish();
  if (call.filter->marker_seen()) {
    AssistantOutput parsed = split_output(*call.served, result.text, call.tools, true);
    calls = std::move(parsed.tool_calls);
    // Text around the calls, or from a marker that began no call, is content after all.
    const std::string_view released = std::string_view(result.text).substr(0, call.n_released);
    tail = calls.empty() ? result.text.substr(call.n_released)
                         : content_after(parsed.content, released);
  }
  out += text_delta(call, tail);
  return calls;
}

std::string stream_end(Call& call, const JobChannel& channel) {
  if (channel.failed()) {
    return "event: error\ndata: " +
           error_body(Api::kAnthropic, channel.error_status(), channel.error()) + "\n\n";
  }
  const GenerationResult& result = channel.result();
  std::string out = stream_start(call);
  const std::vector<ParsedToolCall> calls = finish_filter(call, result, out);
  out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  for (size_t i = 0; i < calls.size(); ++i) out += tool_use_events(i + 1, calls[i]);
  const bool any = !calls.empty();
  const Json delta = {{"stop_reason", stop_reason(result.stop_reason, any)},
                      {"stop_sequence", stop_sequence(result, any)}};
  out += event("message_delta",
               {{"type", "message_delta"}, {"delta", delta}, {"usage", usage(result.stats)}});
  return out + event("message_stop", {{"type", "message_stop"}});
}

void answer(Service& service, std::shared_ptr<Call> call, Job job, httplib::Response& res,
            const std::shared_ptr<RequestRecord>& record) {
  const bool stream = call->stream;
  answer_call(service,
              {Api::kAnthropic, "text/event-stream", "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
              std::move(call), std::move(job), stream, stream_events, stream_end, whole_answer, res,
              record);
}

void messages(Service& service, const httplib::Request& req, httplib::Response& res,
              const std::shared_ptr<RequestRecord>& record) {
  const Json body_json = parse_body(req.body);
  const Fields body(body_json, "");
  auto call = std::make_shared<Call>();
  call->served = &service.model(body.required_string("model"));
  record->set_model(call->served->name);
  call->id = random_id("msg_");
  call->stream = body.boolean("stream").value_or(false);
  body.object("metadata");  // Anthropic's end-user id: checked, not used
  Job job;
  read_sampling(body, job.request);
  if (auto session = body.string("session")) job.session = *session;
  job.request.prompt = read_prompt(service, body, *call);
  call->n_prompt = int64_t(job.request.prompt.size());
  answer(service, std::move(call), std::move(job), res, record);
}

void count_tokens(Service& service, const httplib::Request& req, httplib::Response& res,
                  const std::shared_ptr<RequestRecord>& record) {
  const Json body_json = parse_body(req.body);
  const Fields body(body_json, "");
  Call call;
  call.served = &service.model(body.required_string("model"));
  record->set_model(call.served->name);
  write_json(res, {{"input_tokens", read_prompt(service, body, call).size()}});
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, Service& service) {
  http.Post("/v1/messages", route(service, Api::kAnthropic,
                                  [&service](const auto& req, auto& res, const auto& record) {
                                    messages(service, req, res, record);
                                  }));
  http.Post(
      "/v1/messages/count_tokens",
      route(service, Api::kAnthropic, [&service](const auto& req, auto& res, const auto& record) {
        count_tokens(service, req, res, record);
      }));
}

}  // namespace sluice::server::api
