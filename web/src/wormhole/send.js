// Sending, as `wormhole send` does in file-transfer v1: the offer through the mailbox, then
// (for a file) its bytes through the relay in encrypted records, read from the Blob in slices
// so a file of any size never sits in memory whole, and checked by the receiver's sha256 ack
// against the file's own SHA-256, hashed from a read of its own while the sender waits.
// Several files or a folder go as the CLIs' `directory` offer: a zip built as it is read
// (folder.js), hashed and sent the same way.

import { toHex, utf8 } from "./bytes.js";
import { WormholeError, cancelled } from "./errors.js";
import { fileHash } from "./file-hash.js";
import { fileSlices } from "./file-slices.js";
import { checkReadable, zipFolder } from "./folder.js";
import { checkOptions, withSession } from "./session.js";
import { BATCH_BYTES, transitMessage } from "./transit.js";
import { connectTransit } from "./worker-transit.js";

export async function send(options) {
  const opts = checkOptions(options);
  if ([opts.text, opts.file, opts.folder].filter((what) => what !== undefined).length !== 1) {
    throw new TypeError("send() needs exactly one of text, file or folder ({name, files: [{path, file}]})");
  }
  // a folder is checked before a code is asked for: a file that cannot be read is named now
  if (opts.folder !== undefined) {
    await checkReadable(opts.folder.files);
    opts.file = zipFolder(opts.folder.name, opts.folder.files);
  }
  // the file's hash starts at once: a person has to pass the code on, and the hash is
  // mostly done by the time the receiver connects, so the transfer spends nothing on it
  const hashing = new AbortController();
  const digest = opts.file !== undefined ? fileDigest(opts.file, hashing.signal) : null;
  digest?.catch(() => {}); // looked at when the receiver's ack is in
  try {
    return await withSession(opts, async ({ wormhole, state, track, untrack }) => {
      const code = await wormhole.allocateCode();
      opts.onCode?.(code);
      state("waiting");
      await wormhole.establish();
      state("transferring");
      if (opts.text !== undefined) return sendText(wormhole, opts.text, opts);
      return sendFile(wormhole, opts, digest, track, untrack);
    });
  } finally {
    hashing.abort();
  }
}

// The bytes to send in slices: a Blob's, or a zip's (zipFolder()) as it is built.
const slicesOf = (what, spare) =>
  typeof what.slices === "function" ? what.slices(BATCH_BYTES, spare) : fileSlices(what, BATCH_BYTES, spare);

/** The hex SHA-256 of `file` (a Blob or a zipFolder()), read in slices; stops (rejects) once `signal` is aborted. */
export async function fileDigest(file, signal) {
  const hash = await fileHash();
  const done = []; // buffers hashed, to read into again
  for await (const slice of slicesOf(file, () => done.pop() ?? null)) {
    if (signal?.aborted) throw cancelled();
    hash.update(slice);
    done.push(slice.buffer);
  }
  return toHex(hash.digest());
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

async function sendFile(wormhole, opts, digest, track, untrack) {
  const { file } = opts;
  wormhole.send({ transit: transitMessage(opts) });
  wormhole.send({ offer: file.kind === "directory" ? file.offer() : { file: { filename: file.name ?? "file", filesize: file.size } } });
  // meet the peer at the relay while it decides (the session closes the socket if it declines)
  const connect = () => connectTransit(opts, { url: opts.transitUrl, transitKey: wormhole.transitKey, role: "sender", track });
  const early = connect();
  early.catch(() => {}); // looked at once the answer is in
  await expectAnswer(wormhole, "file_ack");
  // a person who took longer than the relay lets a lonely connection wait: connect again
  const pipe = await early.catch((err) => (opts.signal?.aborted ? Promise.reject(err) : connect()));
  try {
    return await sendFileOver(pipe, file, digest, opts.onProgress);
  } finally {
    untrack(pipe.stream);
    pipe.close();
  }
}

/**
 * The file's bytes into `pipe` in slices, then the receiver's ack, whose sha256 (optional in
 * file-transfer v1) must equal `digest` (a promise of the file's hex SHA-256).
 */
export async function sendFileOver(pipe, file, digest, onProgress) {
  const total = file.size;
  let done = 0;
  onProgress?.({ done, total });
  // the pipe takes each slice's buffer, and gives it back once sealed (spare())
  for await (const slice of slicesOf(file, () => pipe.spare?.() ?? null)) {
    done += slice.length;
    await pipe.sendData(slice);
    onProgress?.({ done, total });
  }
  if (done < total) throw new WormholeError("transit", "The file got shorter while it was being sent. Send it again.");
  const ack = JSON.parse(new TextDecoder().decode(await pipe.receive()));
  if (ack.ack !== "ok") throw new WormholeError("peer", "The other side did not confirm it got the file.");
  if (ack.sha256 !== undefined && ack.sha256 !== (await digest)) {
    throw new WormholeError("transit", "The file arrived damaged, or changed while it was being sent (its checksum differs). Send it again.");
  }
  return { kind: file.kind === "directory" ? "directory" : "file", bytes: total };
}
