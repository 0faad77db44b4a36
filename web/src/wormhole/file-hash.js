// The file's SHA-256 (file-transfer v1's ack), the page's other per-byte cost: hash-wasm's
// WebAssembly runs about twice as fast as the fastest plain JS; @noble/hashes where the
// runtime allows no WebAssembly (the digest is the same).

import { sha256 } from "@noble/hashes/sha2.js";
import { createSHA256 } from "hash-wasm";

/** A fresh hash: {name, update(bytes), digest() -> Uint8Array(32)}. */
export async function fileHash() {
  try {
    const hash = await createSHA256();
    hash.init();
    return { name: "hash-wasm", update: (bytes) => hash.update(bytes), digest: () => hash.digest("binary") };
  } catch {
    const hash = sha256.create();
    return { name: "@noble/hashes", update: (bytes) => hash.update(bytes), digest: () => hash.digest() };
  }
}
