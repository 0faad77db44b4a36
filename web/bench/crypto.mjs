// Throughput of the JS client's per-byte work in this runtime (node): sealing and opening
// transit records (XSalsa20-Poly1305, @noble/ciphers) and the file's sha256 (@stablelib/sha256;
// @noble/hashes' for comparison: in Chromium @stablelib's ran 2.5x as fast, in node about as
// fast), side by side with node's native sha256 for scale; plus one SPAKE2 exchange and a 20-bit hashcash
// stamp. Prints numbers only; run: node web/bench/crypto.mjs [MiB]

import { createHash } from "node:crypto";
import { sha256 } from "@noble/hashes/sha2.js";
import { SHA256 } from "@stablelib/sha256";
import { mintHashcash, stampSearch as stampSearchForBench } from "../src/wormhole/hashcash.js";
import { open, seal } from "../src/wormhole/keys.js";
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

for (const size of [16 * 1024, 64 * 1024, 256 * 1024]) {
  rate(`seal records of ${size / 1024} KiB`, size, (r, i) => seal(key, r, recordNonce(i)));
  const box = seal(key, new Uint8Array(size).fill(1), recordNonce(0));
  rate(`open records of ${size / 1024} KiB`, size, () => open(key, box));
}
const s = new SHA256();
rate("sha256 (@stablelib/sha256), 64 KiB updates", 64 * 1024, (r) => s.update(r));
const h = sha256.create();
rate("sha256 (@noble/hashes), 64 KiB updates", 64 * 1024, (r) => h.update(r));
const n = createHash("sha256");
rate("sha256 (node native, for scale), 64 KiB", 64 * 1024, (r) => n.update(r));

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
start = performance.now();
const search = stampSearchForBench("0123456789abcdef0123");
search.next(tries);
const perSecond = tries / ((performance.now() - start) / 1000);
console.log(`${"hashcash tries (SHA-1 of a stamp)".padEnd(44)} ${(perSecond / 1000).toFixed(0).padStart(7)} k/s`);
console.log(`${"hashcash 20 bits, expected".padEnd(44)} ${((2 ** 20 / perSecond) * 1000).toFixed(0).padStart(7)} ms`);
mintHashcash("0123456789abcdef0123", 8); // and the real minting path runs
