// A slow sink in real Chromium: the wormhole CLI sends a file to the page, whose sink takes
// 40 ms per write (about 6 MiB/s), once with the relay bytes over a WebSocketStream (reads
// only when the sink is ready: back-pressure to the relay and the sender) and once over a
// plain WebSocket (the browser queues whatever arrives). Prints the page's peak memory (JS
// heap + array buffers after a collection, Runtime.getHeapUsage) and the time, side by
// side in one run.
// Run with node --experimental-websocket web/bench/receive_memory.mjs [MiB]

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WEB_DIR } from "../testing/python.js";
import { startCli, startServer } from "../testing/servers.js";

const mib = Number(process.argv[2] ?? 24);
const server = await startServer();
const work = mkdtempSync(join(tmpdir(), "webjs-bench-"));
writeFileSync(join(work, "slow.bin"), randomBytes(mib * 1024 * 1024));

function inChromium(expression) {
  const child = spawn(process.execPath, ["--experimental-websocket", join(WEB_DIR, "testing/chromium.mjs"), JSON.stringify({ expression, measure: true })], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (text) => (out += text));
  return new Promise((resolve) => child.on("exit", () => resolve(JSON.parse(out.trim().split("\n").pop()))));
}

try {
  for (const mode of ["WebSocketStream", "WebSocket"]) {
    const cli = startCli([...server.cliArgs, "send", "--no-listen", "--hide-progress", "slow.bin"], work);
    const [, code] = await cli.waitFor(/Wormhole code is: (\S+)/);
    const where = { mailboxUrl: server.mailboxUrl, transitUrl: server.transitUrl, tcpRelay: server.tcpRelay, code };
    const outcome = await inChromium(`(async () => {
      const started = performance.now();
      const result = await Wormhole.receive({ ...${JSON.stringify(where)},
        ${mode === "WebSocket" ? "WebSocketStream: null," : ""}
        onOffer: async () => true,
        openSink: async () => ({ write: () => new Promise((r) => setTimeout(r, 40)), close: async () => {}, abort: async () => {} }) });
      return { result, seconds: (performance.now() - started) / 1000 };
    })()`);
    await cli.exited;
    if (outcome.event !== "result") throw new Error(JSON.stringify(outcome));
    console.log(`${mode.padEnd(16)} ${mib} MiB, sink ~6 MiB/s: peak page memory ${(outcome.peakBytes / 1048576).toFixed(1)} MiB, ${outcome.value.seconds.toFixed(1)} s`);
  }
} finally {
  await server.stop();
  rmSync(work, { recursive: true, force: true });
}
