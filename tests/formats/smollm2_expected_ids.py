#!/usr/bin/env python3
"""Expected token ids for test_hf_tokenizer.cpp (kExpectedIds), worked out from
smollm2-tokenizer.json alone with an independent byte-level BPE written here: only the Python
standard library (json, unicodedata), no Hugging Face code.

SmolLM2's tokenizer.json says:
  pre_tokenizer: Sequence[Digits(individual_digits), ByteLevel(add_prefix_space false,
                 use_regex true)], normalizer: none, model: BPE (ignore_merges false),
  added_tokens: 17 special tokens (<|endoftext|>, <|im_start|>, ...), matched in the text first.

So encoding is: cut the text at special tokens; cut each piece before and after every numeric
character (Unicode category N*); cut each of those with GPT-2's regex
  's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
(implemented by hand below, as Python's re has no \\p{L}); map each word's UTF-8 bytes to
GPT-2's printable byte characters; merge the pair of lowest merge rank (leftmost among equals)
until no pair has a rank; look up the ids.

Usage: python3 smollm2_expected_ids.py [path/to/smollm2-tokenizer.json]
Prints the C++ table to paste into test_hf_tokenizer.cpp.
"""

import json
import os
import sys
import unicodedata

# Unicode White_Space (what \s matches in PCRE2 with UCP and in Rust's regex engines).
WHITE_SPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}

# The test inputs: the same strings, in the same order, as kExpectedIds in the test.
CASES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Guten Tag! Wie geht's? Größe, Straße, Füße.",
    "Bonjour à tous, ça va très bien : l'été est là !",
    "\u6211\u4eec\u4eca\u5929\u53bb\u516c\u56ed\u6563\u6b65\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\u3002",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
    "Emoji \U0001F600 \U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1E9\U0001F1EA",
    "def f(x):\n\tif x > 0:\n\t\treturn x * 2\n    return -x  # note\n",
    "int main() {\r\n    std::vector<int> v{1, 2, 3};\r\n    return 0;\r\n}",
    '{"key": [1, 2.5, -3], "nested": {"a": null, "b": true}}',
    "Numbers: 12345 3.14159 -42 1,000,000 and 2024-06-01",
    "I'm sure they'll say it's what we've done",
    "  leading and   multiple spaces  ",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
]


def bytes_to_unicode():
    """GPT-2's table: printable Latin-1 bytes stand for themselves, the rest for U+0100..."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    table = {}
    n = 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def is_letter(c):
    return unicodedata.category(c).startswith("L")


def is_number(c):
    return unicodedata.category(c).startswith("N")


def is_space(c):
    return c in WHITE_SPACE


def gpt2_split(text):
    """GPT-2's regex, alternatives tried in order at each position, as a regex engine does."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        end = None
        for c in ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d"):
            if text.startswith(c, i):
                end = i + len(c)
                break
        if end is None:
            for klass in (is_letter, is_number,
                          lambda ch: not (is_space(ch) or is_letter(ch) or is_number(ch))):
                j = i + 1 if text[i] == " " and i + 1 < n and klass(text[i + 1]) else i
                if j < n and klass(text[j]):
                    while j < n and klass(text[j]):
                        j += 1
                    end = j
                    break
        if end is None and is_space(text[i]):
            j = i
            while j < n and is_space(text[j]):
                j += 1
            # \s+(?!\S): the whole run at the end of the text; else all but the last space,
            # when that leaves at least one; else \s+ takes the single space.
            if j == n or j - 1 == i:
                end = j
            else:
                end = j - 1
        assert end is not None and end > i, (text, i)
        out.append(text[i:end])
        i = end
    return out


def digits_split(text):
    """Digits(individual_digits): every numeric character a piece of its own."""
    out = []
    current = ""
    for c in text:
        if is_number(c):
            if current:
                out.append(current)
            out.append(c)
            current = ""
        else:
            current += c
    if current:
        out.append(current)
    return out


def bpe(word, ranks):
    symbols = list(word)
    while len(symbols) > 1:
        best = None
        for k in range(len(symbols) - 1):
            rank = ranks.get((symbols[k], symbols[k + 1]))
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, k)
        if best is None:
            break
        k = best[1]
        symbols[k:k + 2] = [symbols[k] + symbols[k + 1]]
    return symbols


def main():
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "../data/models/smollm2-tokenizer.json")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    with open(path, encoding="utf-8") as f:
        tokenizer = json.load(f)
    vocab = dict(tokenizer["model"]["vocab"])
    for added in tokenizer["added_tokens"]:
        vocab[added["content"]] = added["id"]
    ranks = {}
    for rank, merge in enumerate(tokenizer["model"]["merges"]):
        pair = tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge)
        ranks.setdefault(pair, rank)
    specials = sorted((a["content"] for a in tokenizer["added_tokens"]), key=len, reverse=True)
    byte_chars = bytes_to_unicode()

    def encode(text):
        ids = []
        pieces = []  # (text, is_special)
        i = start = 0
        while i < len(text):
            match = next((s for s in specials if text.startswith(s, i)), None)
            if match:
                if i > start:
                    pieces.append((text[start:i], False))
                pieces.append((match, True))
                i += len(match)
                start = i
            else:
                i += 1
        if start < len(text):
            pieces.append((text[start:], False))
        for piece, special in pieces:
            if special:
                ids.append(vocab[piece])
                continue
            for part in digits_split(piece):
                for word in gpt2_split(part):
                    mapped = "".join(byte_chars[b] for b in word.encode("utf-8"))
                    ids.extend(vocab[s] for s in bpe(mapped, ranks))
        return ids

    print("// Generated by tests/formats/smollm2_expected_ids.py from smollm2-tokenizer.json.")
    print("const std::vector<std::vector<int32_t>> kExpectedIds = {")
    for number, text in enumerate(CASES):
        ids = [str(i) for i in encode(text)]
        quoted = json.dumps(text, ensure_ascii=True)[:80].rstrip("\\")  # no line splice
        print("    // " + str(number) + ": " + quoted)
        line = "    {"
        for k, i in enumerate(ids):
            item = i + ("," if k + 1 < len(ids) else "},")
            if len(line) + len(item) + 1 > 96:
                print(line.rstrip())
                line = "     "
            line += item + " "
        print(line.rstrip())
    print("};")


if __name__ == "__main__":
    main()
