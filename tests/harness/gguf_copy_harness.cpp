// gguf_copy_harness IN.gguf OUT.gguf: reads IN with our reader and writes every key and tensor
// back out with our writer, so tests can hand the copy to llama.cpp's own GGUF reader (and
// gguf-py) and check that nothing was lost or misplaced on the way through.
#include <cstdio>
#include <exception>

#include "format/gguf/gguf_reader.h"
#include "format/gguf/gguf_writer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gguf_copy_harness IN.gguf OUT.gguf\n");
    return 2;
  }
  try {
    const sluice::ModelFile model = sluice::read_gguf(argv[1]);
    sluice::GgufWriter writer;
    writer.set_alignment(static_cast<uint32_t>(model.alignment));
    for (const auto& entry : model.metadata()) {
      if (entry.key == "general.alignment") continue;  // set_alignment records it
      writer.add_metadata(entry.key, entry.value);
    }
    for (const auto& tensor : model.tensors()) {
      const auto shape = tensor.shape();
      writer.add_tensor(tensor.name, tensor.type, {shape.begin(), shape.end()},
                        model.tensor_bytes(tensor));
    }
    writer.write(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_copy_harness: %s\n", e.what());
    return 1;
  }
  return 0;
}
