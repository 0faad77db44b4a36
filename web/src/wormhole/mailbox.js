// The mailbox (rendezvous) server protocol over a WebSocket: welcome (and hashcash when the
// server asks), bind, allocate/claim a nameplate, open the mailbox, add messages, release,
// close. The server echoes our own messages back, so messages are filtered by side.

import { fromHex, toHex } from "./bytes.js";
import { WormholeError } from "./errors.js";
import { mintHashcashAsync } from "./hashcash.js";
import { Queue } from "./queue.js";

// sent in `bind` as client_version, so an operator's usage figures can tell the page apart
export const VERSION = "0.1.0";
const CLIENT_VERSION = ["pigeonhole-web", VERSION];
const CLOSE_TIMEOUT_MS = 5000;

const serverError = (what) =>
  new WormholeError("server", `${what} Try again; if it keeps happening, the server may be down.`);

export class Mailbox {
  // Use Mailbox.connect(); the constructor only wires the socket's events to the queue.
  constructor(ws, side) {
    this.ws = ws;
    this.side = side;
    this.frames = new Queue();
    this.mailboxId = null;
    this.nameplate = null;
    this.closedByUs = false;
    ws.addEventListener("message", (event) => this._onFrame(event.data));
    ws.addEventListener("close", (event) => {
      if (this.closedByUs) return this.frames.fail(serverError("The mailbox connection was closed."));
      const why = event.reason ? ` (${event.reason})` : "";
      this.frames.fail(serverError(`The mailbox server closed the connection${why}.`));
    });
    ws.addEventListener("error", () => {
      this.frames.fail(serverError("The connection to the mailbox server failed."));
    });
  }

  // `track(closable)` gets the mailbox at once, so a cancel can hang up while connecting.
  static async connect(url, { WebSocket, side, appid, track = () => {} }) {
    let ws;
    try {
      ws = new WebSocket(url);
    } catch (err) {
      throw new WormholeError("server", `The mailbox address ${url} is not usable: ${err.message}`);
    }
    const mailbox = new Mailbox(ws, side);
    mailbox.appid = appid;
    track({ close: () => mailbox.hangUp() });
    try {
      const welcome = await mailbox.frames.take((f) => f.type === "welcome");
      await mailbox._admit(welcome.welcome ?? {});
    } catch (err) {
      mailbox.hangUp();
      throw err;
    }
    mailbox.send({ type: "bind", appid: mailbox.appid, side, client_version: CLIENT_VERSION });
    return mailbox;
  }

  _onFrame(data) {
    let frame;
    try {
      frame = JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data));
    } catch {
      return this.frames.fail(new WormholeError("protocol", "The mailbox server sent something that is not JSON."));
    }
    if (frame.type === "ack" || frame.type === "pong") return;
    if (frame.type === "message" && frame.side === this.side) return; // our own echo
    if (frame.type === "error") {
      const what = frame.orig?.type ? ` to "${frame.orig.type}"` : "";
      if (frame.error === "crowded") {
        return this.frames.fail(
          new WormholeError(
            "no-such-code",
            "This code is already being used by two other people. Ask for a new code.",
          ),
        );
      }
      return this.frames.fail(serverError(`The mailbox server refused${what}: ${frame.error}.`));
    }
    this.frames.push(frame);
  }

  send(frame) {
    if (this.ws.readyState !== 1) return; // closing: the queue reports why
    this.ws.send(JSON.stringify({ ...frame, id: toHex(globalThis.crypto.getRandomValues(new Uint8Array(2))) }));
  }

  // The welcome may carry an operator's error, or ask for permission before bind.
  async _admit(welcome) {
    if (welcome.error) {
      throw new WormholeError("server", `The mailbox server says: ${welcome.error}`);
    }
    const required = welcome["permission-required"];
    if (!required || "none" in required) return;
    if (!("hashcash" in required)) {
      const offered = Object.keys(required).join(", ");
      throw new WormholeError("server", `The mailbox server asks for a permission this page cannot give (${offered}).`);
    }
    const { bits, resource } = required.hashcash;
    const stamp = await mintHashcashAsync(resource, bits);
    this.send({ type: "submit-permissions", method: "hashcash", stamp });
  }

  async allocate() {
    this.send({ type: "allocate" });
    const frame = await this.frames.take((f) => f.type === "allocated");
    return frame.nameplate;
  }

  async claim(nameplate) {
    this.nameplate = nameplate;
    this.send({ type: "claim", nameplate });
    const frame = await this.frames.take((f) => f.type === "claimed");
    return frame.mailbox;
  }

  open(mailboxId) {
    this.mailboxId = mailboxId;
    this.send({ type: "open", mailbox: mailboxId });
  }

  add(phase, body) {
    this.send({ type: "add", phase, body: toHex(body) });
  }

  // The peer's message of this phase: {side, body (bytes)}.
  async receive(phase) {
    const frame = await this.frames.take((f) => f.type === "message" && f.phase === phase);
    try {
      return { side: frame.side, body: fromHex(frame.body) };
    } catch {
      throw new WormholeError("protocol", `The other side's "${phase}" message was not hex.`);
    }
  }

  // Best effort: a failed release is not worth failing a finished transfer for.
  async release() {
    if (this.nameplate === null) return;
    const nameplate = this.nameplate;
    this.nameplate = null;
    this.send({ type: "release", nameplate });
    await withTimeout(this.frames.take((f) => f.type === "released"), CLOSE_TIMEOUT_MS).catch(() => {});
  }

  // Tell the server how it went (the mood counts in its usage figures), then hang up.
  async close(mood) {
    try {
      if (this.mailboxId !== null && this.ws.readyState === 1) {
        this.send({ type: "close", mailbox: this.mailboxId, mood });
        await withTimeout(this.frames.take((f) => f.type === "closed"), CLOSE_TIMEOUT_MS).catch(() => {});
      }
    } finally {
      this.hangUp();
    }
  }

  hangUp() {
    this.closedByUs = true;
    if (this.ws.readyState === 0 || this.ws.readyState === 1) this.ws.close(1000);
    this.frames.fail(serverError("The mailbox connection was closed."));
  }
}

export function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("timed out")), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
