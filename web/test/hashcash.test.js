// Hashcash stamps minted here must pass Pigeonhole's own verifier, or a server that asks for
// them would turn the page away.

import assert from "node:assert/strict";
import { test } from "node:test";
import { mintHashcash } from "../src/wormhole/index.js";
import { sha1 } from "@noble/hashes/legacy.js";
import { stampHash } from "../src/wormhole/file-hash.js";
import { leadingZeroBits, mintHashcashAsync, stampDate } from "../src/wormhole/hashcash.js";
import { python } from "../testing/python.js";

const VERIFY = `
import json, sys, time
from pigeonhole.permissions.hashcash import verify_stamp
from pigeonhole.protocol.errors import ProtocolError
out = []
for case in json.load(sys.stdin):
    try:
        verify_stamp(case["stamp"], resource=case["resource"], bits=case["bits"], now=time.time(), window=600)
        out.append("ok")
    except ProtocolError as err:
        out.append(str(err))
print(json.dumps(out))`;

test("stamps pass pigeonhole.permissions.hashcash.verify_stamp; wrong ones do not", async () => {
  const resource = "5f3a9c0d1e2b4a6f7788"; // what the server sends: lowercase hex
  const stamps = [mintHashcash(resource, 12), mintHashcash(resource, 16), await mintHashcashAsync(resource, 14)];
  const cases = [
    ...stamps.map((stamp, i) => ({ stamp, resource, bits: [12, 16, 14][i] })),
    { stamp: stamps[0], resource: "another", bits: 12 }, // another resource
    { stamp: stamps[0], resource, bits: 13 }, // claims fewer bits than required
    { stamp: stamps[1].replace(/:[0-9a-f]+$/, ":zz"), resource, bits: 16 }, // counter changed
  ];
  const verdicts = python(VERIFY, cases);
  assert.deepEqual(verdicts.slice(0, 3), ["ok", "ok", "ok"]);
  for (const verdict of verdicts.slice(3)) assert.notEqual(verdict, "ok");
  // the shape the verifier documents: 1:bits:date:resource::rand:counter, in one SHA-1 block
  assert.ok(stamps[0].length <= 55, stamps[0]);
  assert.match(stamps[0], /^1:12:\d{6}:5f3a9c0d1e2b4a6f7788::[0-9a-f]{8}:[0-9a-f]{8}$/);
});

test("leading zero bits and the UTC date field", () => {
  assert.equal(leadingZeroBits(Uint8Array.of(0, 0, 0x10, 0xff)), 19);
  assert.equal(leadingZeroBits(Uint8Array.of(0x80)), 0);
  assert.equal(leadingZeroBits(Uint8Array.of(0, 0)), 16);
  assert.throws(() => mintHashcash("a:b", 1), /cannot contain/);
  assert.equal(stampDate(new Date(Date.UTC(2026, 0, 2, 3, 4, 5))), "260102");
});

test("the page's stamp hash is hash-wasm's SHA-1 here, equal to @noble's", async () => {
  const hash = await stampHash();
  assert.equal(hash.library, "hash-wasm", "fell back to @noble/hashes where WebAssembly runs");
  for (const text of ["", "1:20:261126:0123456789abcdef0123::a1b2c3d4:0000ffff", "x".repeat(200)]) {
    const bytes = new TextEncoder().encode(text);
    assert.deepEqual(hash(bytes), sha1(bytes), text);
  }
});
