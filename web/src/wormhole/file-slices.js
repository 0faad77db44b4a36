// A file's bytes in order, in slices of `size` bytes (the last one shorter), each in an
// ArrayBuffer of its own that the caller may keep or transfer; the next slice is read while
// the caller works on this one. Blob.slice().arrayBuffer(), not Blob.stream(): a BYOB read
// of the file's stream costs a third of the CPU in Chromium, but a garbage collection can
// take a stream whose only reference is its pending read, and the transfer then stops for
// good (docs/web.md, "Known limits").

/** Yields Uint8Array slices of `blob`; ends early if the file got shorter. */
export async function* fileSlices(blob, size) {
  const read = (at) => blob.slice(at, Math.min(blob.size, at + size)).arrayBuffer();
  let next = blob.size > 0 ? read(0) : null;
  for (let at = 0; at < blob.size; ) {
    const slice = new Uint8Array(await next);
    if (slice.length === 0) return; // the caller counts, and says the file got shorter
    at += slice.length;
    next = at < blob.size ? read(at) : null;
    next?.catch(() => {}); // looked at on the next turn
    yield slice;
  }
}
