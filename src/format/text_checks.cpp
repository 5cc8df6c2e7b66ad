// UTF-8 validation and printable rendering for error messages.
#include "format/text_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace sluice {

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    size_t extra = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1, code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2, code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3, code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr uint32_t kMinCode[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinCode[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string printable(std::string_view text, size_t max_bytes) {
  // Valid UTF-8 prints as itself (names in any script stay readable); other bytes are escaped.
  const bool keep_high = is_valid_utf8(text);
  size_t cut = std::min(text.size(), max_bytes);
  while (keep_high && cut < text.size() && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out;
  for (size_t i = 0; i < cut; ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    if ((byte >= 0x20 && byte != 0x7F && byte != '\\' && byte < 0x80) ||
        (keep_high && byte >= 0x80)) {
      out += static_cast<char>(byte);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", byte);
      out += escaped;
    }
  }
  if (cut < text.size()) out += "...";
  return out;
}

}  // namespace sluice
