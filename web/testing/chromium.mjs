// Runs the JS client inside real headless Chromium (Debian's), driven over the DevTools
// protocol: the modules are bundled with esbuild into the page, then one async expression
// (a send or receive) is evaluated there and its JSON result printed. Run by node with
// --experimental-websocket (for the DevTools socket): chromium.mjs '{"expression": "...",
// "measure": false}'.
// Prints JSON lines: {"event": "code"} when the page sets globalThis.webjsCode, then
// {"event": "result", value, peakBytes} or {"event": "error", message}.

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { WEB_DIR } from "./python.js";

const { expression, measure = false } = JSON.parse(process.argv[2]);
const profile = mkdtempSync(join(tmpdir(), "webjs-chromium-"));
const browser = spawn(
  "chromium",
  ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", `--user-data-dir=${profile}`, "--remote-debugging-port=0", "about:blank"],
  { stdio: "ignore" },
);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

try {
  let port = null;
  for (let i = 0; i < 900 && port === null; i++) {
    try {
      port = readFileSync(join(profile, "DevToolsActivePort"), "utf8").split("\n")[0];
    } catch {
      await sleep(100);
    }
  }
  if (!port) throw new Error("Chromium did not start its DevTools listener");
  let page = null;
  for (let i = 0; i < 100 && !page; i++) {
    const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
    page = targets.find((t) => t.type === "page");
    if (!page) await sleep(100);
  }
  const ws = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (event) => {
    const reply = JSON.parse(event.data);
    if (pending.has(reply.id)) {
      pending.get(reply.id)(reply);
      pending.delete(reply.id);
    }
  };
  const call = (method, params) =>
    new Promise((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  // the client, plus @noble/hashes' sha256 for the test's own checks (about:blank is not a
  // secure context, so crypto.subtle is absent there)
  const bundle = await build({
    stdin: {
      contents: 'export * from "./src/wormhole/index.js"; export { sha256 } from "@noble/hashes/sha2.js";',
      resolveDir: WEB_DIR,
    },
    bundle: true,
    format: "iife",
    globalName: "Wormhole",
    write: false,
  });
  const evaluate = async (code) => {
    const reply = await call("Runtime.evaluate", { expression: code, awaitPromise: true, returnByValue: true });
    if (reply.result?.exceptionDetails) throw new Error(JSON.stringify(reply.result.exceptionDetails));
    return reply.result?.result?.value;
  };
  await evaluate(bundle.outputFiles[0].text);
  // while the expression runs, report a code it puts in globalThis.webjsCode (a sender's)
  let running = true;
  const done = evaluate(expression).finally(() => (running = false));
  (async () => {
    while (running) {
      const code = await evaluate("globalThis.webjsCode ?? null");
      if (code) {
        process.stdout.write(JSON.stringify({ event: "code", code }) + "\n");
        return;
      }
      await sleep(100);
    }
  })();
  // with "measure": the page's peak live memory while it ran (JS heap plus array buffers'
  // backing stores, after a garbage collection, so garbage not yet collected is not counted)
  let peakBytes = 0;
  (async () => {
    while (running && measure) {
      await call("HeapProfiler.collectGarbage", {});
      const usage = (await call("Runtime.getHeapUsage", {})).result ?? {};
      peakBytes = Math.max(peakBytes, (usage.usedSize ?? 0) + (usage.backingStorageSize ?? 0));
      await sleep(200);
    }
  })();
  const value = await done;
  process.stdout.write(JSON.stringify({ event: "result", value, peakBytes }) + "\n");
  ws.close();
} catch (err) {
  process.stdout.write(JSON.stringify({ event: "error", message: String(err?.stack ?? err) }) + "\n");
  process.exitCode = 1;
} finally {
  process.kill(browser.pid, "SIGTERM");
  await new Promise((resolve) => (browser.exitCode !== null ? resolve() : browser.on("exit", resolve)));
  // Chromium's helper processes may still be writing the profile for a moment after it exits
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch {
    // a leftover temporary profile is not worth failing the run for
  }
}
