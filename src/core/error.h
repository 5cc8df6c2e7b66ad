// fail(), which throws sluice::Error (include/sluice/error.h) with a message built from parts.
// Thrown only for failures (bad files, requests, arguments); caught at the public API and the
// HTTP handler. Messages name the file, field or tensor and the offending value.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "sluice/error.h"

namespace sluice {

// fail("gguf: ", path, ": tensor '", name, "' has ", n, " dims") — concatenates with operator<<.
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream message;
  (message << ... << std::forward<Parts>(parts));
  throw Error(message.str());
}

}  // namespace sluice
