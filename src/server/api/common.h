// What the three API adapters share: request pieces that mean the same everywhere (stop lists,
// seeds, ids), messages normalized into the shape Hugging Face chat templates take, and the
// model's output split into content, reasoning and tool calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/json_fields.h"
#include "server/responses.h"
#include "server/service.h"
#include "sluice/engine.h"
#include "sluice/tool_calls.h"

namespace sluice::server::api {

// A fresh seed per request when the client gives none (OpenAI and Ollama sample freshly each
// time unless a seed is set).
uint64_t random_seed();
std::string random_id(const char* prefix);  // "chatcmpl-…", "msg_…", "call_…"
int64_t unix_time();
// Ollama's timestamps: RFC 3339 in UTC with nanoseconds.
std::string iso_time(std::chrono::system_clock::time_point time);
inline std::string iso_time_now() {
  return iso_time(std::chrono::system_clock::now());
}

// `key` as a string or an array of strings (at most `max`).
std::vector<std::string> string_list(const Fields& fields, const char* key, size_t max);

// Text of a content value: a string, or an array of {"type": "text", "text"} parts (other part
// types, e.g. images, are refused: this server reads text only).
std::string content_text(const Json& content, const std::string& path);

// OpenAI-style chat messages (system/developer/user/assistant/tool, content as text or parts,
// assistant tool_calls with arguments as JSON text) into the template's shape: content text,
// tool_calls[].function.arguments as an object. Every field checked; 400 names the bad one.
Json template_messages_from_openai(const Json& messages, const char* path);

// An assistant message's tool_calls ([{"id"?, "function": {"name", "arguments"}}]) as templates
// take them: arguments an object. OpenAI sends them as JSON text, Ollama as an object.
Json template_tool_calls(const Fields& message, const Json& calls, bool arguments_as_text);

// Answers a job whole (`whole` builds the body from its output) or as a stream (`format`,
// `content_type`), recording its tokens and outcome.
void answer_job(Service& service, Api api, Job job, bool stream, WholeAnswer whole,
                StreamFormat format, const char* content_type, httplib::Response& res,
                const std::shared_ptr<RequestRecord>& record);

// How one adapter streams: the API (for error shapes), the content type, the keep-alive.
struct StreamShape {
  Api api;
  const char* content_type;
  const char* keep_alive;
};

// Answers an adapter's call whole or streamed. `Call` is the adapter's per-request state (shared
// by the handler and the stream) with `served`, `tools` and the tool-call `filter` streaming
// needs; the three functions build the adapter's own chunks, ending and whole answer.
template <typename Call>
void answer_call(Service& service, const StreamShape& shape, std::shared_ptr<Call> call, Job job,
                 bool stream, std::string (*on_events)(Call&, std::vector<TokenEvent>&),
                 std::string (*on_end)(Call&, const JobChannel&),
                 Json (*whole)(const Call&, const CollectedOutput&), httplib::Response& res,
                 const std::shared_ptr<RequestRecord>& record) {
  if (stream && !call->tools.is_null()) {
    call->filter = std::make_unique<ToolCallGrammar::StreamFilter>(call->served->tool_calls);
  }
  StreamFormat format;
  format.on_events = [call, on_events](std::vector<TokenEvent>& events) {
    return on_events(*call, events);
  };
  format.on_end = [call, on_end](const JobChannel& ended) { return on_end(*call, ended); };
  format.keep_alive = shape.keep_alive;
  answer_job(
      service, shape.api, std::move(job), stream,
      [call, whole](const CollectedOutput& output) { return whole(*call, output); },
      std::move(format), shape.content_type, res, record);
}

// The generated text split by the model's tool-call grammar (no tools offered: all content).
AssistantOutput split_output(const ServedModel& served, const std::string& text, const Json& tools,
                             bool tools_offered);

// The bytes a token stands for, for logprobs (may be an incomplete UTF-8 sequence).
std::string token_bytes(const ServedModel& served, int32_t id);

// The body's OpenAI-style `tools`, checked, or null when none are offered; 400 naming `tools`
// when the model's template teaches no tool-call format this server parses.
Json offered_tools(const Fields& body, const ServedModel& served);

// Tools as the template takes them (OpenAI's list), checked: each {"type": "function",
// "function": {"name", "description"?, "parameters"?}}.
void check_openai_tools(const Json& tools, const char* path);

}  // namespace sluice::server::api
