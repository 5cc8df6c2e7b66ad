#!/usr/bin/env python3
"""Builds the tokenizer parity corpus: a deterministic list of ≥ 2,000 strings that stress
tokenizers — many scripts, code, emoji (ZWJ sequences, skin tones, flags), whitespace runs,
numbers, English contractions, special-token look-alikes, text decoded from invalid UTF-8,
decomposed (non-NFC) text and a few ~20 KB inputs. Everything comes from the seed and the small
word lists below (no downloads), so the corpus is never committed: the parity test and the speed
benchmark regenerate it.

    python tools/make_tokenizer_corpus.py --out corpus.jsonl   # one {"id", "text"} per line
"""
import argparse
import json
import random
import sys

SEED = 20260115

# A few dozen everyday words per language/script; sentences are sampled from them.
WORDS = {
    "en": "the of and to in is you that it he was for on are as with his they I at be this have from "
          "or one had by word but not what all were we when your can said there use an each which she "
          "do how their if will up other about out many then them these so some her would make like "
          "him into time has look two more write go see number no way could people my than first water "
          "been call who oil its now find long down day did get come made may part tokenizer GPU "
          "JavaScript McDonald's iPhone COVID-19 e-mail naïve café résumé".split(),
    "fr": "le la les de des un une et est dans pour que qui pas sur avec ce il elle nous vous ils "
          "être avoir faire été très où déjà français garçon cœur Noël élève après".split(),
    "de": "der die das und ist nicht ein eine zu den mit sich auf für von dem Straße Mädchen Größe "
          "schön über Ärger Öl Übung heißen Fußball Donaudampfschifffahrtsgesellschaft".split(),
    "es": "el la los las de que y en un una es por con para como más pero sus año niño señor "
          "mañana corazón ¿qué ¡hola! también café jamás".split(),
    "pt": "não são ação coração pão irmã você também está até avó órgão mãe".split(),
    "pl": "że się nie jest na to w z co jak ale już zażółć gęślą jaźń źdźbło".split(),
    "tr": "ve bir bu da için ile çok değil ama gibi İstanbul ılık ağaç şöyle öğrenci ünlü".split(),
    "vi": "tôi bạn không có là của và một những được người này trong Việt Nam tiếng phở".split(),
    "ru": "и в не на я что тот быть с он а весь это как она по но они к у ты из мы за вы так же от "
          "сказать этот который мочь человек о один ещё бы такой только себя своё Москва съешь "
          "ёлка".split(),
    "uk": "і що це не як та але вона ми вони їх ґанок їжак Україна щастя".split(),
    "el": "και το να του η της με που την από είναι για τα δεν θα στο ένα Ελλάδα ψυχή "
          "ωραίος".split(),
    "ar": "في من على إلى أن هذا التي الذي مع كان عن ما لا هو هي كل بعد العربية مرحبا "
          "كتاب".split(),
    "he": "של את על לא זה הוא היא עם כל אני גם יש מה עברית שלום ספר".split(),
    "fa": "و در به از که این را با است برای آن یک فارسی سلام".split(),
    "hi": "के है में की और से को का एक यह पर हैं भी नहीं था हिन्दी नमस्ते भारत क्षत्रिय".split(),
    "bn": "এবং একটি এই করে থেকে হয় বাংলা আমার তোমার".split(),
    "ta": "ஒரு மற்றும் இந்த அது தமிழ் வணக்கம் நன்றி".split(),
    "ka": "და არის ეს რომ საქართველო გამარჯობა".split(),
    "hy": "և է որ այս Հայաստան բարև".split(),
    "am": "እና ነው ይህ አማርኛ ሰላም".split(),
    "ko": "이 그 저 것 수 있 하 되 안녕하세요 한국어 사랑 대한민국 컴퓨터 읽다 갔습니다".split(),
}
# Scripts written without spaces: sentences are runs of these characters and words.
UNSPACED = {
    "zh": list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去"
               "之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又"
               "如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明"
               "") + ["你好", "中文", "北京", "饕餮", "龘", "𠀀", "𪚥"],
    "ja": list("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
               "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンー"
               "日本語東京漢字") + ["こんにちは", "ありがとう", "カタカナ", "ｶﾀｶﾅ"],
    "th": list("กขคงจฉชซญดตถทนบปผพฟมยรลวศสหอฮะาิีึืุูเแโใไ่้๊๋็์") +
          ["สวัสดี", "ภาษาไทย", "ขอบคุณ", "ครับ"],
}

EMOJI = ["😀", "😂", "🥲", "😍", "🤔", "🙏", "👍", "🔥", "🌍", "🚀", "🎉", "💯", "❤️", "✨", "🐍",
         "🦀", "☕", "🍕", "⚡", "✅", "❌", "⭐", "🫠", "🧑‍🚀", "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨",
         "🏳️‍🌈", "🏴‍☠️", "👩🏽‍💻", "🧔🏿‍♂️", "👋🏻", "👋🏼", "👋🏽", "👋🏾", "👋🏿", "🇯🇵", "🇺🇸",
         "🇩🇪", "🇺🇦", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "©️", "™", "↔️", "🤷‍♀️", "🙇🏾‍♂️", "🐻‍❄️",
         "❤️‍🔥", "😶‍🌫️", "🫱🏼‍🫲🏿"]

SPECIAL_LOOKALIKES = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>", "[INST]",
    "[/INST]", "<<SYS>>", "<</SYS>>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>", "<bos>", "<eos>",
    "<start_of_turn>", "<end_of_turn>", "<mask>", "<unused0>", "<unused99>", "<start_of_image>",
    "<image_soft_token>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>", "<｜tool▁calls▁begin｜>", "<think>", "</think>", "<tool_call>",
    "</tool_call>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>",
    "<|constrain|>", "<|startoftext|>", "<|fim_prefix|>", "<|vision_start|>", "<|im_start",
    "im_end|>", "< s >", "<|", "|>", "<<", ">>", "<|im_start|>user", "[CLS]", "[SEP]", "[MASK]",
    "<0x0A>", "▁", "▁▁▁", "Ġ", "Ċ", "<|im_start|><|im_end|>", "<s><s>", "</s></s>",
]

CONTRACTIONS = ["don't", "doesn't", "didn't", "can't", "won't", "isn't", "it's", "It's", "IT'S",
                "he's", "she'd", "we'll", "We'LL", "they're", "THEY'RE", "I've", "I'M", "I'm",
                "you'd", "y'all", "o'clock", "rock'n'roll", "'s", "'t", "'re", "'ve", "'m", "'ll",
                "'d", "don’t", "it’s", "we’ll", "‘quoted’", "“double”", "«guillemets»", "'ſ", "'K",
                "Jones's", "the '90s", "'tis", "ma'am", "l'été", "aujourd'hui"]

CODE_TEMPLATES = [
    "def {f}({a}, {b}=None):\n    \"\"\"{doc}\"\"\"\n    if {b} is None:\n        return [{a} * i for i in range({n})]\n    return {{'{a}': {a}, '{b}': {b}}}\n",
    "#include <vector>\n\nint {f}(const std::vector<int>& {a}) {{\n\tint {b} = 0;\n\tfor (auto x : {a}) {b} += x * {n};\n\treturn {b};\n}}\n",
    "fn {f}({a}: &[u8]) -> Result<usize, String> {{\n    let {b} = {a}.iter().filter(|&&c| c == b'\\n').count();\n    Ok({b} + {n})\n}}\n",
    "const {f} = async ({a}) => {{\n  const {b} = await fetch(`/api/${{{a}}}?n={n}`);\n  return {b}.json();\n}};\n",
    "func {f}({a} []string) map[string]int {{\n\t{b} := make(map[string]int)\n\tfor _, s := range {a} {{\n\t\t{b}[s]++\n\t}}\n\treturn {b}\n}}\n",
    "SELECT {a}, COUNT(*) AS {b}\nFROM {f}\nWHERE {a} <> '' AND id > {n}\nGROUP BY {a}\nORDER BY {b} DESC;\n",
    "<div class=\"{a}\" id=\"{f}\">\n  <p>{doc} &amp; &lt;{b}&gt;</p>\n  <!-- {n} -->\n</div>\n",
    "{{\"{a}\": [{n}, {n}.5, -1e-{n}], \"{b}\": {{\"nested\": true, \"text\": \"{doc}\"}}, \"{f}\": null}}",
    "#!/bin/bash\nset -euo pipefail\nfor {a} in $(seq 1 {n}); do\n  echo \"${{{a}}}\" | grep -E '^[0-9]+$' >> /tmp/{f}.log\ndone\n",
    "public class {F} {{\n    private final int {a} = {n};\n    public String {f}() {{ return \"{doc}\"; }}\n}}\n",
    "\\begin{{equation}}\n  {f}(x) = \\sum_{{i=0}}^{{{n}}} \\frac{{x^i}}{{i!}} \\quad \\text{{{doc}}}\n\\end{{equation}}\n",
    "    {a} = {b}.{f}()  # {doc}\n\t\t{b} += {n}\n",
]

IDENTIFIERS = ["data", "value", "result", "tokens", "buffer", "n_ctx", "kvCache", "HTTPServer",
               "user_id", "x", "y", "_private", "__init__", "camelCaseName", "snake_case_name",
               "SCREAMING_CASE", "i18n", "utf8_bytes"]

WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u200b", "\u2003", "\v",
              "\f", "\u0085", "\u180e", "\u202f"]

# Blocks sampled character by character for the random mixed strings.
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
          (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x10A0, 0x10FF),
          (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x22FF), (0x3040, 0x30FF),
          (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF),
          (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF), (0xE000, 0xE0FF)]


def sentence(rng, lang, n_words):
    if lang in UNSPACED:
        return "".join(rng.choice(UNSPACED[lang]) for _ in range(n_words))
    words = [rng.choice(WORDS[lang]) for _ in range(n_words)]
    if rng.random() < 0.5:
        words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words) + rng.choice([".", "!", "?", "", ",", "…", ":", "。" if lang == "zh" else "."])


def multilingual(rng):
    langs = list(WORDS) + list(UNSPACED)
    out = []
    for i in range(700):
        lang = langs[i % len(langs)]
        text = sentence(rng, lang, rng.randint(1, 24))
        if i % 7 == 0:  # mixed scripts in one string
            text += " " + sentence(rng, rng.choice(langs), rng.randint(2, 8))
        out.append(text)
    return out


def code(rng):
    out = []
    for i in range(260):
        template = CODE_TEMPLATES[i % len(CODE_TEMPLATES)]
        a, b, f = rng.sample(IDENTIFIERS, 3)
        text = template.format(a=a, b=b, f=f, F=f.title().replace("_", ""), n=rng.randint(0, 10**rng.randint(1, 9)),
                               doc=sentence(rng, rng.choice(["en", "de", "zh", "ru"]), 5))
        if i % 5 == 0:
            text = text.replace("    ", "\t")
        if i % 11 == 0:
            text = text * rng.randint(2, 4)
        out.append(text)
    return out


def emoji(rng):
    out = list(EMOJI)
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(1, 8)):
            roll = rng.random()
            if roll < 0.5:
                parts.append(rng.choice(EMOJI))
            elif roll < 0.8:
                parts.append(rng.choice(WORDS["en"]))
            else:
                parts.append(rng.choice(UNSPACED["zh"]))
        out.append(rng.choice(["", " "]).join(parts))
    return out


def whitespace(rng):
    out = [" " * n for n in range(1, 41)] + ["\n" * n for n in range(1, 17)] + ["\t" * n for n in range(1, 9)]
    out += ["a" + " " * n + "b" for n in range(1, 33)]
    out += [" " * n + "word" for n in range(1, 17)] + ["word" + " " * n for n in range(1, 17)]
    for _ in range(160):
        pieces = []
        for _ in range(rng.randint(1, 10)):
            pieces.append(rng.choice(WHITESPACE) * rng.randint(1, 6))
            if rng.random() < 0.6:
                pieces.append(rng.choice(WORDS["en"] + UNSPACED["ja"]))
        out.append("".join(pieces))
    return out


def numbers(rng):
    out = [str(10**n) for n in range(0, 30)] + [str(rng.randint(0, 10**k)) for k in range(1, 60)]
    for _ in range(160):
        kind = rng.randrange(9)
        if kind == 0:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}")
        elif kind == 1:
            out.append(f"{rng.randint(0, 10**12):,}")
        elif kind == 2:
            out.append(f"+1 ({rng.randint(200, 999)}) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}")
        elif kind == 3:
            out.append(f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z")
        elif kind == 4:
            out.append(hex(rng.getrandbits(rng.randint(8, 128))))
        elif kind == 5:
            out.append(f"{rng.uniform(0, 10):.3e}")
        elif kind == 6:
            out.append("".join(chr(0x660 + rng.randint(0, 9)) for _ in range(rng.randint(1, 12))))
        elif kind == 7:
            out.append("".join(chr(0xFF10 + rng.randint(0, 9)) for _ in range(rng.randint(1, 12))))
        else:
            out.append(f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)} costs ${rng.randint(1, 99999)}.{rng.randint(0, 99):02d} (≈{rng.randint(1, 100)}%)")
    return out


def contractions(rng):
    out = list(CONTRACTIONS)
    for _ in range(160):
        words = [rng.choice(CONTRACTIONS + WORDS["en"]) for _ in range(rng.randint(2, 12))]
        out.append(" ".join(words) + rng.choice([".", "?", "!", ""]))
    return out


def special_lookalikes(rng):
    out = list(SPECIAL_LOOKALIKES)
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(SPECIAL_LOOKALIKES))
            if rng.random() < 0.7:
                parts.append(sentence(rng, rng.choice(["en", "zh", "ru"]), rng.randint(1, 5)))
        out.append(rng.choice(["", " ", "\n"]).join(parts))
    out += ["<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHello [/INST]",
            "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
            "<|start|>assistant<|channel|>final<|message|>Done.<|return|>",
            "<｜User｜>hi<｜Assistant｜><think>\nhmm\n</think>\n\nok<｜end▁of▁sentence｜>"]
    return out


def random_mixed(rng):
    out = []
    for _ in range(320):
        chars = []
        for _ in range(rng.randint(1, 60)):
            low, high = rng.choice(RANGES)
            cp = rng.randint(low, high)
            if 0xD800 <= cp <= 0xDFFF:
                continue
            chars.append(chr(cp))
        out.append("".join(chars))
    return out


def edge_cases(rng):
    out = ["", "a", " ", "\n", "\ufeff", "\ufeffhello", "\x00", "a\x00b", "".join(map(chr, range(1, 32))),
           "\x7f", "\u200b\u200c\u200d", "\u200e\u200f", "\u202e reversed", "\u00ad", "\ufffd",
           "\ufffd\ufffd", "abc\ufffddef", "\U0010ffff", "\U000e0001", "\ue000", "ǅ", "ﬁ", "Ⅻ", "ẞ",
           "İ", "ı", "ß", "Å", "Ω", "K", "µ", "ǈ", "ℌ", "①②③", "¼½¾", "x²", "H₂O"]
    # Decomposed text: NFD forms and combining sequences (differ from NFC when normalized).
    out += ["e\u0301", "cafe\u0301", "Cafe\u0301 na\u0308ive", "\u1100\u1161\u11a8", "A\u030a",
            "o\u0308\u0304", "\u0915\u093c", "ñ vs n\u0303", "a\u0300\u0301\u0302\u0303"]
    # Text decoded from invalid UTF-8 the way a client would send it: invalid bytes replaced.
    bad = [b"\xff", b"\xfe\xff", b"abc\x80def", b"\xe4\xbd", b"\xe4\xbd world", b"\xc0\xaf",
           b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"ok\xc3", b"\xc3\x28",
           b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xf0\x9f\x98"]
    for raw in bad:
        out.append(raw.decode("utf-8", errors="replace"))
    for _ in range(30):
        raw = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
        out.append(raw.decode("utf-8", errors="replace"))
    return out


def long_inputs(rng):
    out = []
    target = 20_000
    makers = [lambda: sentence(rng, "en", 30) + " ",
              lambda: CODE_TEMPLATES[rng.randrange(len(CODE_TEMPLATES))].format(
                  a="a", b="b", f="f", F="F", n=rng.randint(0, 999), doc="doc"),
              lambda: sentence(rng, "zh", 40),
              lambda: sentence(rng, rng.choice(list(WORDS)), 20) + rng.choice(EMOJI) + "\n",
              lambda: " " * rng.randint(50, 400) + rng.choice(WORDS["en"]) + "\n" * rng.randint(1, 30),
              lambda: str(rng.getrandbits(256))]
    for make in makers:
        text = ""
        while len(text.encode()) < target:
            text += make()
        out.append(text)
    out.append("a" * 20_000)
    out.append("🙂" * 5_000)
    return out


def build(seed=SEED):
    """The corpus as a list of {"id": "<category>-<n>", "text": str}."""
    rng = random.Random(seed)
    corpus = []
    for name, make in [("lang", multilingual), ("code", code), ("emoji", emoji),
                       ("space", whitespace), ("num", numbers), ("apos", contractions),
                       ("special", special_lookalikes), ("mixed", random_mixed),
                       ("edge", edge_cases), ("long", long_inputs)]:
        for i, text in enumerate(make(rng)):
            corpus.append({"id": f"{name}-{i}", "text": text})
    return corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="output JSONL (default: stdout)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    corpus = build(args.seed)
    lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in corpus)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(lines)
    else:
        sys.stdout.write(lines)
    total = sum(len(e["text"].encode()) for e in corpus)
    print(f"{len(corpus)} strings, {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
