// render_chat_template: parses the JSON inputs (keeping key order, as Python dicts do), builds
// the context Hugging Face passes to the template and renders it with the jinja interpreter.
#include "text/chat/chat_template.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/jinja/template.h"
#include "text/jinja/value_json.h"

namespace sluice {
namespace chat {

std::string strftime_at(const std::string& now, const std::string& format) {
  std::tm tm{};
  if (now.empty()) {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  } else {
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
    int n = std::sscanf(now.c_str(), "%d-%d-%d%*1[T ]%d:%d:%d", &y, &mo, &d, &h, &mi, &s);
    if (n < 3) fail("--now: expected YYYY-MM-DDTHH:MM:SS, got '", now, "'");
    tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi,
    tm.tm_sec = s;
    std::tm probe = tm;
    timegm(&probe);  // fills in weekday and day of year without a time-zone shift
    tm.tm_wday = probe.tm_wday, tm.tm_yday = probe.tm_yday;
  }
  // A naive datetime has no zone: Python prints %z and %Z as empty.
  std::string fmt;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      if (format[i + 1] == 'z' || format[i + 1] == 'Z') {
        ++i;
        continue;
      }
      fmt += format.substr(i, 2);
      ++i;
      continue;
    }
    fmt.push_back(format[i]);
  }
  if (fmt.empty()) return "";
  std::string out(256 + fmt.size() * 8, '\0');
  size_t len = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(len);
  return out;
}

}  // namespace chat

namespace {

jinja::Value parse_json_value(const std::string& text, const char* what) {
  try {
    return jinja::value_from_json(nlohmann::ordered_json::parse(text));
  } catch (const nlohmann::json::exception& e) {
    fail(what, ": invalid JSON: ", e.what());
  }
}

}  // namespace

std::string render_chat_template(const std::string& template_text, const std::string& messages_json,
                                 const ChatTemplateOptions& options) {
  using jinja::Value;
  jinja::Template compiled(template_text);
  auto globals = std::make_shared<jinja::Frame>();
  auto& vars = globals->vars;
  std::string now = options.now;
  vars["raise_exception"] = Value::function(
      "raise_exception", [](jinja::CallArgs& a) -> Value { fail(a.get(0, "message").to_str()); });
  vars["strftime_now"] = Value::function("strftime_now", [now](jinja::CallArgs& a) {
    return Value::string(chat::strftime_at(now, a.get(0, "format").to_str()));
  });
  if (!options.extra_context_json.empty()) {
    Value extra = parse_json_value(options.extra_context_json, "extra context");
    if (!extra.is_dict()) fail("extra context: expected a JSON object");
    for (const auto& [k, v] : extra.dict_ref().items) vars[k.to_str()] = v;
  }
  if (options.bos_token) vars["bos_token"] = Value::string(*options.bos_token);
  if (options.eos_token) vars["eos_token"] = Value::string(*options.eos_token);
  vars["messages"] = parse_json_value(messages_json, "messages");
  vars["tools"] =
      options.tools_json.empty() ? Value::none() : parse_json_value(options.tools_json, "tools");
  vars.try_emplace("documents", Value::none());
  vars["add_generation_prompt"] = Value::boolean(options.add_generation_prompt);
  return compiled.render(globals);
}

}  // namespace sluice
