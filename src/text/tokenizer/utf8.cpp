// UTF-8 decoding, encoding and the two repair policies (utf8.h). Well-formedness follows the
// Unicode standard's table 3-7, so the second-byte ranges after E0, ED, F0 and F4 are narrower
// than 80..BF: that is what rules out overlong forms, surrogates and values above U+10FFFF.
#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

// The allowed range of the second byte after `lead`, and the total sequence length; length 0
// for bytes that cannot start a sequence.
struct LeadInfo {
  size_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo lead_info(uint8_t lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

bool is_continuation(uint8_t byte) {
  return (byte & 0xC0) == 0x80;
}

// How many bytes from `pos` form a valid prefix of a sequence (1 for a lone valid lead, up to
// the full length); 0 when the byte at `pos` cannot start one.
size_t valid_prefix_length(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const LeadInfo info = lead_info(lead);
  if (info.length <= 1) return info.length;
  size_t n = 1;
  while (n < info.length && pos + n < text.size()) {
    const auto byte = static_cast<uint8_t>(text[pos + n]);
    const bool ok =
        n == 1 ? (byte >= info.second_lo && byte <= info.second_hi) : is_continuation(byte);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t decode_utf8(std::string_view text, size_t pos, char32_t& cp) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const LeadInfo info = lead_info(lead);
  if (info.length == 0) return 0;
  if (info.length == 1) {
    cp = lead;
    return 1;
  }
  if (valid_prefix_length(text, pos) != info.length) return 0;
  static constexpr uint8_t kLeadMask[5] = {0, 0, 0x1F, 0x0F, 0x07};
  char32_t value = lead & kLeadMask[info.length];
  for (size_t i = 1; i < info.length; ++i) {
    value = (value << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  }
  cp = value;
  return info.length;
}

bool is_valid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp;
    const size_t n = decode_utf8(text, pos, cp);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string repair_utf8_per_byte(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    const size_t n = decode_utf8(text, pos, cp);
    if (n == 0) {
      append_utf8(out, kReplacementChar);
      ++pos;
    } else {
      out.append(text.substr(pos, n));
      pos += n;
    }
  }
  return out;
}

std::string repair_utf8_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    const size_t n = decode_utf8(text, pos, cp);
    if (n > 0) {
      out.append(text.substr(pos, n));
      pos += n;
      continue;
    }
    // A maximal subpart: the longest valid prefix of a sequence, or one stray byte.
    const size_t bad = valid_prefix_length(text, pos);
    append_utf8(out, kReplacementChar);
    pos += bad == 0 ? 1 : bad;
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view text) {
  // A cut-short sequence is at most 3 bytes long, so only the tail needs looking at.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t pos = n - back;
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (is_continuation(byte)) continue;
    const LeadInfo info = lead_info(byte);
    if (info.length > back && valid_prefix_length(text, pos) == back) return pos;
    return n;
  }
  return n;
}

}  // namespace sluice::text
