// Methods templates call on values (`s.strip()`, `d.get(k)`, `l.index(x)`): Python's str, dict
// and list methods, bound to their object. Mutating methods of lists and dicts are refused the
// way jinja2's ImmutableSandboxedEnvironment refuses them (Hugging Face renders in that sandbox).
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace sluice::jinja {

// The bound method `obj.name`, an undefined that raises the sandbox's SecurityError when
// called (mutating methods), or nullopt when the type has no such method.
std::optional<Value> find_method(const Value& obj, const std::string& name);

}  // namespace sluice::jinja
