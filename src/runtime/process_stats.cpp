// peak_rss_bytes: the high-water mark of this process's resident memory, from the kernel's
// getrusage (ru_maxrss is in KiB on Linux).
#include <sys/resource.h>

#include "sluice/engine.h"

namespace sluice {

uint64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return uint64_t(usage.ru_maxrss) * 1024;
}

}  // namespace sluice
