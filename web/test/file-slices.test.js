// Reading a file to send: its bytes in order, in slices of a fixed size (the last shorter),
// each at the start of a buffer of its own, read into buffers given back where the Blob has
// a byte stream; a file that got shorter ends early.

import assert from "node:assert/strict";
import { test } from "node:test";
import { fileSlices } from "../src/wormhole/file-slices.js";

const data = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 11 + 3) & 0xff);

async function collect(blob, size, spare) {
  const slices = [];
  for await (const slice of fileSlices(blob, size, spare)) slices.push(slice.slice());
  return slices;
}

test("slices: in order, whole, each at the start of a buffer of its own", async () => {
  for (const length of [0, 1, 65536, 65536 * 3, 65536 * 3 + 17]) {
    const bytes = data(length);
    const buffers = [];
    for await (const slice of fileSlices(new Blob([bytes]), 65536)) buffers.push(slice);
    assert.equal(buffers.length, Math.ceil(length / 65536), `${length} bytes`);
    buffers.slice(0, -1).forEach((s) => assert.equal(s.length, 65536));
    assert.deepEqual(new Uint8Array(await new Blob(buffers).arrayBuffer()), bytes);
    assert.equal(new Set(buffers.map((s) => s.buffer)).size, buffers.length, "a buffer shared by two slices");
    buffers.forEach((s) => assert.equal(s.byteOffset, 0));
  }
});

test("buffers given back are read into again, and the bytes stay right", async () => {
  const bytes = data(65536 * 9 + 100);
  const given = [];
  let asked = 0;
  const spare = () => {
    asked++;
    return given.shift() ?? null;
  };
  const slices = [];
  const seen = new Set();
  for await (const slice of fileSlices(new Blob([bytes]), 65536, spare)) {
    slices.push(slice.slice()); // a copy: the buffer is read into again
    seen.add(slice.buffer.byteLength);
    given.push(slice.buffer);
  }
  assert.deepEqual(new Uint8Array(await new Blob(slices).arrayBuffer()), bytes);
  assert.equal(asked, slices.length, "a buffer asked for per slice");
  assert.equal(given.length, 2, "only two buffers were ever read into (one read ahead)");
  // a buffer too small for a slice is not used
  const small = await collect(new Blob([bytes]), 65536, () => new ArrayBuffer(10));
  assert.deepEqual(new Uint8Array(await new Blob(small).arrayBuffer()), bytes);
});

test("a Blob without a byte stream is read by slices", async () => {
  const bytes = data(65536 * 2 + 9);
  const blob = new Blob([bytes]);
  const plain = { size: blob.size, slice: (from, to) => blob.slice(from, to) };
  assert.deepEqual(new Uint8Array(await new Blob(await collect(plain, 65536)).arrayBuffer()), bytes);
});

test("a reader left early is cancelled", async () => {
  let cancelled = false;
  const blob = new Blob([data(65536 * 4)]);
  const stream = blob.stream();
  const watched = { size: blob.size, stream: () => stream };
  stream.getReader = ((get) => (opts) => {
    const reader = get(opts);
    const cancel = reader.cancel.bind(reader);
    reader.cancel = (why) => ((cancelled = true), cancel(why));
    return reader;
  })(stream.getReader.bind(stream));
  for await (const slice of fileSlices(watched, 65536)) {
    assert.equal(slice.length, 65536);
    break;
  }
  assert.ok(cancelled, "the file's reader was not cancelled");
});

test("a file that got shorter than its size ends early", async () => {
  const bytes = data(65536 * 2 + 5);
  const shrunk = { size: 65536 * 4, slice: (from, to) => new Blob([bytes]).slice(from, to) };
  const slices = await collect(shrunk, 65536);
  assert.deepEqual(new Uint8Array(await new Blob(slices).arrayBuffer()), bytes);
});
