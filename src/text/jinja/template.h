// Template: a compiled jinja2 template (lexed and parsed once, rendered many times) with the
// environment Hugging Face uses for chat templates: trim_blocks, lstrip_blocks, loop controls,
// the `generation` tag. The caller supplies the globals (context variables and functions).
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"

namespace sluice::jinja {

class Template {
 public:
  // Throws sluice::Error with jinja2's syntax error message.
  explicit Template(std::string_view source);

  // `globals` gets the builtins (range, namespace, dict) added where not already present.
  std::string render(const FramePtr& globals) const;

 private:
  StmtList body_;
};

}  // namespace sluice::jinja
