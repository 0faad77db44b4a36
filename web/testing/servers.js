// Real processes for the interop tests: `pigeonhole serve` on free loopback ports with its
// data in a temporary directory, the `wormhole` CLI, and the JS client (support/peer.mjs),
// each started by the test and stopped by its PID.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { python, VENV_BIN, WEB_DIR } from "./python.js";

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// Collects a child's output; waitFor(regexp) resolves with the first match (bounded).
function watch(child) {
  const seen = { stdout: "", stderr: "" };
  const waiters = [];
  const check = () => {
    for (const w of [...waiters]) {
      const m = (seen.stdout + "\n" + seen.stderr).match(w.pattern);
      if (m) {
        waiters.splice(waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        w.resolve(m);
      }
    }
  };
  for (const name of ["stdout", "stderr"]) {
    child[name].setEncoding("utf8");
    child[name].on("data", (text) => {
      seen[name] += text;
      check();
    });
  }
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  exited.then(() => {
    for (const w of waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new Error(`process exited before printing ${w.pattern}:\n${seen.stdout}\n${seen.stderr}`));
    }
  });
  return {
    child,
    seen,
    exited,
    waitFor(pattern, ms = 30_000) {
      return new Promise((resolve, reject) => {
        const w = { pattern, resolve, reject };
        w.timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1);
          reject(new Error(`no ${pattern} within ${ms} ms:\n${seen.stdout}\n${seen.stderr}`));
        }, ms);
        waiters.push(w);
        check();
      });
    },
    // stop by PID (SIGTERM, then SIGKILL after a bounded wait)
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      process.kill(child.pid, "SIGTERM");
      const timer = setTimeout(() => child.exitCode === null && process.kill(child.pid, "SIGKILL"), 10_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

export async function startServer(extraArgs = []) {
  const dataDir = mkdtempSync(join(tmpdir(), "pigeonhole-webjs-"));
  const port = await freePort();
  const transitPort = await freePort();
  const args = ["serve", "--port", String(port), "--transit-port", String(transitPort), "--no-admin",
    "--no-archive", "--data-dir", dataDir, ...extraArgs];
  const proc = watch(spawn(join(VENV_BIN, "pigeonhole"), args, { stdio: ["ignore", "pipe", "pipe"] }));
  await proc.waitFor(/listening on ws:\/\//, 60_000);
  return {
    port,
    transitPort,
    dataDir,
    mailboxUrl: `ws://127.0.0.1:${port}/v1`,
    transitUrl: `ws://127.0.0.1:${port}/transit`,
    tcpRelay: { host: "127.0.0.1", port: transitPort },
    cliArgs: ["--relay-url", `ws://127.0.0.1:${port}/v1`, "--transit-helper", `tcp:127.0.0.1:${transitPort}`],
    proc,
    // the usage results ("happy", "scary", ...) of the mailboxes the server has finished
    mailboxResults() {
      return python(`
import json, sqlite3
db = sqlite3.connect(${JSON.stringify(join(dataDir, "usage.sqlite"))})
print(json.dumps([r for (r,) in db.execute("select result from mailboxes order by id")]))`);
    },
    // the client_version of each bind the server has recorded: [implementation, version]
    clientVersions() {
      return python(`
import json, sqlite3
db = sqlite3.connect(${JSON.stringify(join(dataDir, "usage.sqlite"))})
print(json.dumps([list(r) for r in db.execute("select implementation, version from client_versions")]))`);
    },
    async stop() {
      await proc.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

// The JS client as a process (Node 20 needs --experimental-websocket for its WebSocket).
export function startPeer(args) {
  const child = spawn(process.execPath, ["--experimental-websocket", join(WEB_DIR, "testing/peer.mjs"), JSON.stringify(args)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const proc = watch(child);
  proc.events = () => proc.seen.stdout.split("\n").filter(Boolean).map((line) => JSON.parse(line));
  proc.outcome = async () => {
    await proc.exited;
    const events = proc.events();
    return events.find((e) => e.event === "result" || e.event === "error");
  };
  return proc;
}

// `answer`, if given, is typed into the CLI's prompt (e.g. "n\n" to decline an offer).
export function startCli(args, cwd, answer = null) {
  return startProgram(join(VENV_BIN, "wormhole"), args, cwd, answer);
}

// wormhole-william (the Debian package scripts/setup --test installs), from PATH
export function startWilliam(args, cwd, answer = null) {
  return startProgram("wormhole-william", args, cwd, answer);
}

function startProgram(program, args, cwd, answer) {
  const child = spawn(program, args, { cwd, stdio: [answer === null ? "ignore" : "pipe", "pipe", "pipe"] });
  if (answer !== null) child.stdin.end(answer);
  return watch(child);
}
