// One error type for everything the page may show: `kind` lets the page react (e.g. offer a
// new code on "wrong-code"), `message` is written for the person using the page.

export const KINDS = [
  "wrong-code",
  "declined",
  "cancelled",
  "no-such-code",
  "server",
  "transit",
  "peer",
  "protocol",
  "input", // what the person gave cannot be sent (a folder with an unreadable file, say)
];

export class WormholeError extends Error {
  constructor(kind, message, options) {
    super(message, options);
    if (!KINDS.includes(kind)) throw new TypeError(`unknown WormholeError kind ${kind}`);
    this.name = "WormholeError";
    this.kind = kind;
  }
}

export const cancelled = () =>
  new WormholeError("cancelled", "The transfer was cancelled. Start again when you are ready.");
