// A file's bytes in order, in slices of `size` bytes (the last one shorter), each in an
// ArrayBuffer of its own that the caller may keep or transfer. Read as a stream, into our own
// buffers where the browser offers a BYOB reader: in Chromium that costs a third of the CPU
// of Blob.slice().arrayBuffer() per byte, and a file is read twice when sent (see send.js).

/** Yields Uint8Array slices of `blob`; stops reading (cancels) when the caller stops. */
export async function* fileSlices(blob, size) {
  const stream = blob.stream();
  let reader;
  try {
    reader = stream.getReader({ mode: "byob" });
  } catch {
    yield* copiedSlices(stream.getReader(), size); // no byte stream here
    return;
  }
  try {
    for (;;) {
      let buffer = new ArrayBuffer(size);
      let filled = 0;
      let done = false;
      while (filled < size && !done) {
        const read = await reader.read(new Uint8Array(buffer, filled, size - filled));
        done = read.done;
        if (read.value) {
          buffer = read.value.buffer; // the same memory, handed back
          filled += read.value.length;
        }
      }
      if (filled > 0) yield new Uint8Array(buffer, 0, filled);
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// The default reader's chunks (whatever size the browser picks), gathered into slices.
async function* copiedSlices(reader, size) {
  try {
    let slice = new Uint8Array(size);
    let filled = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (let at = 0; at < value.length; ) {
        const n = Math.min(size - filled, value.length - at);
        slice.set(value.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === size) {
          yield slice;
          slice = new Uint8Array(size);
          filled = 0;
        }
      }
    }
    if (filled > 0) yield slice.subarray(0, filled);
  } finally {
    reader.cancel().catch(() => {});
  }
}
