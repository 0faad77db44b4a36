// One wormhole session on top of the mailbox: the code, SPAKE2, the version exchange that
// proves both typed the same code, and the numbered encrypted phases "0", "1", ... that the
// file-transfer messages travel in.

import { fromHex, fromJsonBytes, randomBytes, toHex, toJsonBytes, utf8 } from "./bytes.js";
import { WormholeError } from "./errors.js";
import { derivePhaseKey, deriveTransitKey, open, seal } from "./keys.js";
import { Mailbox } from "./mailbox.js";
import { Spake2Symmetric } from "./spake2.js";
import { chooseWords } from "./words.js";

// a code as typed: the nameplate number, a dash, then the words (e.g. "7-guitarist-revenge")
export const CODE = /^(\d+)-(\S+)$/;

export const WRONG_CODE_MESSAGE =
  "The code was wrong: the other side typed a different code, so nothing was sent. " +
  "Check the code and try again (a new code is needed).";

export class Wormhole {
  constructor(mailbox, appid) {
    this.mailbox = mailbox;
    this.appid = appid;
    this.side = mailbox.side;
    this.key = null;
    this.peerSide = null;
    this.sentPhases = 0;
    this.receivedPhases = 0;
    this.mood = "lonely"; // what close() tells the server unless something else happened
    this.toldPeer = false;
  }

  static async connect({ mailboxUrl, appid, WebSocket, track }) {
    // the CLI's side ids are 5 random bytes in hex
    const side = toHex(randomBytes(5));
    const mailbox = await Mailbox.connect(mailboxUrl, { WebSocket, side, appid, track });
    return new Wormhole(mailbox, appid);
  }

  // Sender: a fresh nameplate and two words, e.g. "7-guitarist-revenge".
  async allocateCode() {
    const nameplate = await this.mailbox.allocate();
    const code = `${nameplate}-${chooseWords(2)}`;
    await this._useCode(code);
    return code;
  }

  // Receiver: the code the person typed.
  async setCode(code) {
    const clean = String(code).trim().toLowerCase();
    if (!CODE.test(clean)) {
      throw new WormholeError(
        "no-such-code",
        `"${code}" is not a wormhole code: a code is a number and words joined by dashes, like 7-guitarist-revenge.`,
      );
    }
    await this._useCode(clean);
  }

  async _useCode(code) {
    const nameplate = code.match(CODE)[1];
    const mailboxId = await this.mailbox.claim(nameplate);
    this.mailbox.open(mailboxId);
    this.spake = new Spake2Symmetric(utf8(code), utf8(this.appid));
    this.mailbox.add("pake", toJsonBytes({ pake_v1: toHex(this.spake.start()) }));
  }

  // Waits for the peer; resolves once both are shown to hold the same key. A wrong code
  // rejects with kind "wrong-code" (the peer sees the same: its version does not decrypt).
  async establish() {
    const pake = await this.mailbox.receive("pake");
    this.peerSide = pake.side;
    this.mood = "errory";
    let message;
    try {
      message = fromHex(fromJsonBytes(pake.body).pake_v1);
    } catch {
      this.mood = "scary";
      throw new WormholeError("protocol", "The other side's key exchange message was malformed; no data was sent.");
    }
    try {
      this.key = this.spake.finish(message);
    } catch (err) {
      this.mood = "scary";
      throw new WormholeError("protocol", `The key exchange failed (${err.message}); no data was sent. Try again with a new code.`);
    }
    this._add("version", { app_versions: {} });
    const version = await this.mailbox.receive("version");
    try {
      this.peerVersion = fromJsonBytes(open(derivePhaseKey(this.key, version.side, "version"), version.body));
    } catch {
      this.mood = "scary";
      throw new WormholeError("wrong-code", WRONG_CODE_MESSAGE);
    }
    // the code has done its job: free the nameplate for others, as the CLI does
    this.mailbox.release();
  }

  get transitKey() {
    return deriveTransitKey(this.key);
  }

  _add(phase, value) {
    this.mailbox.add(phase, seal(derivePhaseKey(this.key, this.side, phase), toJsonBytes(value)));
  }

  // The next application message to the peer (phases "0", "1", ...).
  send(value) {
    this._add(String(this.sentPhases++), value);
  }

  // The peer's next application message, decrypted and parsed.
  async receive() {
    const phase = String(this.receivedPhases++);
    const { side, body } = await this.mailbox.receive(phase);
    try {
      return fromJsonBytes(open(derivePhaseKey(this.key, side, phase), body));
    } catch {
      throw new WormholeError("protocol", `The other side's message ${phase} could not be decrypted or read.`);
    }
  }

  // Tell the peer (once) why we stop, so it does not wait for us: the CLIs print it and exit.
  tell(error) {
    if (this.toldPeer || this.key === null) return;
    this.toldPeer = true;
    this.send({ error });
  }

  // Stop waiting on the mailbox at once (cancel): pending receives reject with `err`.
  interrupt(err) {
    this.mailbox.frames.fail(err);
  }

  async close(mood = this.mood) {
    await this.mailbox.close(mood);
  }
}
