// Receiving, as `wormhole receive` does in file-transfer v1: read the offer, let the person
// decide, then take the bytes from the relay record by record into the caller's sink (each
// write awaited, so a slow disk slows the transfer rather than filling memory), hash them,
// and acknowledge with the sha256 the sender checks.

import { concat, toHex, toJsonBytes } from "./bytes.js";
import { WormholeError } from "./errors.js";
import { fileHash } from "./file-hash.js";
import { checkOptions, withSession } from "./session.js";
import { transitMessage } from "./transit.js";
import { connectTransit } from "./worker-transit.js";

export async function receive(options) {
  const opts = checkOptions(options);
  if (typeof opts.code !== "string") throw new TypeError("receive() needs the code");
  return withSession(opts, async ({ wormhole, state, track, untrack }) => {
    await wormhole.setCode(opts.code);
    state("waiting");
    await wormhole.establish();
    const offer = await nextOffer(wormhole);
    if (offer.kind === "text") {
      wormhole.send({ answer: { message_ack: "ok" } });
      return { kind: "text", text: offer.text };
    }
    if (offer.kind === "unknown") {
      wormhole.tell("unknown offer type");
      throw new WormholeError("peer", "The other side offered something this page cannot receive.");
    }
    const accepted = await opts.onOffer?.(offer);
    if (!accepted) {
      wormhole.tell("transfer rejected");
      throw new WormholeError("declined", "You declined the transfer; nothing was received.");
    }
    state("transferring");
    const sink = await saving(() => opts.openSink(offer));
    wormhole.send({ transit: transitMessage(opts) });
    wormhole.send({ answer: { file_ack: "ok" } });
    let pipe = null;
    try {
      pipe = await connectTransit(opts, { url: opts.transitUrl, transitKey: wormhole.transitKey, role: "receiver", track });
      await receiveInto(pipe, sink, offer.size, opts.onProgress);
    } catch (err) {
      try {
        await sink.abort?.(err); // the partial file is the sink's to discard
      } catch {
        // the transfer's own error is the one to report
      }
      throw err;
    } finally {
      if (pipe) {
        untrack(pipe.stream);
        await pipe.stream.drain(5000);
        pipe.close();
      }
    }
    return { kind: offer.kind, name: offer.name, size: offer.size };
  });
}

// The sender's offer (its transit message, which comes first for files, is not needed: the
// sender meets us at our relay).
async function nextOffer(wormhole) {
  for (;;) {
    const message = await wormhole.receive();
    if ("error" in message) throw new WormholeError("peer", `The other side stopped: ${message.error}`);
    if (!("offer" in message)) continue;
    return parseOffer(message.offer);
  }
}

// The caller's sink failing (the download was cancelled in the browser, the disk is full)
// stops the transfer; the kinds have no "local" one, and it is most often a person's cancel.
async function saving(action) {
  try {
    return await action();
  } catch (err) {
    if (err instanceof WormholeError) throw err;
    throw new WormholeError("cancelled", `Saving the file failed (${err?.message ?? err}), so the transfer was stopped.`, { cause: err });
  }
}

export function parseOffer(offer) {
  if (typeof offer?.message === "string") return { kind: "text", text: offer.message };
  if (offer?.file) {
    return { kind: "file", name: safeName(offer.file.filename), size: sizeOf(offer.file.filesize) };
  }
  if (offer?.directory) {
    const d = offer.directory;
    return {
      kind: "directory",
      name: `${safeName(d.dirname)}.zip`,
      size: sizeOf(d.zipsize),
      numFiles: d.numfiles,
      numBytes: d.numbytes,
    };
  }
  return { kind: "unknown" };
}

// The name only: a sender must not choose where a file lands.
function safeName(name) {
  const base = String(name ?? "").split(/[\\/]/).pop().replace(/[\u0000-\u001f]/g, "");
  return base === "" || base === "." || base === ".." ? "received-file" : base;
}

function sizeOf(value) {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new WormholeError("protocol", "The other side offered a file with an impossible size.");
  }
  return value;
}

// Pieces of plaintext are gathered into writes of about this size: fewer, larger writes
// cost the sink (e.g. a service-worker stream) much less.
export const WRITE_BYTES = 1024 * 1024;

// The sink may take the buffer of what it is given (the pieces are ours alone).
export async function receiveInto(pipe, sink, total, onProgress) {
  const hash = await fileHash();
  let done = 0;
  let batch = [];
  let batched = 0;
  const flush = async () => {
    if (batched === 0) return;
    const chunk = batch.length === 1 ? batch[0] : concat(...batch);
    batch = [];
    batched = 0;
    await saving(() => sink.write(chunk));
  };
  onProgress?.({ done, total });
  while (done < total) {
    const piece = await pipe.receiveData(total - done);
    if (done + piece.length > total) {
      throw new WormholeError("transit", "The other side sent more bytes than it offered; the transfer was stopped.");
    }
    hash.update(piece);
    batch.push(piece);
    batched += piece.length;
    done += piece.length;
    if (batched >= WRITE_BYTES || done === total) await flush();
    onProgress?.({ done, total });
  }
  await saving(() => sink.close());
  await pipe.send(toJsonBytes({ ack: "ok", sha256: toHex(hash.digest()) }));
}
