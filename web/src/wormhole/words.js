// Code words: choosing them as the CLI does (odd word first, then even, alternating, so a
// dropped or swapped word is noticed) and completing them as the CLI's tab completion does.

import { randomBytes } from "./bytes.js";
import { EVEN_WORDS, ODD_WORDS } from "./pgpwords.js";

const SORTED_ODD = [...ODD_WORDS].sort();
const SORTED_EVEN = [...EVEN_WORDS].sort();

// position: 0 for the first word after the nameplate, 1 for the second, ...
const listFor = (position) => (position % 2 === 0 ? SORTED_ODD : SORTED_EVEN);

// The words that may stand at `position` and start with `prefix` (case-insensitive), sorted.
// An empty prefix gives the whole list for that position.
export function completeWord(prefix, position) {
  if (!Number.isInteger(position) || position < 0) {
    throw new TypeError("position must be a word index: 0 for the first word after the nameplate");
  }
  const start = String(prefix).toLowerCase();
  return listFor(position).filter((word) => word.startsWith(start));
}

// `count` random words for a new code, e.g. "guitarist-revenge" for count 2.
export function chooseWords(count = 2) {
  const bytes = randomBytes(count);
  const words = [];
  for (let i = 0; i < count; i++) words.push((i % 2 === 0 ? ODD_WORDS : EVEN_WORDS)[bytes[i]]);
  return words.join("-");
}
