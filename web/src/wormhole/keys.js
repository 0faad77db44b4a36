// The wormhole's key schedule and its NaCl SecretBox, as magic-wormhole's _key.py does them:
// every derived key is HKDF-SHA256(key, no salt, info=purpose); every box is nonce || box.

import { xsalsa20poly1305 } from "@noble/ciphers/salsa.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { concat, randomBytes, utf8 } from "./bytes.js";

const asBytes = (v) => (typeof v === "string" ? utf8(v) : v);

export const deriveKey = (key, purpose, length = 32) =>
  hkdf(sha256, key, undefined, asBytes(purpose), length);

// The phase key uses the *sending* side's id, so each direction of each phase has its own.
export const derivePhaseKey = (key, side, phase) =>
  deriveKey(key, concat(utf8("wormhole:phase:"), sha256(utf8(side)), sha256(utf8(phase))));

export const deriveVerifier = (key) => deriveKey(key, "wormhole:verifier");

// The transit key is fixed to the file-transfer AppID's name even when the AppID differs.
export const TRANSIT_KEY_PURPOSE = "lothar.com/wormhole/text-or-file-xfer/transit-key";
export const deriveTransitKey = (key) => deriveKey(key, TRANSIT_KEY_PURPOSE);

export function seal(key, plaintext, nonce = randomBytes(24)) {
  return concat(nonce, xsalsa20poly1305(key, nonce).encrypt(plaintext));
}

// Throws when the box was made with another key (e.g. the peer typed another code).
export function open(key, box) {
  if (box.length < 24 + 16) throw new Error("encrypted message is too short");
  return xsalsa20poly1305(key, box.subarray(0, 24)).decrypt(box.subarray(24));
}
