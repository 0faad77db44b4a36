// A folder as the CLIs send it: a zip whose length is known before it is built, read by
// Python's zipfile (what `wormhole receive` extracts with) file for file, the same bytes on
// every read (the sender hashes one read and sends another), in slices that reuse buffers
// given back; names that would leave the folder, and unreadable files, are refused by name.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { WormholeError } from "../src/wormhole/errors.js";
import { checkReadable, ZIP_MODE, zipFolder } from "../src/wormhole/folder.js";
import { fileDigest } from "../src/wormhole/send.js";
import { hex, python } from "../testing/python.js";

const data = (n, seed) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

const FILES = [
  { path: "empty.txt", bytes: data(0, 0) },
  { path: "with spaces in it.bin", bytes: data(70_000, 1) },
  { path: "naïve café/日本語.txt", bytes: data(1_300_000, 2) },
  { path: "a/b/c/deep.dat", bytes: data(3, 3) },
  { path: "a/b/also empty", bytes: data(0, 4) },
];
const folder = () =>
  FILES.map(({ path, bytes }) => ({ path, file: new File([bytes], path.split("/").pop(), { lastModified: 1_700_000_000_000 }) }));

async function readAll(zip, sliceSize = 65536, spare) {
  const slices = [];
  for await (const slice of zip.slices(sliceSize, spare)) slices.push(slice.slice());
  return new Uint8Array(await new Blob(slices).arrayBuffer());
}

test("the zip's length is known up front, and Python's zipfile reads every file byte for byte", async () => {
  const zip = zipFolder("the folder", folder());
  assert.equal(zip.numFiles, FILES.length);
  assert.equal(zip.numBytes, FILES.reduce((n, f) => n + f.bytes.length, 0));
  assert.deepEqual(zip.offer(), {
    directory: { mode: ZIP_MODE, dirname: "the folder", zipsize: zip.size, numbytes: zip.numBytes, numfiles: FILES.length },
  });
  const bytes = await readAll(zip);
  assert.equal(bytes.length, zip.size);
  const read = python(`
import hashlib, io, json, sys, zipfile
z = zipfile.ZipFile(io.BytesIO(bytes.fromhex(json.load(sys.stdin))))
assert z.testzip() is None
print(json.dumps({i.filename: hashlib.sha256(z.read(i)).hexdigest() for i in z.infolist()}))`, hex(bytes));
  const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
  assert.deepEqual(read, Object.fromEntries(FILES.map(({ path, bytes }) => [path, sha256(bytes)])));
});

test("every read gives the same bytes, whatever the slice size, and buffers given back are reused", async () => {
  const zip = zipFolder("same", folder());
  const once = await readAll(zip);
  const given = [];
  const seen = new Set();
  const twice = [];
  for await (const slice of zip.slices(100_000, () => given.shift() ?? null)) {
    assert.equal(slice.byteOffset, 0);
    seen.add(slice.buffer);
    twice.push(slice.slice());
    given.push(slice.buffer);
  }
  assert.deepEqual(new Uint8Array(await new Blob(twice).arrayBuffer()), once);
  assert.equal(seen.size, 1, "one buffer, given back each time");
  const py = python(`
import hashlib, json, sys
print(json.dumps(hashlib.sha256(bytes.fromhex(json.load(sys.stdin))).hexdigest()))`, hex(once));
  assert.equal(await fileDigest(zip), py);
});

test("names that would leave the folder, or appear twice, and an empty folder are refused", () => {
  const file = new File(["x"], "x");
  for (const path of ["../x", "a/../../x", "", "/", "a/./b"]) {
    assert.throws(() => zipFolder("f", [{ path, file }]), (e) => e instanceof WormholeError && e.kind === "input", path);
  }
  assert.throws(() => zipFolder("f", [{ path: "a/x", file }, { path: "a//x", file }]), /twice/);
  assert.throws(() => zipFolder("f", []), /holds no file/);
  for (const name of ["", "..", "a/b"]) assert.throws(() => zipFolder(name, [{ path: "x", file }]), /folder's name/);
  // a leading slash is only a separator: the entry stays inside the folder
  assert.equal(zipFolder("f", [{ path: "/top/x", file }]).numFiles, 1);
});

// A Blob whose reads fail, as a file removed or made unreadable after it was picked.
class Unreadable extends Blob {
  slice() {
    return new Unreadable([]);
  }
  async arrayBuffer() {
    throw new DOMException("the file could not be read", "NotReadableError");
  }
  stream() {
    return new ReadableStream({
      pull(controller) {
        controller.error(new DOMException("the file could not be read", "NotReadableError"));
      },
    });
  }
}

test("an unreadable file is named: before a code is asked for, and if it fails while sent", async () => {
  const files = [...folder(), { path: "sub/locked.txt", file: new Unreadable(["secret"]) }];
  await assert.rejects(checkReadable(files), /"sub\/locked.txt" cannot be read/);
  const zip = zipFolder("f", files);
  await assert.rejects(readAll(zip), (e) => e instanceof WormholeError && e.kind === "input" && /"sub\/locked.txt" cannot be read/.test(e.message));
});

test("a file that changed size after it was picked fails the send: the zip is not the length offered", async () => {
  const zip = zipFolder("f", [{ path: "grew", file: { size: 3, lastModified: 0, stream: () => new Blob(["four"]).stream() } }]);
  await assert.rejects(readAll(zip), /folder changed while it was being sent/);
});

test("past 4 GiB the zip is ZIP64, and Python's zipfile reads it (a sparse file: the big entry is zeros)", async () => {
  const big = 4 * 1024 ** 3 + 5;
  const zeros = new Uint8Array(16 << 20);
  // a file of `big` zeros, read in 16 MiB pieces (none of it held)
  const huge = {
    size: big,
    lastModified: 0,
    stream: () => {
      let left = big;
      return new ReadableStream({
        pull(controller) {
          const n = Math.min(left, zeros.length);
          left -= n;
          if (n === 0) controller.close();
          else controller.enqueue(zeros.subarray(0, n));
        },
      });
    },
  };
  const tail = new File(["after the big one"], "tail.txt", { lastModified: 0 });
  const zip = zipFolder("big", [{ path: "zeros.bin", file: huge }, { path: "z/tail.txt", file: tail }]);
  assert.ok(zip.size > big);
  const path = join(mkdtempSync(join(tmpdir(), "zip64-")), "big.zip");
  const fd = openSync(path, "w");
  try {
    let at = 0;
    for await (const slice of zip.slices(16 << 20)) {
      // runs of zeros are left as holes: the file is sparse, the disk holds the headers
      const blank = slice.length === zeros.length && Buffer.from(slice.buffer, slice.byteOffset, slice.length).equals(zeros);
      if (!blank) writeSync(fd, slice, 0, slice.length, at);
      at += slice.length;
    }
    ftruncateSync(fd, at);
    assert.equal(at, zip.size);
  } finally {
    closeSync(fd);
  }
  const read = python(`
import json, sys, zipfile
with zipfile.ZipFile(json.load(sys.stdin)) as z:
    print(json.dumps([[i.filename, i.file_size, i.header_offset > 0xFFFFFFFF] for i in z.infolist()] + [z.read("z/tail.txt").decode()]))`, path);
  rmSync(path);
  assert.deepEqual(read, [["zeros.bin", big, false], ["z/tail.txt", 17, true], "after the big one"]);
});
