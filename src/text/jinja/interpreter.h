// Interpreter: walks a parsed template and renders it. Owns jinja2's run-time rules — scoping
// (a for loop's body gets a fresh scope each iteration; macros see the scope they were defined
// in; only namespace() objects can be changed from an inner scope), the `loop` object,
// macros/caller, break/continue. Values, filters and tests are elsewhere.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "text/jinja/ast.h"

namespace sluice::jinja {

// One scope of variables, chained to the scope it is nested in.
struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;

  const Value* find(const std::string& name) const;
};
using FramePtr = std::shared_ptr<Frame>;

// The builtin globals every template sees: range, namespace, dict.
void add_builtin_globals(Frame& globals);

// Renders `body`; `globals` holds the context variables and global functions. Template errors
// are sluice::Error with the message Python's jinja2 would raise.
std::string render_template(const StmtList& body, const FramePtr& globals);

}  // namespace sluice::jinja
