// SPAKE2 in python-spake2 0.9's symmetric mode on Ed25519, byte for byte, because the
// wormhole CLIs use exactly that (no npm package matches it). Point arithmetic is
// @noble/curves'; what python-spake2 adds is how it derives its constants and scalars and
// what goes into the final hash.

import { ed25519 } from "@noble/curves/ed25519.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { compare, concat, equal, randomBytes, toHex, utf8 } from "./bytes.js";

const Point = ed25519.Point;
const Q = Point.Fp.ORDER; // 2^255 - 19
const L = Point.Fn.ORDER; // 2^252 + 27742317777372353535851937790883648493
const SIDE_SYMMETRIC = 0x53; // "S": python-spake2 prefixes a symmetric message with it

const bigFromBE = (bytes) => (bytes.length ? BigInt("0x" + toHex(bytes)) : 0n);

function littleEndian32(n) {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++, n >>= 8n) out[i] = Number(n & 0xffn);
  return out;
}

const expand = (ikm, info) => hkdf(sha256, ikm, new Uint8Array(0), utf8(info), 48);

// python-spake2's arbitrary_element: a point nobody knows the discrete log of, found by
// hashing the seed to a y, trying y, y+1, ... with the even x, and clearing the cofactor.
export function arbitraryElement(seed) {
  const y = bigFromBE(expand(typeof seed === "string" ? utf8(seed) : seed, "SPAKE2 arbitrary element")) % Q;
  for (let plus = 0n; plus < 1000n; plus++) {
    let point;
    try {
      point = Point.fromBytes(littleEndian32((y + plus) % Q)); // sign bit 0: the even x
    } catch {
      continue; // about half the y values are not on the curve
    }
    const p8 = point.multiplyUnsafe(8n);
    if (!p8.is0()) return p8;
  }
  throw new Error("no curve point found for the seed"); // never happens for real seeds
}

export const S = arbitraryElement("symmetric");

export const passwordScalar = (password) => bigFromBE(expand(password, "SPAKE2 pw")) % L;

// 64 bytes (256 extra bits) reduced mod L, as python-spake2 does, so its vectors reproduce.
export const randomScalar = (entropy) => bigFromBE(entropy(64)) % L;

// multiply() refuses 0; a zero scalar only happens with negligible probability.
const times = (point, scalar) => (scalar === 0n ? Point.ZERO : point.multiply(scalar));

export class Spake2Symmetric {
  // password and idSymmetric are bytes (the wormhole passes the code and the AppID as UTF-8)
  constructor(password, idSymmetric, entropy = randomBytes) {
    this.password = password;
    this.idSymmetric = idSymmetric;
    this.entropy = entropy;
    this.pw = passwordScalar(password);
  }

  // The 33-byte message: "S" then x*B + pw*S.
  start() {
    this.x = randomScalar(this.entropy);
    const element = times(Point.BASE, this.x).add(times(S, this.pw));
    this.outbound = element.toBytes();
    return concat(new Uint8Array([SIDE_SYMMETRIC]), this.outbound);
  }

  // The 32-byte shared key, or an Error saying why the peer's message is unusable.
  finish(inbound) {
    if (inbound.length !== 33 || inbound[0] !== SIDE_SYMMETRIC) {
      throw new Error("the peer's PAKE message is not a symmetric SPAKE2 message");
    }
    const message = inbound.subarray(1);
    if (equal(message, this.outbound)) throw new Error("the peer reflected our PAKE message");
    let element;
    try {
      element = Point.fromBytes(message);
    } catch {
      throw new Error("the peer's PAKE message is not a curve point");
    }
    if (element.is0() || !element.isTorsionFree()) {
      throw new Error("the peer's PAKE message is not in the prime-order group");
    }
    const k = times(element.subtract(times(S, this.pw)), this.x).toBytes();
    const [first, second] = [message, this.outbound].sort(compare);
    const transcript = concat(
      sha256(this.password),
      sha256(this.idSymmetric),
      first,
      second,
      k,
    );
    return sha256(transcript);
  }
}
