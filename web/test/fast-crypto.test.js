// The per-byte crypto the page runs in WebAssembly (libsodium's SecretBox for transit records,
// hash-wasm's SHA-256 for the file) against the plain-JS libraries it falls back to, and the
// fallback itself in a runtime without WebAssembly (node --no-expose-wasm).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { test } from "node:test";
import sodium from "libsodium";
import { fileHash } from "../src/wormhole/file-hash.js";
import { loadBox, nobleBox } from "../src/wormhole/records-box.js";
import { recordNonce } from "../src/wormhole/transit.js";

const KEY = Uint8Array.from({ length: 32 }, (_, i) => i * 7);
// the last is larger than the box's first area and than libsodium's first heap: both grow
const SIZES = [0, 1, 16 * 1024, 64 * 1024 + 5, 9 * 1024 * 1024];
const plain = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 13 + 5) & 0xff);

// tag || ciphertext as the box writes it, with 16 bytes of scratch before it
function sealed(box, plaintext, n) {
  const out = new Uint8Array(16 + 16 + plaintext.length);
  box.sealInto(KEY, recordNonce(n), plaintext, out, 16);
  return out.subarray(16);
}

// the plaintext as the box opens it, into a larger buffer at an offset
function opened(box, key, nonce, sealedBox) {
  const out = new Uint8Array(sealedBox.length - 16 + 10).fill(0xee);
  box.openInto(key, nonce, sealedBox, out, 7);
  assert.deepEqual([...out.subarray(0, 7), ...out.subarray(out.length - 3)], Array(10).fill(0xee), "wrote outside its place");
  return out.subarray(7, out.length - 3);
}

test("libsodium's record box makes noble's bytes, and each opens the other's", async () => {
  const fast = await loadBox(sodium);
  assert.equal(fast.name, "libsodium");
  SIZES.forEach((size, n) => {
    const text = plain(size);
    const a = sealed(nobleBox, text, n);
    const b = sealed(fast, text, n);
    assert.deepEqual(b, a, `${size} bytes`);
    assert.deepEqual(opened(fast, KEY, recordNonce(n), a), text);
    assert.deepEqual(opened(nobleBox, KEY, recordNonce(n), b), text);
  });
});

test("a record with a flipped bit, another nonce or another key opens in neither box", async () => {
  const fast = await loadBox(sodium);
  const box = sealed(fast, plain(1000), 3);
  const flipped = box.slice();
  flipped[500] ^= 1;
  const otherKey = KEY.map((b) => b ^ 0xff);
  for (const opener of [fast, nobleBox]) {
    assert.throws(() => opened(opener, KEY, recordNonce(3), flipped));
    assert.throws(() => opened(opener, KEY, recordNonce(4), box));
    assert.throws(() => opened(opener, otherKey, recordNonce(3), box));
  }
});

test("the file hash is hash-wasm's here and equals node's SHA-256 over uneven pieces", async () => {
  const hash = await fileHash();
  assert.equal(hash.name, "hash-wasm");
  const data = plain(3 * 1024 * 1024 + 77);
  const reference = createHash("sha256");
  for (let at = 0, step = 1; at < data.length; at += step, step = step * 3 + 1) {
    const piece = data.subarray(at, at + step);
    hash.update(piece);
    reference.update(piece);
  }
  assert.equal(Buffer.from(hash.digest()).toString("hex"), reference.digest("hex"));
});

test("without WebAssembly both fall back to plain JS and give the same bytes", async () => {
  const probe = `
    // at once after the import, as the page's worker does: libsodium's start fails at once
    const { loadBox } = await import("./src/wormhole/records-box.js");
    const { default: sodium } = await import("libsodium");
    const loading = loadBox(sodium);
    const { fileHash } = await import("./src/wormhole/file-hash.js");
    const { recordNonce } = await import("./src/wormhole/transit.js");
    const box = await loading;
    const out = new Uint8Array(16 + 16 + 100);
    box.sealInto(new Uint8Array(32).fill(9), recordNonce(1), new Uint8Array(100).fill(2), out, 16);
    const hash = await fileHash();
    hash.update(new Uint8Array(100).fill(2));
    console.log(JSON.stringify({ wasm: typeof WebAssembly, box: box.name, record: Buffer.from(out.subarray(16)).toString("hex"),
      hash: hash.name, digest: Buffer.from(hash.digest()).toString("hex") }));`;
  const cwd = new URL("..", import.meta.url).pathname;
  const out = JSON.parse(execFileSync(process.execPath, ["--no-expose-wasm", "--input-type=module", "-e", probe], { cwd }).toString());
  assert.equal(out.wasm, "undefined");
  assert.equal(out.box, "@noble/ciphers");
  assert.equal(out.hash, "@noble/hashes");
  const fast = await loadBox(sodium);
  const record = new Uint8Array(16 + 16 + 100);
  fast.sealInto(new Uint8Array(32).fill(9), recordNonce(1), new Uint8Array(100).fill(2), record, 16);
  assert.equal(out.record, Buffer.from(record.subarray(16)).toString("hex"));
  assert.equal(out.digest, createHash("sha256").update(new Uint8Array(100).fill(2)).digest("hex"));
});
