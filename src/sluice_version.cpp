// The version string of the library (the public header declares it).
#include "sluice/version.h"

namespace sluice {
const char* version() {
  return SLUICE_VERSION;
}
}  // namespace sluice
