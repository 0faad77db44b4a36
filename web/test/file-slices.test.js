// Reading a file to send: its bytes in order, in slices of a fixed size (the last shorter),
// each in a buffer of its own, from a byte stream (BYOB) or, where the browser has none,
// from the default reader's chunks.

import assert from "node:assert/strict";
import { test } from "node:test";
import { fileSlices } from "../src/wormhole/file-slices.js";

const data = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 11 + 3) & 0xff);

// A Blob whose stream is not a byte stream: chunks of uneven sizes, no BYOB reader.
function plainStreamBlob(bytes) {
  return {
    stream() {
      let at = 0;
      let step = 1;
      return new ReadableStream({
        pull(controller) {
          if (at >= bytes.length) return controller.close();
          controller.enqueue(bytes.slice(at, at + step));
          at += step;
          step = (step * 7 + 5) % 70000;
        },
      });
    },
  };
}

async function collect(blob, size) {
  const slices = [];
  for await (const slice of fileSlices(blob, size)) slices.push(slice);
  return slices;
}

for (const [how, make] of [["a byte stream (BYOB)", (b) => new Blob([b])], ["the default reader", plainStreamBlob]]) {
  test(`slices from ${how}: in order, whole, each its own buffer`, async () => {
    for (const length of [0, 1, 65536, 65536 * 3, 65536 * 3 + 17]) {
      const bytes = data(length);
      const slices = await collect(make(bytes), 65536);
      assert.equal(slices.length, Math.ceil(length / 65536), `${length} bytes`);
      slices.slice(0, -1).forEach((s) => assert.equal(s.length, 65536));
      assert.deepEqual(new Uint8Array(await new Blob(slices).arrayBuffer()), bytes);
      assert.equal(new Set(slices.map((s) => s.buffer)).size, slices.length, "a buffer shared by two slices");
    }
  });
}

test("a reader stopped early cancels the stream", async () => {
  let cancelled = false;
  const blob = {
    stream: () =>
      new ReadableStream({
        pull: (c) => c.enqueue(new Uint8Array(1000)),
        cancel: () => {
          cancelled = true;
        },
      }),
  };
  for await (const slice of fileSlices(blob, 4096)) {
    assert.equal(slice.length, 4096);
    break;
  }
  assert.ok(cancelled);
});
