// The tokenizer.ggml.pre table (pre_tokenizer.h): every name llama.cpp's llama-vocab.cpp maps
// to a LLAMA_VOCAB_PRE_TYPE_*, grouped by type, with that type's split regexes and flags.
// Where llama.cpp rewrote a Hugging Face pattern only because std::regex lacks \p{Lu}, (?i:)
// or possessive quantifiers, the original tokenizer.json pattern is used instead: PCRE2 runs it
// as written, and the original is what the reference (Hugging Face tokenizers) runs.
#include <algorithm>

#include "core/error.h"
#include "text/tokenizer/pre_tokenizer.h"

namespace sluice::text {
namespace {

// GPT-2's pattern (openai/gpt-2 encoder.py); llama.cpp drops the final |\s+ because its
// hand-written matcher covers it, the gap rule makes that equivalent, and we keep the original.
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
constexpr const char* kGpt2NoTail =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char* kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// o200k (gpt-4o, gpt-oss): cased words with an optional contraction suffix.
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kDeepseekV3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kPoro =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";

struct Entry {
  std::vector<std::string> names;
  PreTokenizerInfo info;
};

PreTokenizerInfo make(std::vector<std::string> regexes, bool clean_spaces = true,
                      bool ignore_merges = false, bool add_bos = false) {
  PreTokenizerInfo info;
  info.regexes = std::move(regexes);
  info.clean_spaces = clean_spaces;
  info.ignore_merges = ignore_merges;
  info.add_bos = add_bos;
  return info;
}

std::vector<Entry> llama_family_entries() {
  return {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       make({kLlama3}, true, true, true)},
      {{"dbrx"}, make({kLlama3})},
      {{"smaug-bpe"}, make({kLlama3})},
      {{"glm4", "chatglm-bpe"}, make({kLlama3})},
      {{"jais-2"},
       make(
           {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re"})},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"}, make({kQwen2}, false)},
      {{"megrez", "stablelm2"}, make({kQwen2})},
      {{"hunyuan", "solar-open", "grok-2"}, make({kQwen2}, false)},
      {{"qwen35"},
       make(
           {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           false)},
      {{"ufakzeka"},
       make(
           {R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           false)},
      {{"seed-coder"},
       make(
           {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           false)},
      {{"bailingmoe", "bailingmoe2", "llada-moe"},
       make(
           {R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"},
           false)},
      {{"exaone-moe"},
       make(
           {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"},
           true)},
      {{"minicpm5"},
       make(
           {R"re(\p{N}{1,3})re",
            R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           true, true)},
      {{"laguna"}, make({R"re([^\n]+|[\n]+)re", kQwen2}, false)},
  };
}

std::vector<Entry> gpt2_family_entries() {
  return {
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
        "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt",
        "olmo", "jais"},
       make({kGpt2})},
      {{"trillion", "granite-docling"}, make({kGpt2}, false)},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
       make({R"re(\p{N})re", kGpt2})},
      {{"command-r", "smollm"}, make({R"re(\p{N})re", kGpt2}, false)},
      {{"falcon"}, make({R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2NoTail, "[0-9][0-9][0-9]"})},
      {{"default", ""},
       make({R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2NoTail, R"re(\p{N}+)re", "[0-9][0-9][0-9]"})},
      {{"poro-chat"}, make({kPoro}, false)},
      {{"bloom", "gpt3-finnish"}, make({kPoro})},
      {{"viking"}, make({kPoro, R"re(\p{N})re"}, false)},
      {{"chameleon"},
       make({"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
             R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2NoTail},
            false, false, true)},
  };
}

// Non-ASCII characters are written as \x{...}: several in these classes (U+2126 OHM SIGN,
// U+212A KELVIN SIGN, U+1FBE, U+F900 …) have canonical singleton decompositions, so any tool that
// NFC-normalises text would silently change the class.
std::vector<Entry> cjk_family_entries() {
  return {
      {{"deepseek-llm"},
       make({"[\r\n]",
             "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{"
             "1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{"
             "37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{"
             "481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}"
             "-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{"
             "1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{"
             "1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{"
             "1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{"
             "1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-"
             "\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
             "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
             "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
             "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-"
             "\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
             "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{"
             "104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{"
             "118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
             "\\s?[!-/"
             ":-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
             "\\s+$", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}+"},
            false)},
      {{"deepseek-coder"},
       make({"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
             "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", "\\p{N}"},
            false)},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       make({R"re(\p{N}{1,3})re", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
             kDeepseekV3Main},
            false)},
      {{"spark2_5"},
       make(
           {R"re(\p{N}{1,3})re", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
            R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
            R"re(\p{N})re"},
           false)},
      {{"youtu"},
       make(
           {"[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{"
            "2018}\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{"
            "FE4F}]+|[\\x{3105}-\\x{312F}]+|[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{"
            "30FF}]+",
            R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           false, true)},
      {{"afmoe"},
       // llama.cpp's custom "\p{AFMoE_digits}" (a digit run splits into a leading 1-2 digits
       // and then groups of three) written as the equivalent lookahead regex.
       make({R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re",
             "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{F900}-\\x{FAFF}\\x{3040}-\\x{309F}\\x{"
             "30A0}-\\x{30FF}\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{E40}-\\x{E7F}\\x{E80}-\\x{"
             "EFF}\\x{1780}-\\x{17FF}\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}\\x{A9E0}-\\x{A9FF}\\x{"
             "AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+",
             kDeepseekV3Main},
            false)},
      {{"kimi-k2"},
       // tokenization_kimi.py's pattern; its class intersections [..&&[^\p{Han}]] are written
       // as a negative lookahead per character, which PCRE2 supports.
       make(
           {R"re(\p{Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           false)},
  };
}

std::vector<Entry> cased_family_entries() {
  return {
      {{"tekken"},
       make(
           {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
           false, true, true)},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, make({kGpt4o}, false)},
      // llama.cpp adds \p{M} to its std::regex stand-in to avoid backtracking; the tokenizer
      // itself uses the o200k pattern.
      {{"granite-embed-multi-97m"}, make({kGpt4o}, false, true)},
      {{"tiny_aya", "cohere2moe"}, make({R"re(\d{1,3}(?=(?:\d{3})*\b))re", kGpt4o}, false)},
      {{"superbpe"}, make({R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"}, false)},
  };
}

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> all;
    for (auto part : {llama_family_entries(), gpt2_family_entries(), cjk_family_entries(),
                      cased_family_entries()}) {
      for (auto& entry : part) all.push_back(std::move(entry));
    }
    return all;
  }();
  return entries;
}

// Names llama.cpp knows whose BPE runs on raw UTF-8 with U+2581 spaces and <0xNN> byte
// fallback, or that drop whitespace entirely: not byte-level BPE, so refused here.
const std::vector<std::string>& refused() {
  static const std::vector<std::string> names = {"gemma4", "granite-embed-multi-311m", "sarvam-moe",
                                                 "whitespace"};
  return names;
}

}  // namespace

std::optional<PreTokenizerInfo> pre_tokenizer_info(std::string_view pre_name) {
  for (const Entry& entry : table()) {
    if (std::find(entry.names.begin(), entry.names.end(), pre_name) != entry.names.end()) {
      return entry.info;
    }
  }
  return std::nullopt;
}

std::optional<std::vector<std::string>> pre_tokenizer_regexes(std::string_view pre_name) {
  auto info = pre_tokenizer_info(pre_name);
  if (!info) return std::nullopt;
  return std::move(info->regexes);
}

PreTokenizerInfo require_pre_tokenizer(std::string_view pre_name) {
  auto info = pre_tokenizer_info(pre_name);
  if (!info) fail("unsupported pre-tokenizer '", pre_name, "'");
  return std::move(*info);
}

std::vector<std::string> supported_pre_tokenizers() {
  std::vector<std::string> names;
  for (const Entry& entry : table()) {
    for (const std::string& name : entry.names) {
      if (!name.empty()) names.push_back(name);
    }
  }
  return names;
}

std::vector<std::string> refused_pre_tokenizers() {
  return refused();
}

}  // namespace sluice::text
