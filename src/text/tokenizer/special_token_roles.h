// Special-token roles that llama.cpp derives from token *texts* rather than from metadata: the
// end-of-turn/end-of-message ids and the full end-of-generation set (eos, eot, eom, FIM
// pad/repo/separator, and tokens named <|eot_id|>, <|im_end|>, <end_of_turn>, …). Both
// adapters (GGUF and Hugging Face) call it so the two sources agree on these roles.
#pragma once

#include <vector>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text {

struct RoleOptions {
  // The GGUF source copies llama.cpp's load-time type overrides too: a token found by name as
  // an end-of-generation token becomes Control, gpt-oss's <|channel|>/<|message|>/<|start|>/
  // <|constrain|> become UserDefined. The Hugging Face source keeps its own special flags.
  bool llama_cpp_type_overrides = false;
  std::vector<TokenId> extra_eog;  // ids metadata names as end-of-generation (FIM pad/rep/sep)
};

// Fills spec.eot / spec.eom when unset, then spec.eog (sorted, unique).
void derive_special_token_roles(TokenizerSpec& spec, const RoleOptions& options = {});

}  // namespace sluice::text
