// libFuzzer target for the GGUF reader: any byte string must give either a ModelFile whose
// every field holds up (fuzz_walk.h) or a sluice::Error — never a crash, hang, sanitizer report
// or other exception. Run by scripts/run_fuzzers.sh; see docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <span>

#include "format/gguf/gguf_reader.h"
#include "fuzz_walk.h"
#include "sluice/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  try {
    const sluice::ModelFile model = sluice::parse_gguf(input, "fuzz.gguf");
    sluice::fuzz::walk_model(model, input);
  } catch (const sluice::Error&) {
    // The expected outcome for nearly every input.
  }
  return 0;
}
