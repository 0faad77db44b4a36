// Hashes in hash-wasm's WebAssembly (about twice to three times as fast as the fastest plain
// JS), or @noble/hashes' where the runtime allows no WebAssembly (the digest is the same):
// the file's SHA-256 (file-transfer v1's ack) and a hashcash stamp's SHA-1.

import { sha1 } from "@noble/hashes/legacy.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { createSHA1, createSHA256 } from "hash-wasm";

// {name, update(bytes), digest() -> Uint8Array}: hash-wasm's `create()`, or noble's `hash`.
async function wasmOr(create, hash) {
  try {
    const wasm = await create();
    wasm.init();
    return { name: "hash-wasm", update: (bytes) => wasm.update(bytes), digest: () => wasm.digest("binary"), reset: () => wasm.init() };
  } catch {
    let plain = hash.create();
    return { name: "@noble/hashes", update: (bytes) => plain.update(bytes), digest: () => plain.digest(), reset: () => (plain = hash.create()) };
  }
}

/** A fresh SHA-256 of a file: {name, update(bytes), digest() -> Uint8Array(32)}. */
export const fileHash = () => wasmOr(createSHA256, sha256);

/** SHA-1 of one stamp at a time: bytes -> Uint8Array(20); its `library` says whose. */
export async function stampHash() {
  const hash = await wasmOr(createSHA1, sha1);
  const once = (bytes) => {
    hash.reset();
    hash.update(bytes);
    return hash.digest();
  };
  once.library = hash.name;
  return once;
}
