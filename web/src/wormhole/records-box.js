// The SecretBox (XSalsa20-Poly1305) of transit records, the transfer's largest per-byte cost:
// @noble/ciphers in plain JS works in every runtime; libsodium compiled to WebAssembly (the
// library PyNaCl wraps for the Python CLI) seals and opens 2.5-3x as fast where the runtime
// and the page's CSP allow WebAssembly. Both make the same bytes.

import { xsalsa20poly1305 } from "@noble/ciphers/salsa.js";

// A box writes tag || ciphertext of `plaintext` into `out` at `at` (the caller leaves 16
// bytes before `at` free for scratch: the record's nonce goes there after), and opens
// tag || ciphertext with `nonce` into `out` at `at` (throwing, with nothing written, when it
// was made with another key or damaged).
export const nobleBox = {
  name: "@noble/ciphers",
  sealInto(key, nonce, plaintext, out, at) {
    // noble's encrypt(plaintext, output) uses output's first 16 bytes as scratch
    xsalsa20poly1305(key, nonce).encrypt(plaintext, out.subarray(at - 16, at + 16 + plaintext.length));
  },
  openInto(key, nonce, box, out, at) {
    out.set(xsalsa20poly1305(key, nonce).decrypt(box), at);
  },
};

// libsodium's own C functions on its WebAssembly heap (the raw `libsodium` package, from
// `await factory(...)`): one area for the key, the nonce, the input and the output, reused by
// every record, so a record is copied in once and out once, with no allocation.
export function sodiumBox(lib) {
  let room = 0; // the largest input the area holds
  let where = null; // the area: key (32) || nonce (24) || input (room + 16) || output (room + 16)
  const area = (bytes) => {
    if (where === null || bytes > room) {
      if (where !== null) lib._free(where.key);
      room = Math.max(bytes, 64 * 1024);
      const at = lib._malloc(56 + 2 * (room + 16));
      if (at === 0) throw new Error("libsodium could not allocate memory");
      where = { key: at, nonce: at + 32, input: at + 56, output: at + 56 + room + 16 };
    }
    return where;
  };
  const load = (key, nonce, input) => {
    const where = area(input.length);
    const heap = lib.HEAPU8; // after any growth of the heap
    heap.set(key, where.key);
    heap.set(nonce, where.nonce);
    heap.set(input, where.input);
    return where;
  };
  return {
    name: "libsodium",
    sealInto(key, nonce, plaintext, out, to) {
      const where = load(key, nonce, plaintext);
      lib._crypto_secretbox_easy(where.output, where.input, plaintext.length, 0, where.nonce, where.key);
      out.set(lib.HEAPU8.subarray(where.output, where.output + 16 + plaintext.length), to);
    },
    openInto(key, nonce, box, out, at) {
      if (box.length < 16) throw new Error("record too short");
      const where = load(key, nonce, box);
      if (lib._crypto_secretbox_open_easy(where.output, where.input, box.length, 0, where.nonce, where.key) !== 0) {
        throw new Error("record did not open");
      }
      out.set(lib.HEAPU8.subarray(where.output, where.output + box.length - 16), at);
    },
  };
}

// libsodium's box once its WebAssembly has started (`factory` is the `libsodium` package's
// default export), or noble's where it cannot (a browser or a CSP that allows no
// WebAssembly): the records are the same either way.
export function loadBox(factory) {
  const getRandomValue = () => crypto.getRandomValues(new Uint32Array(1))[0] >>> 0;
  return Promise.resolve()
    .then(() => factory({ getRandomValue }))
    .then(
      (lib) => {
        if (lib._sodium_init() < 0) throw new Error("libsodium did not start");
        return sodiumBox(lib);
      },
    )
    .catch(() => nobleBox);
}
