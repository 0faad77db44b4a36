// The key schedule, the SecretBox and transit's handshakes and record nonces, each against
// magic-wormhole's own functions (wormhole._key, wormhole.transit) and PyNaCl.

import assert from "node:assert/strict";
import { test } from "node:test";
import { deriveKey, derivePhaseKey, deriveTransitKey, deriveVerifier, open, seal } from "../src/wormhole/keys.js";
import { RECORD_BYTES, RecordPipe, receiverHandshake, recordNonce, relayHandshake, senderHandshake } from "../src/wormhole/transit.js";
import { hex, python, unhex } from "../testing/python.js";
import sodium from "libsodium";
import { loadBox, nobleBox } from "../src/wormhole/records-box.js";

const KEY = unhex("00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978");
const utf8 = (text) => new TextEncoder().encode(text);

test("phase keys equal wormhole._key.derive_phase_key (sides and phases)", () => {
  const cases = [
    ["a1b2c3d4e5", "pake"],
    ["a1b2c3d4e5", "version"],
    ["0f0f0f0f0f", "0"],
    ["0f0f0f0f0f", "1"],
    ["ffffffffff", "17"],
  ];
  const py = python(`
import json, sys
from wormhole._key import derive_phase_key
key = bytes.fromhex("${hex(KEY)}")
print(json.dumps([derive_phase_key(key, side, phase).hex() for side, phase in ${JSON.stringify(cases)}]))`);
  cases.forEach(([side, phase], i) => assert.equal(hex(derivePhaseKey(KEY, side, phase)), py[i]));
  // and they differ by side and by phase
  assert.notEqual(py[0], py[1]);
  assert.notEqual(py[2], py[3]);
});

test("derive_key, the verifier and the transit key equal magic-wormhole's", () => {
  const py = python(`
import json
from wormhole._key import derive_key
key = bytes.fromhex("${hex(KEY)}")
print(json.dumps({
  "verifier": derive_key(key, b"wormhole:verifier").hex(),
  "transit": derive_key(key, b"lothar.com/wormhole/text-or-file-xfer/transit-key", 32).hex(),
  "short": derive_key(key, b"some purpose", 16).hex(),
}))`);
  assert.equal(hex(deriveVerifier(KEY)), py.verifier);
  assert.equal(hex(deriveTransitKey(KEY)), py.transit);
  assert.equal(hex(deriveKey(KEY, "some purpose", 16)), py.short);
});

test("SecretBox: JS-sealed opens in Python (encrypt_data/decrypt_data) and back", () => {
  const plain = utf8('{"app_versions": {}}');
  const box = seal(KEY, plain);
  const py = python(`
import json, sys
from wormhole._key import decrypt_data, encrypt_data
key = bytes.fromhex("${hex(KEY)}")
box = bytes.fromhex(json.load(sys.stdin))
print(json.dumps({"opened": decrypt_data(key, box).decode(), "sealed": encrypt_data(key, b"from python").hex()}))`, hex(box));
  assert.equal(py.opened, '{"app_versions": {}}');
  assert.equal(new TextDecoder().decode(open(KEY, unhex(py.sealed))), "from python");
  const damaged = unhex(py.sealed);
  damaged[30] ^= 1;
  assert.throws(() => open(KEY, damaged));
  assert.throws(() => open(deriveVerifier(KEY), unhex(py.sealed)));
});

test("transit handshakes equal wormhole.transit's", () => {
  const side = "0123456789abcdef";
  const py = python(`
import json
from wormhole import transit
key = bytes.fromhex("${hex(KEY)}")
print(json.dumps([transit.build_sided_relay_handshake(key, "${side}").decode(),
                  transit.build_sender_handshake(key).decode(),
                  transit.build_receiver_handshake(key).decode()]))`);
  const text = (b) => new TextDecoder().decode(b);
  assert.equal(text(relayHandshake(KEY, side)), py[0]);
  assert.equal(text(senderHandshake(KEY)), py[1]);
  assert.equal(text(receiverHandshake(KEY)), py[2]);
});

test("record nonces are big-endian counters, as Python writes them", () => {
  const counts = [0, 1, 255, 256, 65537, 2 ** 32 + 3, Number.MAX_SAFE_INTEGER];
  const py = python(`
import json
from binascii import unhexlify
print(json.dumps([unhexlify(f"{n:048x}").hex() for n in ${JSON.stringify(counts)}]))`);
  counts.forEach((n, i) => assert.equal(hex(recordNonce(n)), py[i], `record ${n}`));
  assert.equal(hex(recordNonce(1)), "00".repeat(23) + "01");
});

// A fake stream standing in for the socket: what one pipe writes, the other reads.
class Loop {
  constructor() {
    this.bytes = [];
  }
  async write(b) {
    this.writes = (this.writes ?? 0) + 1;
    for (const x of b) this.bytes.push(x);
  }
  written() {
    return Promise.resolve();
  }
  async read(n) {
    if (this.bytes.length < n) throw new Error("short");
    return Uint8Array.from(this.bytes.splice(0, n));
  }
  get buffered() {
    return this.bytes.length;
  }
}

// Python's transit code opens the records `box` seals and we open Python's, in order.
async function recordsAgainstPython(box) {
  const tk = deriveTransitKey(KEY);
  const wire = new Loop();
  const senderKey = deriveKey(tk, "transit_record_sender_key");
  const receiverKey = deriveKey(tk, "transit_record_receiver_key");
  const ours = new RecordPipe(wire, senderKey, receiverKey, box);
  await ours.send(utf8("record zero"));
  await ours.send(utf8("record one"));
  // bulk data: records of RECORD_BYTES (the last one shorter), all in one write
  const bulk = ["x".repeat(RECORD_BYTES), "y".repeat(RECORD_BYTES), "zzzzz"];
  await ours.sendData(utf8(bulk.join("")));
  assert.equal(wire.writes, 3);
  const py = python(`
import json, sys
from binascii import unhexlify
from twisted.internet import reactor
from wormhole import transit
from nacl.secret import SecretBox
tk = bytes.fromhex("${hex(tk)}")
receiver = transit.TransitReceiver(None, no_listen=True, reactor=reactor)
receiver.set_transit_key(tk)
wire = bytes.fromhex(json.load(sys.stdin))
got = []
# the sender's records, opened with the key Python's receiver uses for what it receives
box = SecretBox(receiver._receiver_record_key())
n = 0
while wire:
    length = int(wire[:4].hex(), 16)
    record, wire = wire[4:4 + length], wire[4 + length:]
    assert record[:24] == unhexlify(f"{n:048x}"), "nonce"
    got.append(box.decrypt(record).decode())
    n += 1
reply = SecretBox(receiver._sender_record_key()).encrypt(b'{"ack": "ok"}', unhexlify(f"{0:048x}"))
print(json.dumps({"got": got, "reply": (len(reply).to_bytes(4, "big") + reply).hex()}))`, hex(Uint8Array.from(wire.bytes)));
  assert.deepEqual(py.got, ["record zero", "record one", ...bulk]);
  wire.bytes = [...unhex(py.reply)];
  assert.equal(new TextDecoder().decode(await ours.receive()), '{"ack": "ok"}');
  // a replayed record (nonce 0 again) is refused
  wire.bytes = [...unhex(py.reply)];
  await assert.rejects(ours.receive(), /out of order/);
}

test("records (@noble/ciphers): Python's transit Connection decrypts ours and we decrypt Python's, in order", () =>
  recordsAgainstPython(nobleBox));

test("records (libsodium's WebAssembly, as in the page's worker): the same with Python", async () => {
  const box = await loadBox(sodium);
  assert.equal(box.name, "libsodium");
  await recordsAgainstPython(box);
});

test("sending: frames are sealed into again only once the stream is done with their bytes", async () => {
  // a stream that, like a WebSocketStream, holds each chunk until its write settles (here:
  // when the test says), and only then takes its bytes
  const held = [];
  const taken = [];
  const stream = {
    last: Promise.resolve(),
    async write(chunk) {
      let settle;
      this.last = new Promise((resolve) => (settle = resolve));
      held.push({ chunk, settle });
    },
    written() {
      return this.last;
    },
  };
  const tk = deriveTransitKey(KEY);
  const sendKey = deriveKey(tk, "transit_record_sender_key");
  const pipe = new RecordPipe(stream, sendKey, deriveKey(tk, "transit_record_receiver_key"));
  const pieces = Array.from({ length: 9 }, (_, n) => new Uint8Array(RECORD_BYTES * 2 + 5).fill(n));
  const frames = new Set();
  let writes = 0;
  for (const piece of pieces) {
    let sent = false;
    const sending = pipe.sendData(piece).then(() => (sent = true));
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (writes >= 4) {
      assert.equal(sent, false, "a frame was reused before its write settled");
      const oldest = held.find((h) => !h.done);
      taken.push(oldest.chunk.slice()); // the stream takes the bytes, then settles
      oldest.done = true;
      oldest.settle();
    }
    await sending;
    writes++;
    frames.add(held.at(-1).chunk.buffer);
    assert.equal(pipe.spare(), piece.buffer, "the sealed bytes' buffer is given back");
    assert.equal(pipe.spare(), null);
  }
  for (const h of held.filter((h) => !h.done)) taken.push(h.chunk.slice());
  assert.equal(frames.size, 4, "frames were not reused");
  // every frame, as taken, opens to its piece: none was overwritten while held
  taken.forEach((frame, n) => {
    for (let r = 0, at = 0; r < 3; r++) {
      const length = new DataView(frame.buffer).getUint32(at);
      const record = frame.subarray(at + 4, at + 4 + length);
      assert.deepEqual(record.subarray(0, 24), recordNonce(n * 3 + r));
      const plain = open(sendKey, record);
      assert.ok(plain.every((b) => b === n), `frame ${n} record ${r} is another piece's`);
      at += 4 + length;
    }
  });
});

test("receiving: sink writes are awaited one at a time, batched, and hashed into the ack", async () => {
  const { receiveInto, WRITE_BYTES } = await import("../src/wormhole/receive.js");
  const tk = deriveTransitKey(KEY);
  const wire = new Loop();
  const senderKey = deriveKey(tk, "transit_record_sender_key");
  const receiverKey = deriveKey(tk, "transit_record_receiver_key");
  const sender = new RecordPipe(wire, senderKey, receiverKey);
  const data = Uint8Array.from({ length: 700_000 }, (_, i) => (i * 31) & 0xff);
  for (let at = 0; at < data.length; at += 16384) await sender.send(data.subarray(at, at + 16384));
  const receiver = new RecordPipe(wire, receiverKey, senderKey);
  let writing = 0;
  let most = 0;
  const writes = [];
  const sink = {
    async write(chunk) {
      writing++;
      most = Math.max(most, writing);
      writes.push(chunk.slice());
      await new Promise((resolve) => setTimeout(resolve, 5)); // a slow disk
      writing--;
    },
    async close() {},
  };
  const progress = [];
  await receiveInto(receiver, sink, data.length, (p) => progress.push(p.done));
  assert.equal(most, 1, "a write started before the previous one finished");
  assert.ok(writes.every((w) => w.length <= WRITE_BYTES + 16384));
  assert.ok(writes.length < data.length / 16384, "records were gathered into larger writes");
  const joined = new Uint8Array(data.length);
  let at = 0;
  for (const w of writes) {
    joined.set(w, at);
    at += w.length;
  }
  assert.deepEqual(joined, data);
  assert.equal(progress.at(-1), data.length);
  const ack = JSON.parse(new TextDecoder().decode(await sender.receive()));
  const py = python(`
import hashlib, json, sys
print(json.dumps(hashlib.sha256(bytes.fromhex(json.load(sys.stdin))).hexdigest()))`, hex(data));
  assert.deepEqual(ack, { ack: "ok", sha256: py });
});

test("sending: the file's own hash, read apart from the transfer, checks the receiver's ack", async () => {
  const { fileDigest, sendFileOver } = await import("../src/wormhole/send.js");
  const data = Uint8Array.from({ length: 2_500_000 }, (_, i) => (i * 7) & 0xff);
  const file = new Blob([data]);
  const right = python(`
import hashlib, json, sys
print(json.dumps(hashlib.sha256(bytes.fromhex(json.load(sys.stdin))).hexdigest()))`, hex(data));
  assert.equal(await fileDigest(file), right);
  // a pipe whose receiver got every byte and answers `ack` (records are tested above)
  const transfer = async (ack) => {
    const sent = [];
    const pipe = {
      async sendData(bytes) {
        sent.push(bytes.slice());
      },
      async receive() {
        return utf8(JSON.stringify(ack));
      },
    };
    const result = await sendFileOver(pipe, file, fileDigest(file), () => {});
    assert.deepEqual(new Uint8Array(await new Blob(sent).arrayBuffer()), data);
    return result;
  };
  assert.deepEqual(await transfer({ ack: "ok", sha256: right }), { kind: "file", bytes: data.length });
  assert.deepEqual(await transfer({ ack: "ok" }), { kind: "file", bytes: data.length }); // optional
  await assert.rejects(transfer({ ack: "ok", sha256: "00".repeat(32) }), /checksum differs/);
  // a hash that was stopped (the send was cancelled) never passes
  const stop = new AbortController();
  stop.abort();
  await assert.rejects(fileDigest(file, stop.signal), /cancelled/);
});
