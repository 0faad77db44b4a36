// A byte stream over a binary WebSocket, as the transit relay uses it: TCP's framing, so
// reads are by byte count across message boundaries, and writes wait while the socket's
// send buffer is full (WebSockets have no drain event, so bufferedAmount is polled).

import { WormholeError } from "./errors.js";
import { capitalise, takeBytes } from "./stream-bytes.js";

const HIGH_WATER = 4 * 1024 * 1024; // bytes queued in the socket before write() waits
const POLL_MS = 4;

export class WsStream {
  constructor(ws, what) {
    this.ws = ws;
    this.what = what; // for messages: "the transit relay at URL"
    this.chunks = []; // received, not yet read
    this.offset = 0; // read position in chunks[0]
    this.available = 0;
    this.wakeup = null;
    this.error = null;
    this.ended = false;
    ws.binaryType = "arraybuffer";
    ws.addEventListener("message", (event) => {
      if (typeof event.data === "string") {
        return this.fail(new WormholeError("transit", `${this.what} sent text where bytes were expected.`));
      }
      const chunk = new Uint8Array(event.data);
      this.chunks.push(chunk);
      this.available += chunk.length;
      this._wake();
    });
    ws.addEventListener("close", () => {
      this.ended = true;
      this._wake();
    });
    ws.addEventListener("error", () => {
      this.fail(new WormholeError("transit", `The connection to ${this.what} failed.`));
    });
  }

  // Resolves once connected. `track(stream)` is called at once, so a cancel can close a
  // socket that is still connecting.
  static open(url, WebSocket, what, track = () => {}) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(url);
      } catch (err) {
        return reject(new WormholeError("transit", `The address of ${what} is not usable: ${err.message}`));
      }
      const stream = new WsStream(ws, what);
      track(stream);
      const failed = () =>
        reject(stream.error?.kind === "cancelled" ? stream.error : new WormholeError("transit", `Could not reach ${what}. Check that the server's relay is running and reachable.`));
      ws.addEventListener("open", () => resolve(stream), { once: true });
      ws.addEventListener("error", failed, { once: true });
      ws.addEventListener("close", failed, { once: true });
    });
  }

  fail(err) {
    if (this.error === null) this.error = err;
    this._wake();
  }

  _wake() {
    const wake = this.wakeup;
    this.wakeup = null;
    if (wake) wake();
  }

  // Exactly n bytes; with n = 0 nothing. Rejects if the stream ends first.
  async read(n) {
    while (this.available < n) {
      if (this.error) throw this.error;
      if (this.ended) {
        throw new WormholeError("transit", `${capitalise(this.what)} closed the connection before the transfer finished.`);
      }
      await new Promise((resolve) => {
        this.wakeup = resolve;
      });
    }
    if (this.error) throw this.error;
    return takeBytes(this, n);
  }

  // Bytes received but not yet read (what a slow reader holds in memory).
  get buffered() {
    return this.available;
  }

  async write(bytes) {
    if (this.error) throw this.error;
    if (this.ws.readyState !== 1) {
      throw new WormholeError("transit", `${capitalise(this.what)} closed the connection before the transfer finished.`);
    }
    this.ws.send(bytes);
    while (this.ws.bufferedAmount > HIGH_WATER) {
      if (this.error) throw this.error;
      if (this.ws.readyState !== 1) {
        throw new WormholeError("transit", `${capitalise(this.what)} closed the connection before the transfer finished.`);
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  // Settles once the bytes of every write so far may be changed: at once, since send()
  // copies them.
  written() {
    return Promise.resolve();
  }

  // Wait (bounded) until what we sent has left, so closing does not drop the tail.
  async drain(timeoutMs = 30000) {
    const end = Date.now() + timeoutMs;
    while (this.ws.readyState === 1 && this.ws.bufferedAmount > 0 && Date.now() < end) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  close() {
    if (this.ws.readyState === 0 || this.ws.readyState === 1) this.ws.close(1000);
    this.fail(new WormholeError("cancelled", `The connection to ${this.what} was closed.`));
  }
}
