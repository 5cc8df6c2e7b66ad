// PreTokenizer (pre_tokenizer.h): compiles a regex list with PCRE2 in UTF + UCP mode, JIT when
// the library has it, and splits text into matches and gaps, one regex after another.
// Hugging Face runs these patterns with Oniguruma, whose \s is narrower than PCRE2's (PCRE2 adds
// U+180E through \h), so \s and \S are rewritten to Oniguruma's exact set before compiling.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

// Oniguruma's Unicode \s: TAB..CR, U+0085, the Space_Separator category, U+2028 and U+2029.
constexpr std::string_view kSpaceSet =
    R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites \s (and \S outside classes) to kSpaceSet. Tracks escapes and [...] classes; none of
// the table's patterns nest classes, so one level of tracking is enough.
std::string rewrite_space_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kSpaceSet) : "[" + std::string(kSpaceSet) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kSpaceSet) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0)
    return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (data == nullptr) fail("pre-tokenizer: out of memory for PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

// Digit-grouping patterns whose lookaheads rescan the rest of a digit run at every position,
// which makes them quadratic in the run length (seconds for a 30k-digit prompt). Each has an
// exact linear equivalent, used instead; the unit tests check both give the same pieces.
enum class DigitRule {
  None,
  GroupsFromRight,       // \p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})): lead of len%3, then threes
  GroupsBeforeBoundary,  // \d{1,3}(?=(?:\d{3})*\b): the same, for runs ending at a \b
  SplitPointsFromRight,  // (?=(\d{3})+(?!\d)): empty matches 3, 6, … digits before a run end
};

DigitRule digit_rule(std::string_view source) {
  if (source == R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re") return DigitRule::GroupsFromRight;
  if (source == R"re(\d{1,3}(?=(?:\d{3})*\b))re") return DigitRule::GroupsBeforeBoundary;
  if (source == R"re((?=(\d{3})+(?!\d)))re") return DigitRule::SplitPointsFromRight;
  return DigitRule::None;
}

pcre2_code* compile(std::string_view source) {
  const std::string pattern = rewrite_space_classes(source);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  if (code == nullptr) {
    fail("pre-tokenizer: cannot compile regex '", source, "' at offset ", error_offset, ": ",
         pcre2_message(error));
  }
  // JIT is an optimisation only: without it (or where it fails) the interpreter is used.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return code;
}

}  // namespace

struct PreTokenizer::Compiled {
  std::string source;
  pcre2_code* code = nullptr;
  DigitRule rule = DigitRule::None;
  pcre2_code* runs = nullptr;  // digit runs, for the linear digit rules
  pcre2_code* word = nullptr;  // one \w character, for GroupsBeforeBoundary
  ~Compiled() {
    pcre2_code_free(code);
    pcre2_code_free(runs);
    pcre2_code_free(word);
  }

  // Appends the matches and gaps of `text[begin, end)` to `out`.
  void split_piece(std::string_view text, size_t begin, size_t end, MatchData& match,
                   std::vector<std::pair<size_t, size_t>>& out) const;
  void split_digits(std::string_view text, size_t begin, size_t end, MatchData& match,
                    std::vector<std::pair<size_t, size_t>>& out) const;
};

namespace {

// The next match of `code` in text[begin, end) at or after `from` (exactly at `from` when
// `anchored`); false when none.
bool find(const pcre2_code* code, std::string_view text, size_t begin, size_t end, size_t from,
          MatchData& match, size_t& match_begin, size_t& match_end, bool anchored = false) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
  const uint32_t options = PCRE2_NO_UTF_CHECK | (anchored ? PCRE2_ANCHORED : 0);
  const int rc =
      pcre2_match(code, subject, end - begin, from - begin, options, match.data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) fail("pre-tokenizer: digit run search failed: ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
  match_begin = begin + ovector[0];
  match_end = begin + ovector[1];
  return true;
}

}  // namespace

void PreTokenizer::Compiled::split_digits(std::string_view text, size_t begin, size_t end,
                                          MatchData& match,
                                          std::vector<std::pair<size_t, size_t>>& out) const {
  // Cut points, ascending; pieces are the spans between them (matches and gaps alike, since
  // every digit group is a match and every stretch between groups a gap).
  std::vector<size_t> cuts = {begin};
  size_t run_begin = 0;
  size_t run_end = 0;
  for (size_t from = begin;
       from < end && find(runs, text, begin, end, from, match, run_begin, run_end);
       from = run_end) {
    bool grouped = true;
    if (rule == DigitRule::GroupsBeforeBoundary && run_end < end) {
      size_t b = 0;
      size_t e = 0;  // \b after the run: the next character must not be a word character
      grouped = !find(word, text, begin, end, run_end, match, b, e, true);
    }
    if (!grouped) continue;
    // Every digit of these runs is one byte in UTF-8 only for ASCII, so count characters by
    // the run's own match boundaries: walk it character by character.
    std::vector<size_t> starts;
    for (size_t i = run_begin; i < run_end;) {
      starts.push_back(i);
      char32_t cp = 0;
      i += std::max<size_t>(1, decode_utf8(text, i, cp));
    }
    const size_t n = starts.size();
    if (rule == DigitRule::SplitPointsFromRight) {
      for (size_t k = n % 3; k + 3 <= n; k += 3) cuts.push_back(starts[k]);
      continue;
    }
    cuts.push_back(run_begin);
    for (size_t k = n % 3 == 0 ? 3 : n % 3; k < n; k += 3) cuts.push_back(starts[k]);
    cuts.push_back(run_end);
  }
  cuts.push_back(end);
  for (size_t i = 1; i < cuts.size(); ++i) {
    if (cuts[i] > cuts[i - 1]) out.emplace_back(cuts[i - 1], cuts[i]);
  }
}

void PreTokenizer::Compiled::split_piece(std::string_view text, size_t begin, size_t end,
                                         MatchData& match,
                                         std::vector<std::pair<size_t, size_t>>& out) const {
  if (rule != DigitRule::None) return split_digits(text, begin, end, match, out);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
  const size_t length = end - begin;
  size_t offset = 0;
  size_t previous_end = 0;
  uint32_t extra = 0;  // PCRE2_NOTEMPTY_ATSTART after an empty match, as Python's finditer
  while (offset <= length) {
    uint32_t options = PCRE2_NO_UTF_CHECK | extra;
    int rc = pcre2_match(code, subject, length, offset, options, match.data, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // deep backtracking: the interpreter uses the heap
      rc = pcre2_match(code, subject, length, offset, options | PCRE2_NO_JIT, match.data, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("pre-tokenizer: regex '", source, "' failed: ", pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
    const size_t match_begin = ovector[0];
    const size_t match_end = ovector[1];
    if (match_begin > previous_end) out.emplace_back(begin + previous_end, begin + match_begin);
    if (match_end > match_begin) out.emplace_back(begin + match_begin, begin + match_end);
    previous_end = std::max(previous_end, match_end);
    offset = match_end;
    extra = match_end == match_begin ? PCRE2_NOTEMPTY_ATSTART : 0;
  }
  if (previous_end < length) out.emplace_back(begin + previous_end, end);
}

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const std::string& source : regexes) {
    auto compiled = std::make_unique<Compiled>();
    compiled->source = source;
    compiled->code = compile(source);
    compiled->rule = digit_rule(source);
    if (compiled->rule == DigitRule::GroupsFromRight) compiled->runs = compile(R"re(\p{N}+)re");
    if (compiled->rule == DigitRule::GroupsBeforeBoundary ||
        compiled->rule == DigitRule::SplitPointsFromRight) {
      compiled->runs = compile(R"re(\d+)re");
    }
    if (compiled->rule == DigitRule::GroupsBeforeBoundary) compiled->word = compile(R"re(\w)re");
    regexes_.push_back(std::move(compiled));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<size_t, size_t>>& pieces) const {
  const size_t first_new = pieces.size();
  if (text.empty()) return;
  pieces.emplace_back(0, text.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (const auto& regex : regexes_) {
    MatchData match(regex->code);
    next.clear();
    for (size_t i = first_new; i < pieces.size(); ++i) {
      regex->split_piece(text, pieces[i].first, pieces[i].second, match, next);
    }
    pieces.resize(first_new);
    pieces.insert(pieces.end(), next.begin(), next.end());
  }
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> pieces;
  split(text, pieces);
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) out.emplace_back(text.substr(begin, end - begin));
  return out;
}

}  // namespace sluice::text
