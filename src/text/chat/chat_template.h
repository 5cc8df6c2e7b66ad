// Chat-template rendering as Hugging Face's apply_chat_template does it: the jinja globals
// (raise_exception, strftime_now with an injectable clock) and the context variables
// (messages, tools, documents, add_generation_prompt, bos/eos tokens, extra kwargs).
// Implements render_chat_template of include/sluice/chat_template.h.
#pragma once

#include <string>

#include "sluice/chat_template.h"

namespace sluice::chat {

// Python's datetime.strftime on a naive local time given as "YYYY-MM-DDTHH:MM[:SS]"; an empty
// `now` means the current local time.
std::string strftime_at(const std::string& now, const std::string& format);

}  // namespace sluice::chat
