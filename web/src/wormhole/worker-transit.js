// Transit in a dedicated Worker: the worker owns the relay's WebSocket and the records'
// SecretBox (transit.js, with the box its caller gives: libsodium's WebAssembly in the page's
// worker), so the page's thread only reads, hashes and saves the file's bytes while a second
// core seals or opens them. Both ends of the port are here:
// serveTransit() runs in the worker, WorkerPipe stands in for a RecordPipe on the page.
//
// Messages on one MessagePort per transfer (page -> worker): {op: "connect", ...},
// {op: "data", bytes} (records to send, its buffer transferred), {op: "stream", limit}
// (send me up to `limit` bytes of plaintext as they come), {op: "taken", bytes} (credit),
// {op: "receive"} (one record), {op: "drain"} (once all was "sent"), {op: "close"}.
// Worker -> page: "connected", "sent" (bytes written, and the buffer they came in, given
// back for the next read), "data" (plaintext, transferred),
// "record", "drained", "error".

import { ownsBuffer } from "./bytes.js";
import { WormholeError } from "./errors.js";
import { Queue } from "./queue.js";
import { nobleBox } from "./records-box.js";
import { connectThroughRelay } from "./transit.js";

export const WINDOW = 4 * 1024 * 1024; // plaintext bytes posted but not yet written, or not yet taken
const SPARES = 8; // buffers given back and kept for reading into

// -- the worker's side

/**
 * Serves one transfer on `port`; `carried` counts what this worker sealed and opened; `box`
 * (or a promise of it) seals and opens the records (records-box.js).
 */
export function serveTransit(port, carried = { sent: 0, received: 0 }, box = nobleBox) {
  let pipe = null;
  let credit = WINDOW;
  let wake = null;
  let chain = Promise.resolve();
  let closed = false; // the page closed the port: what it queued before is dropped
  const post = (message, transfer = []) => port.postMessage(message, transfer);
  const fail = (err) => {
    if (closed) return;
    const kind = err instanceof WormholeError ? err.kind : "transit";
    post({ op: "error", kind, message: err?.message ?? String(err) });
    pipe?.close();
  };
  const ops = {
    async connect(m) {
      pipe = await connectThroughRelay({
        url: m.url,
        WebSocket: globalThis.WebSocket,
        WebSocketStream: m.streams ? (globalThis.WebSocketStream ?? null) : null,
        transitKey: m.transitKey,
        role: m.role,
        track: () => {},
        box: await box,
      });
      post({ op: "connected" });
    },
    async data(m) {
      const bytes = m.bytes.length;
      await pipe.sendData(m.bytes);
      carried.sent += bytes;
      const spare = pipe.spare(); // m.bytes' buffer, sealed: back to the page to read into
      post({ op: "sent", bytes, spare }, spare ? [spare] : []);
    },
    async stream(m) {
      for (let done = 0; done < m.limit; ) {
        while (credit <= 0) await new Promise((resolve) => (wake = resolve));
        const bytes = await pipe.receiveData(m.limit - done);
        done += bytes.length;
        credit -= bytes.length;
        carried.received += bytes.length;
        post({ op: "data", bytes }, [bytes.buffer]);
      }
    },
    async receive() {
      const record = await pipe.receive();
      post({ op: "record", bytes: record }, [record.buffer]);
    },
  };
  port.onmessage = ({ data: m }) => {
    if (m.op === "taken") {
      credit += m.bytes;
      wake?.();
      wake = null;
    } else if (m.op === "drain") {
      // not queued: the page asks once its records were written ("sent"), and a stream it
      // no longer takes (after a failure) must not hold this up
      pipe?.stream.drain(m.timeoutMs).then(() => post({ op: "drained" }));
    } else if (m.op === "close") {
      closed = true;
      pipe?.close();
      port.close();
    } else {
      // one at a time, in order (records' nonces count up); after a failure or a close, nothing more
      chain = chain.then(() => (closed ? undefined : ops[m.op](m))).catch((err) => {
        fail(err);
        chain = new Promise(() => {});
      });
    }
  };
}

/**
 * A worker's serving of every transfer the page gives it: {op: "port"} brings one transfer's
 * MessagePort, served by serveTransit with `box` and counted in `carried`.
 */
export function serveWorker(scope, box, carried = { sent: 0, received: 0 }) {
  scope.addEventListener("message", (event) => {
    if (event.data?.op === "port" && event.ports[0]) serveTransit(event.ports[0], carried, box);
  });
}

// -- the page's side

/**
 * Connects through the relay inside `worker` (a Worker running serveTransit on the ports it
 * is sent); resolves with a WorkerPipe once the peer is met, as connectThroughRelay does.
 */
export async function connectInWorker(worker, { url, WebSocketStream, transitKey, role, track }) {
  const channel = new MessageChannel();
  const pipe = new WorkerPipe(channel.port1);
  track(pipe);
  // a worker that could not start (its script failed to load) never answers: say so
  const broken = () => pipe.fail(new WormholeError("transit", "The page's transit worker did not start. Reload the page and try again."));
  worker.addEventListener("error", broken, { once: true });
  worker.postMessage({ op: "port" }, [channel.port2]);
  pipe.port.postMessage({ op: "connect", url, transitKey, role, streams: Boolean(WebSocketStream) });
  try {
    await pipe._next("connected");
  } finally {
    worker.removeEventListener("error", broken);
  }
  return pipe;
}

export class WorkerPipe {
  constructor(port) {
    this.port = port;
    this.stream = this; // what the session tracks and drains
    this.error = null;
    this.unsent = 0; // bytes posted, not yet written to the socket
    this.streaming = false;
    this.answers = new Queue(); // the worker's other messages, oldest first
    this.written = null; // resolves a wait for the worker's next "sent"
    this.spares = []; // buffers the worker gave back, for spare()
    port.onmessage = ({ data: m }) => {
      if (m.op === "sent") {
        this.unsent -= m.bytes;
        if (m.spare && this.spares.length < SPARES) this.spares.push(m.spare);
        this._written();
      } else if (m.op === "error") this.fail(new WormholeError(m.kind, m.message));
      else this.answers.push(m);
    };
  }

  fail(err) {
    if (this.error === null) this.error = err;
    this.answers.fail(this.error);
    this._written();
  }

  _written() {
    const wake = this.written;
    this.written = null;
    wake?.();
  }

  // Waits until at most `most` bytes posted are still unwritten.
  async _unsentAtMost(most) {
    while (this.unsent > most && !this.error) await new Promise((resolve) => (this.written = resolve));
    if (this.error) throw this.error;
  }

  // The worker's next message, which must be `op` (a failure comes first).
  async _next(op) {
    if (this.error) throw this.error;
    const m = await this.answers.take();
    if (this.error) throw this.error;
    if (m.op !== op) throw new WormholeError("protocol", `The transit worker answered ${m.op} where ${op} was expected.`);
    return m;
  }

  // A buffer the worker sealed and gave back, or null (see RecordPipe.spare).
  spare() {
    return this.spares.pop() ?? null;
  }

  // Hands `bytes` and its buffer to the worker (the caller may read into that buffer again
  // once spare() gives it back); waits only while more than WINDOW bytes are still
  // unwritten, so reading and sealing overlap.
  async sendData(bytes) {
    if (this.error) throw this.error;
    const owned = ownsBuffer(bytes) ? bytes : bytes.slice();
    this.unsent += owned.length; // counted before posting detaches it (its length is then 0)
    this.port.postMessage({ op: "data", bytes: owned }, [owned.buffer]);
    await this._unsentAtMost(WINDOW);
  }

  send(record) {
    return this.sendData(record);
  }

  async receive() {
    this.port.postMessage({ op: "receive" });
    return (await this._next("record")).bytes;
  }

  // Plaintext as the worker opens it, in pieces of up to BATCH_BYTES; `limit` is what is
  // still expected in all (the worker streams that much, up to WINDOW ahead of the page).
  async receiveData(limit) {
    if (!this.streaming) {
      this.streaming = true;
      this.port.postMessage({ op: "stream", limit });
    }
    const { bytes } = await this._next("data");
    this.port.postMessage({ op: "taken", bytes: bytes.length });
    return bytes;
  }

  // Waits (bounded) until what we sent has left the worker's socket, so closing does not
  // drop the tail (the ack).
  async drain(timeoutMs = 30000) {
    let timer;
    const late = new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    const drained = (async () => {
      await this._unsentAtMost(0);
      this.port.postMessage({ op: "drain", timeoutMs });
      await this.answers.take((m) => m.op === "drained");
    })().catch(() => {});
    await Promise.race([drained, late]);
    clearTimeout(timer);
  }

  close() {
    this.port.postMessage({ op: "close" });
    this.fail(new WormholeError("cancelled", "The connection to the transit relay was closed."));
    this.port.close();
  }
}

/** The relay connection for send() and receive(): in opts.transitWorker()'s Worker if given. */
export function connectTransit(opts, args) {
  const worker = opts.transitWorker?.();
  return worker ? connectInWorker(worker, { ...args, WebSocketStream: opts.WebSocketStream }) : connectThroughRelay({ ...args, WebSocket: opts.WebSocket, WebSocketStream: opts.WebSocketStream });
}
