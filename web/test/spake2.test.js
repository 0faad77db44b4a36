// SPAKE2: our constants and keys must be python-spake2 0.9's, byte for byte, or no CLI
// would ever agree on a key with the page.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Spake2Symmetric, arbitraryElement, passwordScalar, S } from "../src/wormhole/spake2.js";
import { hex, python, unhex } from "../testing/python.js";

const utf8 = (text) => new TextEncoder().encode(text);
const APPID = "lothar.com/wormhole/text-or-file-xfer";
const CODES = ["4-purple-sausages", "7-guitarist-revenge", "123-aardvark-adroitness", "0-x", "9-ünïcode-wörds"];

test("S, M and N are the blinding points the notes give", () => {
  assert.equal(hex(S.toBytes()), "6f00dae87c1be1a73b5922ef431cd8f57879569c222d22b1cd71e8546ab8e6f1");
  assert.equal(hex(arbitraryElement("M").toBytes()), "15cfd18e385952982b6a8f8c7854963b58e34388c8e6dae891db756481a02312");
  assert.equal(hex(arbitraryElement("N").toBytes()), "f04f2e7eb734b2a8f8b472eaf9c3c632576ac64aea650b496a8a20ff00e583c3");
});

test("S, M and N equal python-spake2's own", () => {
  const py = python(`
import json
from spake2.parameters.ed25519 import ParamsEd25519 as P
print(json.dumps({k: getattr(P, k).to_bytes().hex() for k in ("M", "N", "S")}))`);
  for (const seed of ["M", "N"]) assert.equal(hex(arbitraryElement(seed).toBytes()), py[seed]);
  assert.equal(hex(S.toBytes()), py.S);
});

// python-spake2 with fixed entropy (our side's x and theirs), for several codes
const FIXED = `
import hashlib, json, sys
from spake2 import SPAKE2_Symmetric
out = []
for case in json.load(sys.stdin):
    sides = []
    for ent in (case["a"], case["b"]):
        stream = bytes.fromhex(ent)
        sides.append(SPAKE2_Symmetric(case["code"].encode(), idSymmetric=case["appid"].encode(),
                                      entropy_f=lambda n, s=stream: s[:n]))
    msgs = [s.start() for s in sides]
    out.append({"msg_a": msgs[0].hex(), "msg_b": msgs[1].hex(),
                "key_a": sides[0].finish(msgs[1]).hex(), "key_b": sides[1].finish(msgs[0]).hex()})
print(json.dumps(out))`;

test("messages and keys equal python-spake2's for fixed inputs, several codes", () => {
  const cases = CODES.map((code, i) => ({
    code,
    appid: i % 2 ? APPID : "other.example/app",
    a: hex(Uint8Array.from({ length: 64 }, (_, j) => (j * 7 + i) & 0xff)),
    b: hex(Uint8Array.from({ length: 64 }, (_, j) => (j * 13 + 5 * i + 1) & 0xff)),
  }));
  const py = python(FIXED, cases);
  cases.forEach((c, i) => {
    const fixed = (h) => (n) => unhex(h).subarray(0, n);
    const a = new Spake2Symmetric(utf8(c.code), utf8(c.appid), fixed(c.a));
    const b = new Spake2Symmetric(utf8(c.code), utf8(c.appid), fixed(c.b));
    const [ma, mb] = [a.start(), b.start()];
    assert.equal(hex(ma), py[i].msg_a, c.code);
    assert.equal(hex(mb), py[i].msg_b, c.code);
    assert.equal(hex(a.finish(mb)), py[i].key_a, c.code);
    assert.equal(hex(b.finish(ma)), py[i].key_b, c.code);
    assert.equal(py[i].key_a, py[i].key_b);
  });
});

// Live exchange both ways: JS's random message to Python and Python's random one to JS.
const EXCHANGE = `
import json, sys
from spake2 import SPAKE2_Symmetric
out = []
for case in json.load(sys.stdin):
    s = SPAKE2_Symmetric(case["code"].encode(), idSymmetric=case["appid"].encode())
    msg = s.start()
    out.append({"msg": msg.hex(), "key": s.finish(bytes.fromhex(case["js_msg"])).hex()})
print(json.dumps(out))`;

test("a JS side and a python-spake2 side agree on the key (both directions), and a wrong code does not", () => {
  const sides = CODES.map((code) => new Spake2Symmetric(utf8(code), utf8(APPID)));
  const msgs = sides.map((s) => s.start());
  // the Python side uses the right code for all but the last case
  const py = python(
    EXCHANGE,
    CODES.map((code, i) => ({ code: i === CODES.length - 1 ? code + "x" : code, appid: APPID, js_msg: hex(msgs[i]) })),
  );
  sides.forEach((side, i) => {
    const key = hex(side.finish(unhex(py[i].msg)));
    if (i === CODES.length - 1) assert.notEqual(key, py[i].key);
    else assert.equal(key, py[i].key, CODES[i]);
  });
});

test("password scalar is python-spake2's", () => {
  const py = python(`
import json, sys
from spake2.groups import password_to_scalar
from spake2.ed25519_basic import L
print(json.dumps([str(password_to_scalar(c.encode(), 32, L)) for c in json.load(sys.stdin)]))`, CODES);
  CODES.forEach((code, i) => assert.equal(passwordScalar(utf8(code)).toString(), py[i]));
});

test("bad inbound messages are refused: wrong side byte, reflection, identity, small order", () => {
  const side = new Spake2Symmetric(utf8("1-a-b"), utf8(APPID));
  const ours = side.start();
  const withByte = (b, rest) => Uint8Array.of(b, ...rest);
  assert.throws(() => side.finish(withByte(0x41, ours.subarray(1))), /not a symmetric/);
  assert.throws(() => side.finish(ours), /reflected/);
  const identity = unhex("0100000000000000000000000000000000000000000000000000000000000000");
  assert.throws(() => side.finish(withByte(0x53, identity)), /prime-order/);
  // a point of order 8 (from the Ed25519 torsion subgroup)
  const order8 = unhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a");
  assert.throws(() => side.finish(withByte(0x53, order8)), /prime-order|not a curve point/);
  assert.throws(() => side.finish(new Uint8Array(10)), /not a symmetric/);
});
