// Several files or a folder, sent as the CLIs send a folder (`wormhole send DIR`): file-transfer
// v1's `directory` offer, then a zip of the files. The zip is client-zip's (npm, locked in
// web/package-lock.json): entries stored, not deflated, so its length is known before a byte
// is written (the offer's `zipsize`), ZIP64 where a file or the whole passes 4 GiB (Python's
// zipfile, which the CLI extracts with, reads it). It is built as it is read, never held
// whole, and the same files give the same bytes on every read (the sender hashes one read
// while the code is passed on, and sends another).

import { makeZip, predictLength } from "client-zip";
import { WormholeError } from "./errors.js";

// the only mode every receiver accepts (magic-wormhole before 0.13 wanted exactly this); it
// names the container: entries may be stored, and every zip reader reads stored entries
export const ZIP_MODE = "zipfile/deflated";

/**
 * A folder to send: `name` (the folder's name, the receiver's directory) and `files`, a list
 * of {path, file} (path relative to the folder, "/"-separated; file a Blob or File).
 * Returns {kind: "directory", name, size (the zip's bytes), numBytes, numFiles, slices(size, spare)}.
 */
export function zipFolder(name, files) {
  const dirname = checkName(name);
  const seen = new Set();
  const entries = files.map(({ path, file }) => {
    const clean = checkPath(path);
    if (seen.has(clean)) throw new WormholeError("input", `"${clean}" is in the folder twice.`);
    seen.add(clean);
    // one date for every read: the zip's bytes must not change between the hash and the send
    return { name: clean, file, size: file.size, lastModified: new Date(file.lastModified ?? 0) };
  });
  if (entries.length === 0) throw new WormholeError("input", `The folder ${dirname} holds no file to send.`);
  const size = Number(predictLength(entries.map(({ name, size, lastModified }) => ({ name, size, lastModified }))));
  return {
    kind: "directory",
    name: dirname,
    size,
    numBytes: entries.reduce((sum, e) => sum + e.size, 0),
    numFiles: entries.length,
    offer() {
      return { directory: { mode: ZIP_MODE, dirname, zipsize: size, numbytes: this.numBytes, numfiles: this.numFiles } };
    },
    slices: (sliceSize, spare) => zipSlices(entries, size, sliceSize, spare),
  };
}

/**
 * Throws a clear error naming the first file that cannot be read (gone, no permission). An
 * empty file is read whole: a browser may learn a file's size only when asked, and a file
 * gone by then looks empty until it is read.
 */
export async function checkReadable(files) {
  for (const { path, file } of files) {
    try {
      await (file.size === 0 ? file : file.slice(0, 1)).arrayBuffer();
    } catch (err) {
      throw unreadable(path, err);
    }
  }
}

function unreadable(path, err) {
  return new WormholeError("input", `"${path}" cannot be read (${err?.message ?? err}): nothing more was sent. Check the file, then send again.`, { cause: err });
}

function checkName(name) {
  const clean = String(name ?? "").replace(/[\u0000-\u001f]/g, "").trim();
  if (!clean || clean === "." || clean === ".." || /[\\/]/.test(clean)) {
    throw new WormholeError("input", `"${name}" cannot be a folder's name.`);
  }
  return clean;
}

// A path inside the folder: "/"-separated parts, none empty, "." or ".." (no escaping it).
function checkPath(path) {
  const parts = String(path ?? "").split(/[\\/]/).filter((p) => p !== "");
  if (parts.length === 0 || parts.some((p) => p === "." || p === ".." || /[\u0000-\u001f]/.test(p))) {
    throw new WormholeError("input", `"${path}" cannot be a file's place in a folder.`);
  }
  return parts.join("/");
}

// One file's bytes for client-zip; a read that fails names the file.
async function* fileBytes(path, file) {
  const reader = file.stream().getReader();
  try {
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch (err) {
        throw unreadable(path, err);
      }
      if (step.done) return;
      yield step.value;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// The zip's bytes in slices of `size` (the last shorter), each at the start of a buffer of
// its own (one given back by `spare()`, or new); the zip must be exactly `total` bytes.
async function* zipSlices(entries, total, size, spare = () => null) {
  const zip = makeZip(
    entries.map(({ name, file, size: length, lastModified }) => ({ name, size: length, lastModified, input: fileBytes(name, file) })),
  );
  const reader = zip.getReader();
  let produced = 0;
  const fresh = () => {
    const given = spare();
    return new Uint8Array(given !== null && given.byteLength >= size ? given : new ArrayBuffer(size), 0, size);
  };
  let out = fresh();
  let filled = 0;
  try {
    for (;;) {
      let step;
      try {
        step = await reader.read();
      } catch (err) {
        throw err instanceof WormholeError ? err : new WormholeError("input", `The folder could not be read: ${err?.message ?? err}`, { cause: err });
      }
      if (step.done) break;
      let chunk = step.value;
      produced += chunk.length;
      if (produced > total) break;
      while (chunk.length > 0) {
        const n = Math.min(size - filled, chunk.length);
        out.set(chunk.subarray(0, n), filled);
        filled += n;
        chunk = chunk.subarray(n);
        if (filled === size) {
          yield out;
          out = fresh();
          filled = 0;
        }
      }
    }
    if (produced !== total) {
      throw new WormholeError("input", "The folder changed while it was being sent (its zip is not the size announced). Send it again.");
    }
    if (filled > 0) yield out.subarray(0, filled);
  } finally {
    reader.cancel().catch(() => {});
  }
}
