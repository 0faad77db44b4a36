// The same client inside real headless Chromium, where the relay's bytes go over a
// WebSocketStream (back-pressure on receive): the wormhole CLI -> Chromium with a slow sink,
// and Chromium -> the CLI, sha256 equal. (Node has no WebSocketStream; the other interop
// tests cover the plain-WebSocket path.)

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { WEB_DIR } from "../testing/python.js";
import { startCli, startServer } from "../testing/servers.js";

const TIMEOUT = { timeout: 240_000 };
let server;
let work;

before(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), "webjs-chromium-test-"));
});

after(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

// Runs `expression` in Chromium; resolves with its outcome line. onCode(code) is called when
// the page sets globalThis.webjsCode.
function inChromium(expression, onCode = () => {}) {
  const child = spawn(process.execPath, ["--experimental-websocket", join(WEB_DIR, "testing/chromium.mjs"), JSON.stringify({ expression })], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (text) => {
    out += text;
    const line = out.split("\n").find((l) => l.includes('"event":"code"'));
    if (line && !child.codeSeen) {
      child.codeSeen = true;
      onCode(JSON.parse(line).code);
    }
  });
  return new Promise((resolve) =>
    child.on("exit", () => resolve(JSON.parse(out.trim().split("\n").filter((l) => !l.includes('"event":"code"')).pop() || "{}"))),
  );
}

const HEX = `(bytes) => [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")`;

const where = () => JSON.stringify({ mailboxUrl: server.mailboxUrl, transitUrl: server.transitUrl, tcpRelay: server.tcpRelay });
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

test("the CLI sends a file to Chromium, whose sink is slow: WebSocketStream, sha256 equal", TIMEOUT, async () => {
  const src = join(work, "to-chromium.bin");
  const data = randomBytes(6 * 1024 * 1024 + 5);
  writeFileSync(src, data);
  const cli = startCli([...server.cliArgs, "send", "--no-listen", "to-chromium.bin"], work);
  const [, code] = await cli.waitFor(/Wormhole code is: (\S+)/);
  const outcome = await inChromium(`(async () => {
    const chunks = [];
    let writes = 0;
    const result = await Wormhole.receive({ ...${where()}, code: ${JSON.stringify(code)},
      onOffer: async () => true,
      openSink: async () => ({
        write: async (bytes) => { chunks.push(bytes.slice()); writes++; await new Promise((r) => setTimeout(r, 20)); },
        close: async () => {}, abort: async () => {} }) });
    const hash = Wormhole.sha256.create();
    for (const c of chunks) hash.update(c);
    return { result, writes, streams: typeof WebSocketStream === "function", sha256: (${HEX})(hash.digest()) };
  })()`);
  assert.equal(outcome.event, "result", JSON.stringify(outcome));
  assert.equal(outcome.value.streams, true, "this Chromium has WebSocketStream");
  assert.deepEqual(outcome.value.result, { kind: "file", name: "to-chromium.bin", size: data.length });
  assert.equal(outcome.value.sha256, sha256(data));
  assert.equal((await cli.exited).code, 0, cli.seen.stderr);
  assert.match(cli.seen.stderr, /Confirmation received/);
});

test("Chromium sends a file (a Blob read in slices) to the CLI, sha256 equal", TIMEOUT, async () => {
  const out = join(work, "from-chromium");
  mkdirSync(out, { recursive: true });
  let cli = null;
  const outcome = await inChromium(`(async () => {
      const bytes = new Uint8Array(5 * 1024 * 1024 + 3);
      for (let at = 0; at < bytes.length; at += 65536) crypto.getRandomValues(bytes.subarray(at, at + 65536));
      const file = new File([bytes], "from-chromium.bin");
      const result = await Wormhole.send({ ...${where()}, file, onCode: (code) => (globalThis.webjsCode = code) });
      return { result, sha256: (${HEX})(Wormhole.sha256(bytes)) };
    })()`, (code) => {
    cli = startCli([...server.cliArgs, "receive", "--no-listen", "--accept-file", code], out);
  });
  assert.equal(outcome.event, "result", JSON.stringify(outcome));
  assert.deepEqual(outcome.value.result, { kind: "file", bytes: 5 * 1024 * 1024 + 3 });
  assert.ok(cli, "the page reported its code");
  assert.equal((await cli.exited).code, 0, cli.seen.stderr);
  assert.equal(sha256(readFileSync(join(out, "from-chromium.bin"))), outcome.value.sha256);
});
