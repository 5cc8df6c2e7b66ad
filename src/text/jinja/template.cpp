// Compiling (lex + parse with the builtin filter/test names) and rendering a template.
#include "text/jinja/template.h"

#include "text/jinja/filters.h"
#include "text/jinja/parser.h"

namespace sluice::jinja {

Template::Template(std::string_view source) {
  ParseOptions options;
  options.is_filter = is_filter;
  options.is_test = is_test;
  body_ = parse(tokenize(source), options);
}

std::string Template::render(const FramePtr& globals) const {
  Frame builtins;
  add_builtin_globals(builtins);
  for (auto& [name, value] : builtins.vars) globals->vars.try_emplace(name, value);
  return render_template(body_, globals);
}

}  // namespace sluice::jinja
