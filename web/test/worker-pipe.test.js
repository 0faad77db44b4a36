// The page's side of the transit worker's port (WorkerPipe), over a real MessageChannel:
// slices are handed over (their buffers transferred), at most WINDOW bytes ahead of what the
// worker wrote, and the buffers the worker gives back are read into again.

import assert from "node:assert/strict";
import { test } from "node:test";
import { WINDOW, WorkerPipe } from "../src/wormhole/worker-transit.js";

const MIB = 1024 * 1024;
const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

test("sendData waits once more than WINDOW bytes are unwritten; written buffers come back", async (t) => {
  const { port1, port2 } = new MessageChannel();
  t.after(() => {
    port1.close();
    port2.close();
  });
  const pipe = new WorkerPipe(port1);
  const arrived = []; // what the worker got, not yet written
  port2.onmessage = ({ data: m }) => m.op === "data" && arrived.push(m.bytes);
  // the worker writes its oldest slice and gives its buffer back
  const write = () => {
    const bytes = arrived.shift();
    port2.postMessage({ op: "sent", bytes: bytes.length, spare: bytes.buffer }, [bytes.buffer]);
  };
  let handed = 0;
  const slices = Array.from({ length: WINDOW / MIB + 3 }, (_, n) => new Uint8Array(MIB).fill(n));
  const sending = (async () => {
    for (const slice of slices) {
      await pipe.sendData(slice);
      handed++;
    }
  })();
  await tick();
  const stopped = handed;
  assert.equal(slices[0].byteLength, 0, "the slice's buffer was copied, not handed over");
  assert.equal(stopped, WINDOW / MIB, `${stopped} MiB handed over with nothing written`);
  assert.equal(arrived.length, stopped + 1, "the slice that waits was not handed over");
  assert.equal(pipe.spare(), null, "a buffer given back before any was written");
  write();
  await tick();
  assert.equal(handed, stopped + 1, "one slice written, one more handed over");
  const back = pipe.spare();
  assert.ok(back instanceof ArrayBuffer && back.byteLength === MIB, "the written slice's buffer is not back");
  assert.equal(new Uint8Array(back)[0], 0, "another buffer came back");
  while (arrived.length > 0) {
    write();
    await tick();
  }
  await sending;
  assert.equal(handed, slices.length);
});
