// GPT-2's byte <-> character bijection (byte_level_bpe_bytes.h), built once into two constant
// tables: 256 UTF-8 strings for encoding and a 324-entry code point table for decoding (every
// mapped code point is below U+0144).
#include "text/tokenizer/byte_level_bpe_bytes.h"

#include <array>

#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

constexpr char32_t kDecodeLimit = 0x144;  // 256 + 68: one past the highest mapped code point

bool is_self_mapped(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8{};
  std::array<int16_t, kDecodeLimit> to_byte{};  // -1 where unmapped

  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const char32_t cp = is_self_mapped(b) ? b : next++;
      to_cp[b] = cp;
      append_utf8(to_utf8[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables instance;  // immutable after construction; thread-safe initialisation
  return instance;
}

}  // namespace

char32_t byte_to_codepoint(uint8_t b) {
  return tables().to_cp[b];
}

std::optional<uint8_t> codepoint_to_byte(char32_t cp) {
  if (cp >= kDecodeLimit) return std::nullopt;
  const int16_t b = tables().to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

void append_byte_level(std::string& out, std::string_view bytes) {
  const Tables& t = tables();
  for (const char c : bytes) out += t.to_utf8[static_cast<uint8_t>(c)];
}

std::string byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    size_t n = decode_utf8(text, pos, cp);
    if (n == 0) {  // not even UTF-8: pass the byte through
      out.push_back(text[pos++]);
      continue;
    }
    const auto b = codepoint_to_byte(cp);
    if (b) {
      out.push_back(static_cast<char>(*b));
    } else {
      out.append(text.substr(pos, n));
    }
    pos += n;
  }
  return out;
}

}  // namespace sluice::text
