// Transit (magic-wormhole's transit.md as the CLIs speak it) through a relay reached over a
// WebSocket: the relay handshake, the sender/receiver handshakes, go, then length-prefixed
// SecretBox records with a per-direction counter nonce, written big-endian as every client does.

import { equal, fromUtf8, randomBytes, toHex, utf8 } from "./bytes.js";
import { WormholeError } from "./errors.js";
import { deriveKey } from "./keys.js";
import { nobleBox } from "./records-box.js";
import { WsStream } from "./stream.js";
import { WssStream } from "./stream-wss.js";

export const relayHandshake = (transitKey, side) =>
  utf8(`please relay ${toHex(deriveKey(transitKey, "transit_relay_token"))} for side ${side}\n`);
export const senderHandshake = (transitKey) =>
  utf8(`transit sender ${toHex(deriveKey(transitKey, "transit_sender"))} ready\n\n`);
export const receiverHandshake = (transitKey) =>
  utf8(`transit receiver ${toHex(deriveKey(transitKey, "transit_receiver"))} ready\n\n`);

// The 24-byte nonce of record n: n as a big-endian number (Python writes f"{n:048x}").
export function recordNonce(n) {
  const nonce = new Uint8Array(24);
  new DataView(nonce.buffer).setBigUint64(16, BigInt(n));
  return nonce;
}

// Our transit message: we cannot listen (a browser has no TCP), so our only hint is the
// relay, named both for TCP peers (the CLIs) and for WebSocket peers (other pages).
export function transitMessage({ transitUrl, tcpRelay }) {
  const hints = [];
  if (tcpRelay) hints.push({ type: "direct-tcp-v1", hostname: tcpRelay.host, port: tcpRelay.port, priority: 0.0 });
  hints.push({ type: "websocket-v1", url: transitUrl, priority: 0.0 });
  return {
    "abilities-v1": [{ type: "relay-v1" }],
    "hints-v1": [{ type: "relay-v1", hints }],
  };
}

// Plaintext per transit record we send: the Python CLI's receiver re-buffers a record until
// it is whole (bytes += data per read), so records much larger than its 64 KiB reads cost it.
export const RECORD_BYTES = 64 * 1024;
// Plaintext handed on at once when receiving (and read from a file at once when sending).
export const BATCH_BYTES = 1024 * 1024;
// Sealed frames written and not yet reused: a frame is sealed into again once the stream no
// longer needs its bytes, so sending makes no garbage but a few small objects per MiB.
const FRAMES = 4;

export class RecordPipe {
  constructor(stream, sendKey, receiveKey, box = nobleBox) {
    this.stream = stream;
    this.box = box;
    this.sendKey = sendKey;
    this.receiveKey = receiveKey;
    this.sent = 0;
    this.received = 0;
    this.inFlight = []; // {frame, written}: frames written, oldest first
    this.free = null; // the buffer of what sendData() last sealed, for spare()
  }

  // The buffer of the bytes sendData() was last given, once sealed (a caller that gives its
  // buffers reads the next bytes into it), or null.
  spare() {
    const free = this.free;
    this.free = null;
    return free;
  }

  // A frame of at least `size` bytes to seal into: the oldest one written, once the stream
  // no longer needs its bytes, or a new one while fewer than FRAMES were written.
  async _frame(size) {
    if (this.inFlight.length < FRAMES) return new Uint8Array(size);
    const { frame, written } = this.inFlight.shift();
    await written;
    return frame.length >= size ? frame : new Uint8Array(size);
  }

  // length || nonce || box of one record, built in `out` at `at`; returns the end. The box
  // is sealed in place, before the nonce is written (a box may use that space as scratch).
  _seal(plaintext, out, at) {
    const nonce = recordNonce(this.sent++);
    const end = at + 28 + 16 + plaintext.length;
    this.box.sealInto(this.sendKey, nonce, plaintext, out, at + 28);
    new DataView(out.buffer, out.byteOffset).setUint32(at, end - at - 4);
    out.set(nonce, at + 4);
    return end;
  }

  async send(plaintext) {
    const frame = new Uint8Array(4 + 24 + 16 + plaintext.length);
    this._seal(plaintext, frame, 0);
    await this.stream.write(frame);
  }

  // `bytes` as records of RECORD_BYTES, written in one message: the relay carries a byte
  // stream, so fewer, larger WebSocket messages cost the browser less for the same records.
  // Takes `bytes`' buffer: the caller may read into it again only once spare() gives it.
  async sendData(bytes) {
    const count = Math.ceil(bytes.length / RECORD_BYTES);
    const frame = await this._frame(bytes.length + count * (4 + 24 + 16));
    let end = 0;
    for (let at = 0; at < bytes.length; at += RECORD_BYTES) {
      end = this._seal(bytes.subarray(at, at + RECORD_BYTES), frame, end);
    }
    this.free = bytes.byteOffset === 0 ? bytes.buffer : null;
    await this.stream.write(frame.subarray(0, end));
    this.inFlight.push({ frame, written: this.stream.written() });
  }

  // The next record's nonce and box (tag || ciphertext), its length and order checked.
  async _next() {
    const head = await this.stream.read(4);
    const length = new DataView(head.buffer, head.byteOffset, 4).getUint32(0);
    if (length < 24 + 16) throw new WormholeError("transit", "The other side sent a broken transit record.");
    const record = await this.stream.read(length);
    const nonce = recordNonce(this.received);
    if (!equal(record.subarray(0, 24), nonce)) {
      throw new WormholeError("transit", `The other side's transit record ${this.received} came out of order; the transfer was stopped.`);
    }
    this.received++;
    return { nonce, box: record.subarray(24) };
  }

  _openInto({ nonce, box }, out, at) {
    try {
      this.box.openInto(this.receiveKey, nonce, box, out, at);
    } catch {
      throw new WormholeError("transit", "A transit record did not decrypt: the data was damaged on the way. Try again.");
    }
  }

  async receive() {
    const record = await this._next();
    const out = new Uint8Array(record.box.length - 16);
    this._openInto(record, out, 0);
    return out;
  }

  // Whole records' plaintext, opened into one buffer of exactly their size: at least one
  // record, then more while bytes are already here, up to about BATCH_BYTES or the `limit`
  // still expected (the Python CLI's 16 KiB records become fewer, larger pieces for the
  // hash and the sink). The records are gathered first (views of what the socket gave),
  // so no buffer is made that is not handed on.
  async receiveData(limit) {
    const want = Math.min(limit, BATCH_BYTES);
    const records = [await this._next()];
    let size = records[0].box.length - 16;
    while (size < want && this.stream.buffered > 0) {
      const record = await this._next();
      records.push(record);
      size += record.box.length - 16;
    }
    const out = new Uint8Array(size);
    let at = 0;
    for (const record of records) {
      this._openInto(record, out, at);
      at += record.box.length - 16;
    }
    return out;
  }

  close() {
    this.stream.close();
  }
}

async function expect(stream, wanted, what) {
  const got = await stream.read(wanted.length).catch((err) => {
    if (err.kind === "transit") {
      throw new WormholeError("transit", `${what} closed the connection during the handshake. Try again with a new code.`);
    }
    throw err;
  });
  if (!equal(got, wanted)) {
    let text = "";
    try {
      text = fromUtf8(got).trim();
    } catch {
      text = "binary data";
    }
    throw new WormholeError("transit", `${what} answered "${text.slice(0, 60)}" instead of the expected handshake.`);
  }
}

// Connect to the relay as `role` ("sender" or "receiver") and return a RecordPipe once the
// peer has met us there. Data flows only after the sender's "go". `track(closable)` gets
// the socket at once, so the caller can close it while we still wait for the peer.
// With a WebSocketStream constructor, reads carry back-pressure to the relay (see stream-wss.js).
export async function connectThroughRelay({ url, WebSocket, WebSocketStream, transitKey, role, track, box }) {
  const what = `the transit relay at ${url}`;
  const stream = WebSocketStream
    ? await WssStream.open(url, WebSocketStream, what, track)
    : await WsStream.open(url, WebSocket, what, track);
  try {
    await stream.write(relayHandshake(transitKey, toHex(randomBytes(8))));
    await expect(stream, utf8("ok\n"), "The transit relay");
    const ours = role === "sender" ? senderHandshake(transitKey) : receiverHandshake(transitKey);
    const theirs = role === "sender" ? receiverHandshake(transitKey) : senderHandshake(transitKey);
    await stream.write(ours);
    await expect(stream, theirs, "The other side");
    if (role === "sender") {
      await stream.write(utf8("go\n"));
    } else {
      await expect(stream, utf8("go\n"), "The other side");
    }
    const senderKey = deriveKey(transitKey, "transit_record_sender_key");
    const receiverKey = deriveKey(transitKey, "transit_record_receiver_key");
    return role === "sender"
      ? new RecordPipe(stream, senderKey, receiverKey, box)
      : new RecordPipe(stream, receiverKey, senderKey, box);
  } catch (err) {
    stream.close();
    throw err;
  }
}

