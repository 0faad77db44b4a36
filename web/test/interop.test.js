// Real exchanges: the JS client (in node, over real WebSockets) with the `wormhole` CLI and
// with itself, through a real `pigeonhole serve` (mailbox /v1, relay /transit and TCP).

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { python } from "../testing/python.js";
import { VERSION } from "../src/wormhole/mailbox.js";
import { startCli, startPeer, startServer, startWilliam } from "../testing/servers.js";

const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");
const TIMEOUT = { timeout: 180_000 };

let server;
let work;

before(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), "webjs-interop-"));
});

after(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const peerArgs = (more) => ({
  mailboxUrl: server.mailboxUrl,
  transitUrl: server.transitUrl,
  tcpRelay: server.tcpRelay,
  ...more,
});

function dir(name) {
  const path = join(work, name);
  mkdirSync(path, { recursive: true });
  return path;
}

async function jsSendCode(args) {
  const peer = startPeer(peerArgs({ mode: "send", ...args }));
  const [, code] = await peer.waitFor(/"code":"([^"]+)"/);
  return { peer, code };
}

async function cliSendCode(args, cwd) {
  const cli = startCli([...server.cliArgs, "send", "--no-listen", ...args], cwd);
  const [, code] = await cli.waitFor(/Wormhole code is: (\S+)/);
  return { cli, code };
}

// usage rows are written when both sides have closed; wait (bounded) for `count` of them
async function resultsAfter(before, count) {
  for (let i = 0; i < 100; i++) {
    const results = server.mailboxResults();
    if (results.length >= before + count) return results.slice(before);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return server.mailboxResults().slice(before);
}

describe("JS client <-> wormhole CLI through pigeonhole serve", () => {
  test("JS sends text, the CLI receives it", TIMEOUT, async () => {
    const { peer, code } = await jsSendCode({ text: "hello from JS ✓" });
    const cli = startCli([...server.cliArgs, "receive", "--no-listen", code], dir("t1"));
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    assert.equal(cli.seen.stdout.trim(), "hello from JS ✓");
    const outcome = await peer.outcome();
    assert.deepEqual(outcome.result, { kind: "text", bytes: new TextEncoder().encode("hello from JS ✓").length });
    assert.deepEqual(peer.events().filter((e) => e.event === "state").map((e) => e.state), ["waiting", "transferring"]);
  });

  test("the JS client's bind carries client_version [\"pigeonhole-web\", VERSION]", TIMEOUT, async () => {
    const before = server.clientVersions().filter(([impl]) => impl === "pigeonhole-web").length;
    const { peer, code } = await jsSendCode({ text: "who is binding" });
    const cli = startCli([...server.cliArgs, "receive", "--no-listen", code], dir("t-version"));
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    await peer.outcome();
    // the usage row is written as the server handles bind; wait (bounded) for it
    let ours = [];
    for (let i = 0; i < 100 && ours.length <= before; i++) {
      ours = server.clientVersions().filter(([impl]) => impl === "pigeonhole-web");
      if (ours.length <= before) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(ours.length > before, JSON.stringify(server.clientVersions()));
    assert.deepEqual(ours.at(-1), ["pigeonhole-web", VERSION]);
    assert.match(VERSION, /^\d+\.\d+/);
  });

  test("JS sends a file, the CLI receives it through the TCP relay, sha256 equal", TIMEOUT, async () => {
    const src = join(dir("f1-src"), "random 1.bin");
    writeFileSync(src, randomBytes(3 * 1024 * 1024 + 12345));
    const { peer, code } = await jsSendCode({ filePath: src });
    const out = dir("f1-out");
    const cli = startCli([...server.cliArgs, "receive", "--no-listen", "--accept-file", code], out);
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    assert.match(cli.seen.stderr, /relay:tcp:127\.0\.0\.1/);
    assert.equal(sha256(join(out, "random 1.bin")), sha256(src));
    const outcome = await peer.outcome();
    assert.deepEqual(outcome.result, { kind: "file", bytes: 3 * 1024 * 1024 + 12345 });
    assert.equal(outcome.progress, 3 * 1024 * 1024 + 12345);
  });

  test("the CLI sends text, JS receives it", TIMEOUT, async () => {
    const { cli, code } = await cliSendCode(["--text", "hello from the CLI"], dir("t2"));
    const outcome = await startPeer(peerArgs({ mode: "receive", code, outDir: dir("t2-out") })).outcome();
    assert.deepEqual(outcome.result, { kind: "text", text: "hello from the CLI" });
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
  });

  test("the CLI sends a file, JS receives it into its sink, sha256 equal", TIMEOUT, async () => {
    const srcDir = dir("f2-src");
    writeFileSync(join(srcDir, "data.bin"), randomBytes(2 * 1024 * 1024 + 7));
    const { cli, code } = await cliSendCode(["data.bin"], srcDir);
    const out = dir("f2-out");
    const peer = startPeer(peerArgs({ mode: "receive", code, outDir: out }));
    const outcome = await peer.outcome();
    assert.deepEqual(outcome.result, { kind: "file", name: "data.bin", size: 2 * 1024 * 1024 + 7 }, JSON.stringify(outcome));
    assert.equal(sha256(join(out, "data.bin")), sha256(join(srcDir, "data.bin")));
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    assert.match(cli.seen.stderr, /Confirmation received/);
    const offer = peer.events().find((e) => e.event === "offer").offer;
    assert.deepEqual(offer, { kind: "file", name: "data.bin", size: 2 * 1024 * 1024 + 7 });
  });

  test("an empty file both ways (no records, the ack still carries the sha256)", TIMEOUT, async () => {
    const srcDir = dir("e-src");
    writeFileSync(join(srcDir, "empty.txt"), "");
    const { peer, code } = await jsSendCode({ filePath: join(srcDir, "empty.txt") });
    const out1 = dir("e-out1");
    const cli = startCli([...server.cliArgs, "receive", "--no-listen", "--accept-file", code], out1);
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    assert.equal(readFileSync(join(out1, "empty.txt")).length, 0);
    assert.deepEqual((await peer.outcome()).result, { kind: "file", bytes: 0 });
    const { cli: sender, code: code2 } = await cliSendCode(["empty.txt"], srcDir);
    const out2 = dir("e-out2");
    const js = await startPeer(peerArgs({ mode: "receive", code: code2, outDir: out2 })).outcome();
    assert.deepEqual(js.result, { kind: "file", name: "empty.txt", size: 0 });
    assert.equal((await sender.exited).code, 0, sender.seen.stderr);
    assert.match(sender.seen.stderr, /Confirmation received/);
  });

  test("the CLI sends a directory, JS receives it as its zip", TIMEOUT, async () => {
    const srcDir = dir("d-src");
    mkdirSync(join(srcDir, "photos", "sub"), { recursive: true });
    writeFileSync(join(srcDir, "photos", "a.txt"), "alpha\n");
    writeFileSync(join(srcDir, "photos", "sub", "b.bin"), randomBytes(5000));
    const { cli, code } = await cliSendCode(["photos"], srcDir);
    const out = dir("d-out");
    const peer = startPeer(peerArgs({ mode: "receive", code, outDir: out }));
    const outcome = await peer.outcome();
    assert.equal(outcome.result?.kind, "directory", JSON.stringify(outcome));
    assert.equal(outcome.result.name, "photos.zip");
    const offer = peer.events().find((e) => e.event === "offer").offer;
    assert.equal(offer.numFiles, 2);
    assert.equal(offer.numBytes, 6 + 5000);
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    const names = python(`
import json, sys, zipfile
z = zipfile.ZipFile(sys.stdin.readline().strip().strip('"'))
assert z.testzip() is None
print(json.dumps(sorted(z.namelist())))`, join(out, "photos.zip"));
    assert.deepEqual(names, ["a.txt", "sub/b.bin"]);
  });

  test("a wrong code: both sides say so, nothing flows, the mailbox closes scary", TIMEOUT, async () => {
    const before = server.mailboxResults().length;
    // JS receives with a wrong code from the CLI
    const { cli, code } = await cliSendCode(["--text", "secret"], dir("w1"));
    const js = await startPeer(peerArgs({ mode: "receive", code: code + "x", outDir: dir("w1-out") })).outcome();
    assert.equal(js.kind, "wrong-code", JSON.stringify(js));
    assert.match(js.message, /code was wrong/);
    assert.notEqual((await cli.exited).code, 0);
    assert.match(cli.seen.stderr, /Key confirmation failed/);
    assert.doesNotMatch(cli.seen.stdout + cli.seen.stderr, /text message sent/);
    // the CLI receives with a wrong code from JS
    const { peer, code: code2 } = await jsSendCode({ text: "secret" });
    // another last word (a code that already ends in "aardvark" would be the right one)
    const wrong = code2.endsWith("-aardvark") ? "-absurd" : "-aardvark";
    const cli2 = startCli([...server.cliArgs, "receive", "--no-listen", code2.replace(/-[a-z]+$/, wrong)], dir("w2"));
    assert.notEqual((await cli2.exited).code, 0);
    assert.match(cli2.seen.stderr, /Key confirmation failed/);
    assert.doesNotMatch(cli2.seen.stdout, /secret/);
    const js2 = await peer.outcome();
    assert.equal(js2.kind, "wrong-code", JSON.stringify(js2));
    assert.deepEqual(await resultsAfter(before, 2), ["scary", "scary"]);
  });

  test("declining: JS declines the CLI's file, the CLI declines JS's, JS declines JS's; each sender is told", TIMEOUT, async () => {
    const srcDir = dir("n1");
    writeFileSync(join(srcDir, "no.bin"), randomBytes(1000));
    const { cli, code } = await cliSendCode(["no.bin"], srcDir);
    const js = await startPeer(peerArgs({ mode: "receive", code, outDir: dir("n1-out"), accept: false })).outcome();
    assert.equal(js.kind, "declined", JSON.stringify(js));
    assert.notEqual((await cli.exited).code, 0);
    assert.match(cli.seen.stderr, /transfer rejected/);
    // the CLI declines at its prompt: the JS sender hears "declined"
    const { peer: js1, code: code1 } = await jsSendCode({ filePath: join(srcDir, "no.bin") });
    const cli1 = startCli([...server.cliArgs, "receive", "--no-listen", code1], dir("n1-cli"), "n\n");
    await cli1.exited;
    assert.match(cli1.seen.stdout + cli1.seen.stderr, /ok\? \(y\/n\)/i);
    const refused = await js1.outcome();
    assert.equal(refused.kind, "declined", JSON.stringify(refused));
    assert.equal((await js1.exited).code, 1);
    // JS -> JS with the receiver declining: the sender hears "declined"
    const { peer, code: code2 } = await jsSendCode({ filePath: join(srcDir, "no.bin") });
    const receiver = await startPeer(peerArgs({ mode: "receive", code: code2, outDir: dir("n2-out"), accept: false })).outcome();
    assert.equal(receiver.kind, "declined");
    const sender = await peer.outcome();
    assert.equal(sender.kind, "declined", JSON.stringify(sender));
    assert.match(sender.message, /declined/);
  });

  test("cancelling mid-file (AbortSignal) stops both sides and closes the sockets", TIMEOUT, async () => {
    const srcDir = dir("c1");
    writeFileSync(join(srcDir, "big.bin"), randomBytes(64 * 1024 * 1024));
    const { cli, code } = await cliSendCode(["big.bin"], srcDir);
    const peer = startPeer(peerArgs({ mode: "receive", code, outDir: dir("c1-out"), cancelAfterBytes: 1024 * 1024 }));
    const js = await peer.outcome();
    assert.equal(js.kind, "cancelled", JSON.stringify(js));
    // the node process exits by itself: nothing (socket, timer) is left open
    assert.equal((await peer.exited).code, 1);
    const cliExit = await Promise.race([cli.exited, new Promise((r) => setTimeout(() => r("still running"), 60_000))]);
    if (cliExit === "still running") await cli.stop();
    assert.notEqual(cliExit, "still running", "the CLI sender noticed the receiver left");
  });

  test("cancelling while an offer is shown: the CLI sender is told and exits", TIMEOUT, async () => {
    const srcDir = dir("c2");
    writeFileSync(join(srcDir, "offered.bin"), randomBytes(1000));
    const { cli, code } = await cliSendCode(["offered.bin"], srcDir);
    const js = await startPeer(peerArgs({ mode: "receive", code, outDir: dir("c2-out"), cancelOnOffer: true })).outcome();
    assert.equal(js.kind, "cancelled", JSON.stringify(js));
    assert.notEqual((await cli.exited).code, 0);
    assert.match(cli.seen.stderr, /transfer cancelled/);
  });

  test("a failing sink stops the transfer with a message saying so; the CLI sender exits", TIMEOUT, async () => {
    const srcDir = dir("s1");
    writeFileSync(join(srcDir, "disk.bin"), randomBytes(4 * 1024 * 1024));
    const { cli, code } = await cliSendCode(["disk.bin"], srcDir);
    const js = await startPeer(peerArgs({ mode: "receive", code, outDir: dir("s1-out"), failSinkAfterBytes: 1024 * 1024 })).outcome();
    assert.equal(js.kind, "cancelled", JSON.stringify(js));
    assert.match(js.message, /Saving the file failed \(no space left on the test's pretend disk\)/);
    const cliExit = await Promise.race([cli.exited, new Promise((r) => setTimeout(() => r("still running"), 60_000))]);
    if (cliExit === "still running") await cli.stop();
    assert.notEqual(cliExit, "still running");
    assert.notEqual(cliExit.code, 0);
  });

  // the page's transit worker protocol (worker-transit.js) over a real MessageChannel
  test("through the transit worker's port: JS sends a file to the CLI, sha256 equal", TIMEOUT, async () => {
    const size = 3 * 1024 * 1024 + 99;
    const src = join(dir("w1-src"), "worker.bin");
    writeFileSync(src, randomBytes(size));
    const { peer, code } = await jsSendCode({ filePath: src, transitWorker: true });
    const out = dir("w1-out");
    const cli = startCli([...server.cliArgs, "receive", "--no-listen", "--accept-file", code], out);
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    assert.equal(sha256(join(out, "worker.bin")), sha256(src));
    const outcome = await peer.outcome();
    assert.deepEqual(outcome.result, { kind: "file", bytes: size }, JSON.stringify(outcome));
    assert.deepEqual(outcome.carried, { sent: size, received: 0 });
  });

  test("through the transit worker's port: the CLI sends a file to JS, sha256 equal", TIMEOUT, async () => {
    const size = 3 * 1024 * 1024 + 5;
    const srcDir = dir("w2-src");
    writeFileSync(join(srcDir, "to-worker.bin"), randomBytes(size));
    const { cli, code } = await cliSendCode(["to-worker.bin"], srcDir);
    const out = dir("w2-out");
    const outcome = await startPeer(peerArgs({ mode: "receive", code, outDir: out, transitWorker: true })).outcome();
    assert.deepEqual(outcome.result, { kind: "file", name: "to-worker.bin", size }, JSON.stringify(outcome));
    assert.equal(sha256(join(out, "to-worker.bin")), sha256(join(srcDir, "to-worker.bin")));
    assert.equal(outcome.carried.received, size);
    assert.equal((await cli.exited).code, 0, cli.seen.stderr);
    assert.match(cli.seen.stderr, /Confirmation received/);
  });

  test("through the transit worker's port: a failing sink stops the transfer at once; the CLI exits", TIMEOUT, async () => {
    const srcDir = dir("w3");
    writeFileSync(join(srcDir, "disk.bin"), randomBytes(16 * 1024 * 1024));
    const { cli, code } = await cliSendCode(["disk.bin"], srcDir);
    const peer = startPeer(peerArgs({ mode: "receive", code, outDir: dir("w3-out"), failSinkAfterBytes: 1024 * 1024, transitWorker: true }));
    const js = await peer.outcome();
    assert.equal(js.kind, "cancelled", JSON.stringify(js));
    assert.match(js.message, /Saving the file failed/);
    // the worker's stream, which nobody takes any more, neither holds the peer open
    assert.equal((await peer.exited).code, 1);
    const cliExit = await Promise.race([cli.exited, new Promise((r) => setTimeout(() => r("still running"), 60_000))]);
    if (cliExit === "still running") await cli.stop();
    assert.notEqual(cliExit, "still running");
  });

  test("cancelling while waiting for the peer: cancelled, the mailbox closes lonely", TIMEOUT, async () => {
    const before = server.mailboxResults().length;
    const peer = startPeer(peerArgs({ mode: "send", text: "nobody came", cancelOnCode: true }));
    const js = await peer.outcome();
    assert.equal(js.kind, "cancelled", JSON.stringify(js));
    assert.match(js.message, /cancelled/);
    assert.equal((await peer.exited).code, 1);
    assert.deepEqual(await resultsAfter(before, 1), ["lonely"]);
  });
});

// wormhole-william's SPAKE2 encodes a point wrongly about once in 256 exchanges, and both
// sides then see a wrong code with the right one: these tests retry once on that (and say so).
async function withWilliamRetry(what, attempt) {
  const first = await attempt();
  if (first !== "wrong-code") return;
  console.log(`# ${what}: wormhole-william's key mismatch (its known 1-in-256 SPAKE2 bug); retrying once`);
  assert.notEqual(await attempt(), "wrong-code", `${what}: a wrong code twice`);
}

describe("JS client <-> wormhole-william", () => {
  test("JS sends a file, wormhole-william receives it (it uses our relay hint)", TIMEOUT, async () => {
    const src = join(dir("ww1-src"), "for-william.bin");
    writeFileSync(src, randomBytes(2 * 1024 * 1024 + 99));
    await withWilliamRetry("JS -> wormhole-william file", async () => {
      const { peer, code } = await jsSendCode({ filePath: src });
      const out = dir("ww1-out");
      rmSync(join(out, "for-william.bin"), { force: true });
      const ww = startWilliam(["--relay-url", server.mailboxUrl, "recv", "--hide-progress", code], out, "y\n");
      await ww.exited;
      const outcome = await peer.outcome();
      if (outcome.kind === "wrong-code") return "wrong-code";
      assert.deepEqual(outcome.result, { kind: "file", bytes: 2 * 1024 * 1024 + 99 }, JSON.stringify(outcome) + ww.seen.stderr);
      assert.equal(sha256(join(out, "for-william.bin")), sha256(src));
      return "ok";
    });
  });

  test("text both ways: JS -> wormhole-william and wormhole-william -> JS", TIMEOUT, async () => {
    await withWilliamRetry("JS -> wormhole-william text", async () => {
      const { peer, code } = await jsSendCode({ text: "to william" });
      const ww = startWilliam(["--relay-url", server.mailboxUrl, "recv", code], dir("ww2"));
      await ww.exited;
      const outcome = await peer.outcome();
      if (outcome.kind === "wrong-code") return "wrong-code";
      assert.equal(ww.seen.stdout.trim(), "to william");
      assert.equal(outcome.result?.kind, "text");
      return "ok";
    });
    await withWilliamRetry("wormhole-william -> JS text", async () => {
      const ww = startWilliam(["--relay-url", server.mailboxUrl, "send", "--text", "from william"], dir("ww3"));
      const [, code] = await ww.waitFor(/Wormhole code is: (\S+)/);
      const outcome = await startPeer(peerArgs({ mode: "receive", code, outDir: dir("ww3-out") })).outcome();
      await ww.stop();
      if (outcome.kind === "wrong-code") return "wrong-code";
      assert.deepEqual(outcome.result, { kind: "text", text: "from william" });
      return "ok";
    });
  });
});

describe("JS client <-> JS client", () => {
  test("a file page to page, through the WebSocket relay both ways", TIMEOUT, async () => {
    const src = join(dir("p-src"), "p2p.bin");
    writeFileSync(src, randomBytes(1024 * 1024 + 1));
    const { peer, code } = await jsSendCode({ filePath: src, tcpRelay: null });
    const out = dir("p-out");
    const receiver = await startPeer(peerArgs({ mode: "receive", code, outDir: out, tcpRelay: null })).outcome();
    assert.deepEqual(receiver.result, { kind: "file", name: "p2p.bin", size: 1024 * 1024 + 1 });
    assert.equal(sha256(join(out, "p2p.bin")), sha256(src));
    assert.deepEqual((await peer.outcome()).result, { kind: "file", bytes: 1024 * 1024 + 1 });
  });
});

describe("server permissions and errors", () => {
  test("a server that requires hashcash: both sides mint stamps and exchange text", TIMEOUT, async () => {
    const strict = await startServer(["--permissions", "hashcash", "--hashcash-bits", "12"]);
    try {
      const args = { mailboxUrl: strict.mailboxUrl, transitUrl: strict.transitUrl };
      const sender = startPeer({ ...args, mode: "send", text: "paid for" });
      const [, code] = await sender.waitFor(/"code":"([^"]+)"/);
      const receiver = await startPeer({ ...args, mode: "receive", code, outDir: work }).outcome();
      assert.deepEqual(receiver.result, { kind: "text", text: "paid for" });
      assert.equal((await sender.outcome()).result?.kind, "text");
      // the CLI (no hashcash support) is turned away by the same server
      const cli = startCli(["--relay-url", strict.mailboxUrl, "send", "--text", "x"], work);
      assert.notEqual((await cli.exited).code, 0);
    } finally {
      await strict.stop();
    }
  });

  test("the server's welcome error is surfaced as a server WormholeError", TIMEOUT, async () => {
    const closed = await startServer(["--signal-error", "This server is closed for maintenance."]);
    try {
      const js = await startPeer({ mailboxUrl: closed.mailboxUrl, transitUrl: closed.transitUrl, mode: "send", text: "x" }).outcome();
      assert.equal(js.kind, "server", JSON.stringify(js));
      assert.match(js.message, /closed for maintenance/);
    } finally {
      await closed.stop();
    }
  });

  test("an unreachable mailbox is a server WormholeError that says what to do", TIMEOUT, async () => {
    const js = await startPeer({ mailboxUrl: `ws://127.0.0.1:${server.transitPort}/v1`, transitUrl: server.transitUrl, mode: "send", text: "x" }).outcome();
    assert.equal(js.kind, "server", JSON.stringify(js));
    assert.match(js.message, /Try again/);
  });
});
