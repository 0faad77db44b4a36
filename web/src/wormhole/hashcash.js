// Hashcash v1 stamps for servers whose welcome says `permission-required: {hashcash: ...}`,
// minted exactly as Pigeonhole verifies them (src/pigeonhole/permissions/hashcash.py):
// `1:bits:YYMMDDhhmmss:resource::rand:counter`, SHA-1 of the whole text with at least
// `bits` leading zero bits.

import { sha1 } from "@noble/hashes/legacy.js";
import { randomBytes, toHex, utf8 } from "./bytes.js";

export function leadingZeroBits(digest) {
  let bits = 0;
  for (const byte of digest) {
    if (byte === 0) {
      bits += 8;
      continue;
    }
    return bits + Math.clz32(byte) - 24;
  }
  return bits;
}

const two = (n) => String(n).padStart(2, "0");

// The UTC date field the verifier accepts (12 digits: to the second, no day of slack needed).
export function stampDate(when = new Date()) {
  return (
    two(when.getUTCFullYear() % 100) +
    two(when.getUTCMonth() + 1) +
    two(when.getUTCDate()) +
    two(when.getUTCHours()) +
    two(when.getUTCMinutes()) +
    two(when.getUTCSeconds())
  );
}

// Costs about 2**bits SHA-1s (20 bits: about a million, a second or two in a browser).
// The prefix's hash state is computed once and cloned per counter to halve the work.
export function mintHashcash(resource, bits, when = new Date()) {
  const search = stampSearch(resource, bits, when);
  for (;;) {
    const stamp = search.next(Infinity);
    if (stamp !== null) return stamp;
  }
}

// The same, giving the event loop a turn every few thousand hashes so a page stays responsive.
export async function mintHashcashAsync(resource, bits, when = new Date()) {
  const search = stampSearch(resource, bits, when);
  for (;;) {
    const stamp = search.next(20000);
    if (stamp !== null) return stamp;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

function stampSearch(resource, bits, when) {
  if (!Number.isInteger(bits) || bits < 0 || bits > 40) {
    throw new RangeError(`hashcash bits must be a whole number from 0 to 40, not ${bits}`);
  }
  if (String(resource).includes(":")) {
    throw new RangeError("a hashcash resource cannot contain ':' (the stamp's field separator)");
  }
  const prefix = `1:${bits}:${stampDate(when)}:${resource}::${toHex(randomBytes(8))}:`;
  const base = sha1.create().update(utf8(prefix));
  let counter = 0;
  return {
    // tries up to `tries` counters: the stamp, or null to be called again
    next(tries) {
      for (let end = counter + tries; counter < end; counter++) {
        const tail = counter.toString(16);
        if (leadingZeroBits(base.clone().update(utf8(tail)).digest()) >= bits) return prefix + tail;
      }
      return null;
    },
  };
}
