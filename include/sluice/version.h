// Version of the Sluice library, e.g. "0.1.0".
#pragma once

namespace sluice {
const char* version();
}  // namespace sluice
