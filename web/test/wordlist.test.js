// The code words: our lists must be magic-wormhole's, codes must alternate odd/even as the
// CLI's do, and completion must offer what the CLI's tab completion offers.

import assert from "node:assert/strict";
import { test } from "node:test";
import { completeWord } from "../src/wormhole/index.js";
import { EVEN_WORDS, ODD_WORDS } from "../src/wormhole/pgpwords.js";
import { chooseWords } from "../src/wormhole/words.js";
import { python } from "../testing/python.js";

const PY = `
import json
from wormhole._wordlist import PGPWordList, byte_to_even_word, byte_to_odd_word
wl = PGPWordList()
completions = {p: sorted(wl.get_completions(p)) for p in ["", "gu", "guitarist-", "guitarist-re", "a", "zu", "x"]}
print(json.dumps({
  "even": [byte_to_even_word[bytes([b])].lower() for b in range(256)],
  "odd": [byte_to_odd_word[bytes([b])].lower() for b in range(256)],
  "completions": completions,
}))`;

const py = python(PY);

test("the word lists are magic-wormhole's, byte for byte", () => {
  assert.deepEqual([...EVEN_WORDS], py.even);
  assert.deepEqual([...ODD_WORDS], py.odd);
});

test("completeWord offers what the CLI's completion offers", () => {
  // the CLI completes the text after the nameplate: word 0 from the odd list, then even
  const ours = (text) => {
    const words = text.split("-");
    const position = words.length - 1;
    const done = words.slice(0, -1).join("-");
    const suffix = position + 1 < 2 ? "-" : "";
    return completeWord(words[position], position).map((w) => (done ? `${done}-` : "") + w + suffix);
  };
  for (const [prefix, expected] of Object.entries(py.completions)) {
    assert.deepEqual(ours(prefix), expected, `completions of "${prefix}"`);
  }
  assert.deepEqual(completeWord("GU", 0), ["guitarist"]);
  assert.deepEqual(completeWord("x", 1), []);
  assert.throws(() => completeWord("a", -1));
});

test("new codes start with an odd word and alternate", () => {
  for (let i = 0; i < 50; i++) {
    const [first, second] = chooseWords(2).split("-");
    assert.ok(ODD_WORDS.includes(first), first);
    assert.ok(EVEN_WORDS.includes(second), second);
  }
});
