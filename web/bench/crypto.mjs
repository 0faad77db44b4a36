// Throughput of the JS client's per-byte work in this runtime (node): sealing and opening
// transit records (XSalsa20-Poly1305: libsodium's WebAssembly, as the page's worker does it,
// and @noble/ciphers, its plain-JS fallback) and the file's sha256 (hash-wasm, and
// @noble/hashes, its fallback), side by side with node's native sha256 for scale; plus one
// SPAKE2 exchange and a 20-bit hashcash stamp. Prints numbers only; run:
// node web/bench/crypto.mjs [MiB]

import { createHash } from "node:crypto";
import { sha256 } from "@noble/hashes/sha2.js";
import { createSHA256 } from "hash-wasm";
import sodium from "libsodium";
import { stampHash } from "../src/wormhole/file-hash.js";
import { mintHashcash, stampSearch as stampSearchForBench } from "../src/wormhole/hashcash.js";
import { loadBox, nobleBox } from "../src/wormhole/records-box.js";
import { Spake2Symmetric } from "../src/wormhole/spake2.js";
import { recordNonce } from "../src/wormhole/transit.js";

const MIB = 1024 * 1024;
const total = Number(process.argv[2] ?? 64) * MIB;
const key = new Uint8Array(32).fill(7);

function rate(label, recordBytes, work) {
  const record = new Uint8Array(recordBytes).fill(1);
  const count = Math.ceil(total / recordBytes);
  for (let i = 0; i < 16; i++) work(record, i); // let the JIT settle first
  const start = performance.now();
  for (let i = 0; i < count; i++) work(record, i);
  const seconds = (performance.now() - start) / 1000;
  console.log(`${label.padEnd(44)} ${((count * recordBytes) / MIB / seconds).toFixed(1).padStart(7)} MiB/s`);
}

const boxes = [await loadBox(sodium), nobleBox];
for (const size of [16 * 1024, 64 * 1024]) {
  for (const box of boxes) {
    const out = new Uint8Array(32 + size);
    rate(`seal records of ${size / 1024} KiB (${box.name})`, size, (r, i) => box.sealInto(key, recordNonce(i), r, out, 16));
    box.sealInto(key, recordNonce(0), new Uint8Array(size).fill(1), out, 16);
    const sealed = out.slice(16);
    const plain = new Uint8Array(size);
    rate(`open records of ${size / 1024} KiB (${box.name})`, size, () => box.openInto(key, recordNonce(0), sealed, plain, 0));
  }
}
const w = await createSHA256();
w.init();
rate("sha256 (hash-wasm), 1 MiB updates", 1024 * 1024, (r) => w.update(r));
const h = sha256.create();
rate("sha256 (@noble/hashes), 1 MiB updates", 1024 * 1024, (r) => h.update(r));
const n = createHash("sha256");
rate("sha256 (node native, for scale), 1 MiB", 1024 * 1024, (r) => n.update(r));

const utf8 = (t) => new TextEncoder().encode(t);
let start = performance.now();
const a = new Spake2Symmetric(utf8("7-guitarist-revenge"), utf8("lothar.com/wormhole/text-or-file-xfer"));
const b = new Spake2Symmetric(utf8("7-guitarist-revenge"), utf8("lothar.com/wormhole/text-or-file-xfer"));
const [ma, mb] = [a.start(), b.start()];
a.finish(mb);
b.finish(ma);
console.log(`${"SPAKE2, both sides (start + finish)".padEnd(44)} ${(performance.now() - start).toFixed(1).padStart(7)} ms`);
// a stamp's cost is random (about 2**bits tries), so time a fixed number of tries (a
// 32-bit target no stamp meets in them) and give the expected time for the default 20 bits
const tries = 200_000;
for (const [label, hash] of [["hash-wasm", await stampHash()], ["@noble/hashes", undefined]]) {
  start = performance.now();
  stampSearchForBench("0123456789abcdef0123", 32, new Date(), hash).next(tries);
  const perSecond = tries / ((performance.now() - start) / 1000);
  console.log(`${`hashcash tries (SHA-1 of a stamp, ${label})`.padEnd(44)} ${(perSecond / 1000).toFixed(0).padStart(7)} k/s`);
  console.log(`${`hashcash 20 bits, expected (${label})`.padEnd(44)} ${((2 ** 20 / perSecond) * 1000).toFixed(0).padStart(7)} ms`);
}
mintHashcash("0123456789abcdef0123", 8); // and the real minting path runs
