// A file's bytes in order, in slices of `size` bytes (the last one shorter), the next slice
// read while the caller works on this one. Read with a BYOB reader of the file's stream, into
// buffers the caller hands back (`spare`): a BYOB read costs a third of the CPU of
// Blob.slice().arrayBuffer() in Chromium, and a transfer that reuses its buffers makes no
// garbage per MiB (docs/web.md, "Where the work runs").
//
// Chromium's garbage collector can take a file's stream whose only reference is its own
// pending read, and that read then never settles: the readers in use are kept in `reading`.

const reading = new Set();

/**
 * Yields Uint8Array slices of `blob`, each a view from the start of a buffer that holds
 * nothing else; ends early if the file got shorter. `spare()` gives an ArrayBuffer the
 * caller is done with (a slice's, given back), or null for a new one.
 */
export async function* fileSlices(blob, size, spare = () => null) {
  if (blob.size === 0) return;
  const reader = byobReader(blob);
  if (reader === null) {
    yield* sliced(blob, size);
    return;
  }
  reading.add(reader);
  try {
    // fills one buffer from the reader: a short slice only at the end of the file
    const fill = async () => {
      const given = spare();
      let buffer = given !== null && given.byteLength >= size ? given : new ArrayBuffer(size);
      let filled = 0;
      while (filled < size) {
        const { value, done } = await reader.read(new Uint8Array(buffer, filled, size - filled));
        if (done) {
          if (value) buffer = value.buffer;
          break;
        }
        buffer = value.buffer;
        filled += value.length;
      }
      return new Uint8Array(buffer, 0, filled);
    };
    let next = fill();
    for (let at = 0; at < blob.size; ) {
      const slice = await next;
      if (slice.length === 0) return; // the caller counts, and says the file got shorter
      at += slice.length;
      next = at < blob.size ? fill() : null;
      next?.catch(() => {}); // looked at on the next turn
      yield slice;
    }
  } finally {
    reading.delete(reader);
    reader.cancel().catch(() => {});
  }
}

// A BYOB reader of the file's stream, or null where the runtime's Blob has no byte stream.
function byobReader(blob) {
  try {
    return blob.stream().getReader({ mode: "byob" });
  } catch {
    return null;
  }
}

// Where there is no byte stream: each slice in a new buffer of its own size.
async function* sliced(blob, size) {
  const read = (at) => blob.slice(at, Math.min(blob.size, at + size)).arrayBuffer();
  let next = read(0);
  for (let at = 0; at < blob.size; ) {
    const slice = new Uint8Array(await next);
    if (slice.length === 0) return; // the caller counts, and says the file got shorter
    at += slice.length;
    next = at < blob.size ? read(at) : null;
    next?.catch(() => {}); // looked at on the next turn
    yield slice;
  }
}
