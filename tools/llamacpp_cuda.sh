#!/usr/bin/env bash
# llama.cpp's CUDA build, the peer of the GPU benchmarks (issue 8), from the llama.cpp sources
# vendored in the llama-cpp-python sdist on PyPI (the GPU machine has no network: the sources
# travel with the payload of tools/device_payload.sh).
#   tools/llamacpp_cuda.sh pack OUT.tgz   (here) the sdist's llama.cpp minus models, docs, web UI
#   tools/llamacpp_cuda.sh build SRC.tgz DIR   (GPU machine) unpacks and builds DIR/bin/llama-bench
#                                              for sm_90a with all cores
set -euo pipefail
version=0.3.36  # llama-cpp-python; its vendor/llama.cpp is the commit built
case "${1:-}" in
  pack)
    out=$(realpath -m "${2:?usage: pack OUT.tgz}")
    mkdir -p "$(dirname "$out")"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work" >&2
    tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
    tar -czf "$out" -C "$work/llama_cpp_python-$version/vendor" \
      --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/gguf-py \
      --exclude='llama.cpp/tools/server/public*' --exclude=llama.cpp/tools/ui \
      --exclude=llama.cpp/media --exclude=llama.cpp/.github llama.cpp
    ;;
  build)
    src=${2:?usage: build SRC.tgz DIR}
    dir=${3:?usage: build SRC.tgz DIR}
    mkdir -p "$dir"
    [ -d "$dir/llama.cpp" ] || tar -xzf "$src" -C "$dir"
    cmake -S "$dir/llama.cpp" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a-real -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
      > "$dir/configure.log"
    cmake --build "$dir/build" -j "$(nproc)" --target llama-bench > "$dir/build.log"
    ls -la "$dir/build/bin/llama-bench"
    ;;
  *) echo "usage: tools/llamacpp_cuda.sh pack OUT.tgz | build SRC.tgz DIR" >&2; exit 2 ;;
esac
