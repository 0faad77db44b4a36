// Reading a file to send: its bytes in order, in slices of a fixed size (the last shorter),
// each in a buffer of its own; a file that got shorter ends early.

import assert from "node:assert/strict";
import { test } from "node:test";
import { fileSlices } from "../src/wormhole/file-slices.js";

const data = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 11 + 3) & 0xff);

async function collect(blob, size) {
  const slices = [];
  for await (const slice of fileSlices(blob, size)) slices.push(slice);
  return slices;
}

test("slices: in order, whole, each its own buffer", async () => {
  for (const length of [0, 1, 65536, 65536 * 3, 65536 * 3 + 17]) {
    const bytes = data(length);
    const slices = await collect(new Blob([bytes]), 65536);
    assert.equal(slices.length, Math.ceil(length / 65536), `${length} bytes`);
    slices.slice(0, -1).forEach((s) => assert.equal(s.length, 65536));
    assert.deepEqual(new Uint8Array(await new Blob(slices).arrayBuffer()), bytes);
    assert.equal(new Set(slices.map((s) => s.buffer)).size, slices.length, "a buffer shared by two slices");
    slices.forEach((s) => assert.equal(s.buffer.byteLength, s.length, "a slice shares its buffer"));
  }
});

test("a file that got shorter than its size ends early", async () => {
  const bytes = data(65536 * 2 + 5);
  const shrunk = { size: 65536 * 4, slice: (from, to) => new Blob([bytes]).slice(from, to) };
  const slices = await collect(shrunk, 65536);
  assert.deepEqual(new Uint8Array(await new Blob(slices).arrayBuffer()), bytes);
});
