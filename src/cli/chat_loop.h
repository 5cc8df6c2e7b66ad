// The interactive chat of `sluice run` without -p: read a turn, answer it streaming, repeat.
// Commands /clear /help /bye /stats; Ctrl-C cancels an answer, two in a row exit; EOF exits.
#pragma once

#include "cli/answer.h"
#include "cli/conversation.h"
#include "sluice/engine.h"

namespace sluice::cli {

// Returns the exit code: 0 on /bye or end of input, 130 when Ctrl-C ended the chat.
int run_chat(Session& session, Conversation& conversation, const AnswerSettings& settings);

}  // namespace sluice::cli
