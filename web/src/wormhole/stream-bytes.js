// What the relay's two byte streams share (stream.js over a WebSocket, stream-wss.js over a
// WebSocketStream): both keep what arrived as a list of chunks and read it by byte count.

/** n bytes from the front of stream.chunks (read position stream.offset, stream.available in all): a view when they lie in one chunk, else a copy. */
export function takeBytes(stream, n) {
  const head = stream.chunks[0];
  if (n > 0 && head.length - stream.offset >= n) {
    const view = head.subarray(stream.offset, stream.offset + n);
    stream.offset += n;
    if (stream.offset === head.length) {
      stream.chunks.shift();
      stream.offset = 0;
    }
    stream.available -= n;
    return view;
  }
  const out = new Uint8Array(n);
  let filled = 0;
  while (filled < n) {
    const first = stream.chunks[0];
    const take = Math.min(n - filled, first.length - stream.offset);
    out.set(first.subarray(stream.offset, stream.offset + take), filled);
    filled += take;
    stream.offset += take;
    if (stream.offset === first.length) {
      stream.chunks.shift();
      stream.offset = 0;
    }
  }
  stream.available -= n;
  return out;
}

export const capitalise = (text) => text.charAt(0).toUpperCase() + text.slice(1);
