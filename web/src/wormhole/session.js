// What send() and receive() share: checking options, cancelling through an AbortSignal, and
// closing the mailbox with the right mood whatever happened.

import { WormholeError, cancelled } from "./errors.js";
import { Wormhole } from "./wormhole.js";

export const APPID = "lothar.com/wormhole/text-or-file-xfer";

export function checkOptions(opts) {
  if (!opts || typeof opts.mailboxUrl !== "string") {
    throw new TypeError("mailboxUrl (the ws:// or wss:// address of the mailbox) is required");
  }
  const WebSocket = opts.WebSocket ?? globalThis.WebSocket;
  if (typeof WebSocket !== "function") {
    throw new TypeError("no WebSocket: pass opts.WebSocket (Node 20: run with --experimental-websocket)");
  }
  // the relay's bytes go over a WebSocketStream where the runtime has one (back-pressure on
  // receive), unless the caller chose its own WebSocket or WebSocketStream (null: none)
  const WebSocketStream =
    opts.WebSocketStream !== undefined ? opts.WebSocketStream : opts.WebSocket ? null : (globalThis.WebSocketStream ?? null);
  return { ...opts, WebSocket, WebSocketStream, appid: opts.appid ?? APPID };
}

// Runs body(ctx) with a connected Wormhole; ctx.track(closable) registers things to close if
// cancelled. Resolves with body's result after closing the mailbox with the session's mood.
export async function withSession(opts, body) {
  const { signal } = opts;
  if (signal?.aborted) throw cancelled();
  const open = new Set();
  let wormhole = null;
  let stop = null;
  const aborted = new Promise((_, reject) => {
    stop = () => {
      const err = cancelled();
      // a peer that is already here is told, so it stops waiting too (the CLI exits)
      if (wormhole && wormhole.mood !== "happy") wormhole.tell("transfer cancelled");
      wormhole?.interrupt(err);
      for (const thing of open) thing.close();
      reject(err);
    };
  });
  aborted.catch(() => {});
  signal?.addEventListener("abort", stop, { once: true });
  const state = (name) => opts.onState?.(name);
  try {
    // while connecting, a cancel hangs the mailbox up; once connected, the session closes it
    let connecting = null;
    const track = (thing) => {
      connecting = thing;
      open.add(thing);
    };
    wormhole = await Promise.race([Wormhole.connect({ ...opts, track }), aborted]);
    open.delete(connecting);
    const ctx = {
      wormhole,
      state,
      aborted,
      track: (thing) => open.add(thing),
      untrack: (thing) => open.delete(thing),
    };
    const result = await Promise.race([body(ctx), aborted]);
    wormhole.mood = "happy";
    return result;
  } catch (err) {
    const error = toWormholeError(err);
    if (wormhole) {
      if (wormhole.mood === "happy") wormhole.mood = "errory";
      // our side failed (not the peer, not the code): say so, or the peer waits for us
      if (!["peer", "wrong-code", "declined"].includes(error.kind)) wormhole.tell(`transfer failed: ${error.message}`);
    }
    throw error;
  } finally {
    signal?.removeEventListener("abort", stop);
    for (const thing of open) thing.close();
    await wormhole?.close();
  }
}

function toWormholeError(err) {
  if (err instanceof WormholeError) return err;
  return new WormholeError("protocol", `Something unexpected went wrong: ${err?.message ?? err}. Try again.`, { cause: err });
}
