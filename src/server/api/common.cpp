// Shared request pieces of the API adapters.
#include "server/api/common.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

#include "server/api_error.h"

namespace sluice::server::api {
namespace {

std::mt19937_64& random_engine() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

std::string indexed(const char* path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

}  // namespace

uint64_t random_seed() {
  return random_engine()();
}

std::string random_id(const char* prefix) {
  static const char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kDigits[random_engine()() % 36];
  return id;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string iso_time(std::chrono::system_clock::time_point now) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch() %
                                                                          std::chrono::seconds(1))
                         .count();
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long long>(nanos));
  return text;
}

std::vector<std::string> string_list(const Fields& fields, const char* key, size_t max) {
  const Json* value = fields.get(key);
  if (value == nullptr) return {};
  if (value->is_string()) return {value->get<std::string>()};
  if (!value->is_array()) fields.fail(key, "must be a string or an array of strings");
  if (value->size() > max) fields.fail(key, "may hold at most " + std::to_string(max) + " strings");
  std::vector<std::string> out;
  for (const Json& item : *value) {
    if (!item.is_string()) fields.fail(key, "must hold only strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string content_text(const Json& content, const std::string& path) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw ApiError(400, "'" + path + "' must be a string or an array of content parts", path);
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = path + "[" + std::to_string(i) + "]";
    Fields part(content[i], part_path);
    const std::string type = part.required_string("type");
    if (type != "text" && type != "input_text") {
      throw ApiError(400, "'" + part_path + ".type' is '" + type + "'; this server reads text only",
                     part_path + ".type");
    }
    text += part.required_string("text");
  }
  return text;
}

Json template_messages_from_openai(const Json& messages, const char* path) {
  if (messages.empty()) throw ApiError(400, std::string("'") + path + "' must not be empty", path);
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = indexed(path, i);
    Fields message(messages[i], at);
    std::string role = message.required_string("role");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      message.fail("role",
                   "must be system, developer, user, assistant or tool, got '" + role + "'");
    }
    Json converted = {{"role", role}};
    const Json* content = message.get("content");
    if (content == nullptr && role != "assistant") message.fail("content", "is required");
    converted["content"] = content_text(content ? *content : Json(), message.name("content"));
    if (role == "tool") {
      if (auto id = message.string("tool_call_id")) converted["tool_call_id"] = *id;
      if (auto name = message.string("name")) converted["name"] = *name;
    }
    if (const Json* calls = message.array("tool_calls"); calls && role == "assistant") {
      converted["tool_calls"] = template_tool_calls(message, *calls, /*arguments_as_text=*/true);
    }
    out.push_back(std::move(converted));
  }
  return out;
}

Json template_tool_calls(const Fields& message, const Json& calls, bool arguments_as_text) {
  Json out = Json::array();
  for (size_t c = 0; c < calls.size(); ++c) {
    Fields call(calls[c], message.name("tool_calls") + "[" + std::to_string(c) + "]");
    const Json* function = call.object("function");
    if (function == nullptr) call.fail("function", "is required");
    Fields fn(*function, call.name("function"));
    Json arguments = Json::object();
    if (!arguments_as_text) {
      if (const Json* object = fn.object("arguments")) arguments = *object;
    } else if (auto text = fn.string("arguments")) {
      arguments = Json::parse(*text, nullptr, false);
      if (!arguments.is_object()) fn.fail("arguments", "must be a JSON object as text");
    }
    Json entry = {{"type", "function"},
                  {"function", {{"name", fn.required_string("name")}, {"arguments", arguments}}}};
    if (auto id = call.string("id")) entry["id"] = *id;
    out.push_back(std::move(entry));
  }
  return out;
}

void answer_job(Service& service, Api api, Job job, bool stream, WholeAnswer whole,
                StreamFormat format, const char* content_type, httplib::Response& res,
                const std::shared_ptr<RequestRecord>& record) {
  std::shared_ptr<JobChannel> channel = service.submit(std::move(job));
  if (stream) {
    stream_job(res, content_type, std::move(channel), std::move(format), record);
  } else {
    answer_whole(res, api, std::move(channel), std::move(whole), record);
  }
}

Json offered_tools(const Fields& body, const ServedModel& served) {
  const Json* tools = body.array("tools");
  if (tools == nullptr || tools->empty()) return nullptr;
  check_openai_tools(*tools, "tools");
  if (!served.tool_calls.known()) {
    body.fail("tools",
              "cannot be used with this model: its chat template teaches no tool-call format "
              "this server parses");
  }
  return *tools;
}

void check_openai_tools(const Json& tools, const char* path) {
  for (size_t i = 0; i < tools.size(); ++i) {
    Fields tool(tools[i], indexed(path, i));
    if (tool.required_string("type") != "function") tool.fail("type", "must be 'function'");
    const Json* function = tool.object("function");
    if (function == nullptr) tool.fail("function", "is required");
    Fields fn(*function, tool.name("function"));
    fn.required_string("name");
    fn.string("description");
    fn.object("parameters");
  }
}

AssistantOutput split_output(const ServedModel& served, const std::string& text, const Json& tools,
                             bool tools_offered) {
  if (!tools_offered) {
    AssistantOutput out;
    out.content = text;
    return out;
  }
  return served.tool_calls.parse(text, tools.is_array() ? tools.dump() : std::string());
}

std::string token_bytes(const ServedModel& served, int32_t id) {
  const int32_t ids[1] = {id};
  return served.model->tokenizer().decode(ids, false);
}

}  // namespace sluice::server::api
