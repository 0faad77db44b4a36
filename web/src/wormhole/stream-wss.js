// The relay's byte stream over a WebSocketStream (Chromium has it; Node 20 and some browsers
// do not). Unlike a WebSocket, it reads only when we ask, so a slow sink slows the socket,
// the relay and the sender (TCP back-pressure end to end) instead of the browser queueing
// whatever arrives; writes wait on the stream's own back-pressure.

import { WormholeError } from "./errors.js";
import { capitalise, takeBytes } from "./stream-bytes.js";

export class WssStream {
  constructor(socket, what) {
    this.socket = socket;
    this.what = what;
    this.chunks = [];
    this.offset = 0;
    this.available = 0;
    this.error = null;
    this.lastWrite = Promise.resolve();
    this.closing = false; // close() was called: nothing more is written
  }

  static async open(url, WebSocketStream, what, track = () => {}) {
    let socket;
    try {
      socket = new WebSocketStream(url);
    } catch (err) {
      throw new WormholeError("transit", `The address of ${what} is not usable: ${err.message}`);
    }
    const stream = new WssStream(socket, what);
    track(stream);
    try {
      const { readable, writable } = await socket.opened;
      stream.reader = readable.getReader();
      stream.writer = writable.getWriter();
    } catch {
      throw stream.error ?? new WormholeError("transit", `Could not reach ${what}. Check that the server's relay is running and reachable.`);
    }
    return stream;
  }

  _closed() {
    return this.error ?? new WormholeError("transit", `${capitalise(this.what)} closed the connection before the transfer finished.`);
  }

  async read(n) {
    while (this.available < n) {
      if (this.error) throw this.error;
      let next;
      try {
        next = await this.reader.read();
      } catch {
        throw this._closed();
      }
      if (next.done) throw this._closed();
      if (typeof next.value === "string") {
        throw (this.error = new WormholeError("transit", `${this.what} sent text where bytes were expected.`));
      }
      const chunk = new Uint8Array(next.value);
      this.chunks.push(chunk);
      this.available += chunk.length;
    }
    if (this.error) throw this.error;
    return takeBytes(this, n);
  }

  get buffered() {
    return this.available;
  }

  async write(bytes) {
    if (this.error) throw this.error;
    try {
      await this.writer.ready;
    } catch {
      throw this._closed();
    }
    // close() may have come while we waited, and the writer can still look ready then (its
    // last write done): Chromium's worker crashes on a write after WebSocketStream.close()
    if (this.error) throw this.error;
    this.lastWrite = this.writer.write(bytes).catch(() => {});
  }

  // Settles once the bytes of every write so far may be changed: the stream holds a chunk
  // until its write settles.
  written() {
    return this.lastWrite;
  }

  async drain(timeoutMs = 30000) {
    let timer;
    await Promise.race([this.lastWrite, new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  close() {
    if (this.closing) return;
    this.closing = true;
    if (this.error === null) this.error = new WormholeError("cancelled", `The connection to ${this.what} was closed.`);
    try {
      this.socket.close({ closeCode: 1000 });
    } catch {
      // already closed
    }
  }
}
