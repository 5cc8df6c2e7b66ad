// Constants of the GGUF container shared by the reader and the writer (ggml's gguf.h and the
// GGUF spec define them). No parsing here.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice {

inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kGgufVersion = 3;  // what the writer produces; the reader takes 2 and 3
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";
// GGUF permits arrays of arrays; nothing real nests deeper than two, and a cap keeps a hostile
// file from recursing the reader off the stack.
inline constexpr uint32_t kGgufMaxArrayDepth = 8;

}  // namespace sluice
