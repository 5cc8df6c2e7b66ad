// sluice::Error: the one exception type of the public API. Its message is one line naming the
// file, field or value that is wrong. Thrown for failures only, never across a thread.
#pragma once

#include <stdexcept>

namespace sluice {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sluice
