#!/usr/bin/env python3
"""Writes tests/data/pretokenizer_splits.jsonl: how each GGUF pre-tokenizer
name splits a set of texts, computed with Python's `regex` module (Debian:
python3-regex), an engine independent of the PCRE2 one the server uses.

Each regex of a variant splits every current piece into its matches and the
text between them (the Split pre-tokenizer with "Isolated" behaviour, applied
in sequence). The patterns are the published ones from each model family's
tokenizer.json. Run by hand when the table changes:
    python3 scripts/pretokenizer_vectors.py > tests/data/pretokenizer_splits.jsonl
"""
import json
import regex

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN35 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
TEKKEN = r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
GPT4O = r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SEED_CODER = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"""
BAILING = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
DEEPSEEK3 = r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
PORO = r""" ?[^(\s|.,!?…。，、।۔،)]+"""

DEEPSEEK_LLM_LETTERS = (
    "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-"
    "ᾼιῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-"
    "𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃")

VARIANTS = {
    "deepseek-llm": ["[\r\n]", r"\s?[" + DEEPSEEK_LLM_LETTERS + "]+", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$",
                     "[一-龥ࠀ-一가-퟿]+", r"\p{N}+"],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
    "gpt2": [GPT2],
    "llama3": [LLAMA3],
    "qwen2": [QWEN2],
    "qwen35": [QWEN35],
    "tekken": [TEKKEN],
    "gpt-4o": [GPT4O],
    "seed-coder": [SEED_CODER],
    "bailingmoe": [BAILING],
    "deepseek-v3": [r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK3],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, "[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2],
    "poro-chat": [PORO],
    "viking": [PORO, r"\p{N}"],
    "superbpe": [r"\p{N}+", r"(?=(\d{3})+(?!\d))"],
}

# The names GGUF files carry, by variant.
NAMES = {
    "llama3": ["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "dbrx",
               "smaug-bpe", "chatglm-bpe", "glm4"],
    "gpt2": ["gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "exaone4", "jina-v1-en", "jina-v2-code",
             "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "roberta-bpe", "gigachat", "a.x-4.0", "mellum",
             "granite-docling"],
    "starcoder": ["starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"],
    "qwen2": ["qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2", "kormo"],
    "gpt-4o": ["gpt-4o", "llama4", "minimax-m2", "kanana2"],
    "deepseek-v3": ["deepseek-v3", "hunyuan-dense", "joyai-llm"],
    "bailingmoe": ["bailingmoe", "bailingmoe2", "llada-moe"],
    "poro-chat": ["poro-chat", "bloom", "gpt3-finnish"],
}

TEXTS = [
    "Hello, world! It's 2024: 1234567 apples\n\n  and 日本語 text",
    "I'M HERE, you're there. DON'T Shout; we'll see.",
    "XMLHttpRequest camelCaseWords HTTPServer iPhone",
    "path/to/file.txt\r\nnext line\t\ttabs   spaces  ",
    "Ünïcödé naïve café e\u0301 \u0915\u093f\u0924\u093e\u092c",
    "100,000.50 + 3.14e-10 = x^2; 12345678901",
    "emoji 🦙🦙 and 한국어 and Ελληνικά and кириллица",
    "def f(x):\n    return x**2  # comment\n\n\n",
    "   leading spaces and trailing\n\n",
    "«quotes» “curly” ‘single’ — dash… ellipsis",
]


def split(regexes, text):
    pieces = [text] if text else []
    for pattern in regexes:
        r = regex.compile(pattern)
        out = []
        for piece in pieces:
            last = 0
            for m in r.finditer(piece):
                if m.end() == m.start():
                    continue
                if m.start() > last:
                    out.append(piece[last:m.start()])
                out.append(m.group(0))
                last = m.end()
            if last < len(piece):
                out.append(piece[last:])
        pieces = out
    return pieces


def main():
    for variant, regexes in VARIANTS.items():
        for name in NAMES.get(variant, [variant]):
            for text in TEXTS:
                print(json.dumps({"pre": name, "text": text, "pieces": split(regexes, text)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
