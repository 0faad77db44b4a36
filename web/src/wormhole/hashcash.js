// Hashcash v1 stamps for servers whose welcome says `permission-required: {hashcash: ...}`,
// minted exactly as Pigeonhole verifies them (src/pigeonhole/permissions/hashcash.py):
// `1:bits:YYMMDD:resource::rand:counter`, SHA-1 of the whole text with at least
// `bits` leading zero bits.

import { sha1 } from "@noble/hashes/legacy.js";
import { fromUtf8, randomBytes, toHex, utf8 } from "./bytes.js";
import { stampHash } from "./file-hash.js";

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

// The UTC day (YYMMDD): the verifier gives a date-only stamp the whole day plus its window,
// and the short field keeps a stamp within one SHA-1 block (see below).
export function stampDate(when = new Date()) {
  return two(when.getUTCFullYear() % 100) + two(when.getUTCMonth() + 1) + two(when.getUTCDate());
}

// Costs about 2**bits SHA-1s (20 bits: about a million).
export function mintHashcash(resource, bits, when = new Date()) {
  const search = stampSearch(resource, bits, when);
  for (;;) {
    const stamp = search.next(Infinity);
    if (stamp !== null) return stamp;
  }
}

// The same, giving the event loop a turn every few thousand hashes so a page stays responsive.
export async function mintHashcashAsync(resource, bits, when = new Date()) {
  const search = stampSearch(resource, bits, when, await stampHash());
  for (;;) {
    const stamp = search.next(20000);
    if (stamp !== null) return stamp;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

const HEX = utf8("0123456789abcdef");

// The stamp is kept in one buffer whose last 8 bytes are the counter in hex, rewritten in
// place: no strings per try. With our server's 20-hex-digit resource the whole stamp is 51
// bytes, one SHA-1 block, which halves the work against a second-precision date.
export function stampSearch(resource, bits = 32, when = new Date(), hash = sha1) {
  if (!Number.isInteger(bits) || bits < 0 || bits > 40) {
    throw new RangeError(`hashcash bits must be a whole number from 0 to 40, not ${bits}`);
  }
  if (String(resource).includes(":")) {
    throw new RangeError("a hashcash resource cannot contain ':' (the stamp's field separator)");
  }
  const prefix = utf8(`1:${bits}:${stampDate(when)}:${resource}::${toHex(randomBytes(4))}:`);
  const stamp = new Uint8Array(prefix.length + 8);
  stamp.set(prefix);
  let counter = 0;
  return {
    // tries up to `tries` counters: the stamp, or null to be called again
    next(tries) {
      for (let end = Math.min(counter + tries, 2 ** 32); counter < end; counter++) {
        for (let i = 0, n = counter; i < 8; i++, n >>>= 4) stamp[stamp.length - 1 - i] = HEX[n & 15];
        if (leadingZeroBits(hash(stamp)) >= bits) {
          counter++;
          return fromUtf8(stamp);
        }
      }
      if (counter >= 2 ** 32) throw new Error("no hashcash stamp found in 2**32 tries");
      return null;
    },
  };
}
