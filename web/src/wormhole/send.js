// Sending, as `wormhole send` does in file-transfer v1: the offer through the mailbox, then
// (for a file) its bytes through the relay in encrypted records, read from the Blob in slices
// so a file of any size never sits in memory whole, and checked by the receiver's sha256 ack.

import { SHA256 } from "@stablelib/sha256";
import { toHex, utf8 } from "./bytes.js";
import { WormholeError } from "./errors.js";
import { checkOptions, withSession } from "./session.js";
import { BATCH_BYTES, transitMessage } from "./transit.js";
import { connectTransit } from "./worker-transit.js";

export async function send(options) {
  const opts = checkOptions(options);
  if ((opts.text === undefined) === (opts.file === undefined)) {
    throw new TypeError("send() needs exactly one of text or file");
  }
  return withSession(opts, async ({ wormhole, state, track, untrack }) => {
    const code = await wormhole.allocateCode();
    opts.onCode?.(code);
    state("waiting");
    await wormhole.establish();
    state("transferring");
    if (opts.text !== undefined) return sendText(wormhole, opts.text, opts);
    return sendFile(wormhole, opts, track, untrack);
  });
}

async function sendText(wormhole, text, opts) {
  wormhole.send({ offer: { message: text } });
  await expectAnswer(wormhole, "message_ack");
  const bytes = utf8(text).length;
  opts.onProgress?.({ done: bytes, total: bytes });
  return { kind: "text", bytes };
}

// The peer's answer, skipping its transit message (which only says how to reach it).
async function expectAnswer(wormhole, ack) {
  for (;;) {
    const message = await wormhole.receive();
    if ("transit" in message) continue;
    if ("error" in message) {
      const why = String(message.error);
      if (/reject/i.test(why)) {
        throw new WormholeError("declined", "The other side declined the transfer.");
      }
      throw new WormholeError("peer", `The other side stopped: ${why}`);
    }
    if (message.answer?.[ack] === "ok") return;
    if ("answer" in message) {
      throw new WormholeError("peer", `The other side answered ${JSON.stringify(message.answer)} instead of accepting.`);
    }
  }
}

async function sendFile(wormhole, opts, track, untrack) {
  const { file } = opts;
  const total = file.size;
  wormhole.send({ transit: transitMessage(opts) });
  wormhole.send({ offer: { file: { filename: file.name ?? "file", filesize: total } } });
  // meet the peer at the relay while it decides (the session closes the socket if it declines)
  const connect = () => connectTransit(opts, { url: opts.transitUrl, transitKey: wormhole.transitKey, role: "sender", track });
  const early = connect();
  early.catch(() => {}); // looked at once the answer is in
  await expectAnswer(wormhole, "file_ack");
  // a person who took longer than the relay lets a lonely connection wait: connect again
  const pipe = await early.catch((err) => (opts.signal?.aborted ? Promise.reject(err) : connect()));
  try {
    // the file's checksum: @stablelib's SHA-256 runs about 2.5x as fast as @noble's in
    // Chromium, and this is the page's largest per-byte cost
    const hash = new SHA256();
    const read = (at) => file.slice(at, Math.min(total, at + BATCH_BYTES)).arrayBuffer();
    let done = 0;
    let next = total > 0 ? read(0) : null;
    opts.onProgress?.({ done, total });
    while (done < total) {
      const slice = new Uint8Array(await next);
      if (slice.length === 0) throw new WormholeError("transit", "The file got shorter while it was being sent.");
      done += slice.length;
      next = done < total ? read(done) : null; // the next slice is read while this one is sent
      next?.catch(() => {}); // looked at on the next turn
      hash.update(slice);
      await pipe.sendData(slice); // may take the slice's buffer (a worker's pipe does)
      opts.onProgress?.({ done, total });
    }
    const ack = JSON.parse(new TextDecoder().decode(await pipe.receive()));
    if (ack.ack !== "ok") throw new WormholeError("peer", "The other side did not confirm it got the file.");
    if (ack.sha256 !== undefined && ack.sha256 !== toHex(hash.digest())) {
      throw new WormholeError("transit", "The file arrived damaged (its checksum differs). Send it again.");
    }
    return { kind: "file", bytes: total };
  } finally {
    untrack(pipe.stream);
    pipe.close();
  }
}
