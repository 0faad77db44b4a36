// A command-line driver of the JS client for the interop tests: node (with
// --experimental-websocket on Node 20) runs the real modules over real WebSockets. One JSON
// argument says what to do; one JSON line per event goes to stdout.
//   {"mode": "send", mailboxUrl, transitUrl, tcpRelay, text | filePath, cancelOnCode?}
//   {"mode": "receive", mailboxUrl, transitUrl, tcpRelay, code, outDir, accept, cancelAfterBytes?,
//    cancelOnOffer?, failSinkAfterBytes?}
// With "transitWorker": true the relay's bytes go through the page's worker protocol
// (worker-transit.js) over a real MessageChannel, served on this thread (Node has no Worker
// that runs browser modules), with the records in libsodium's WebAssembly as the page's
// worker does them.

import { openAsBlob } from "node:fs";
import { open } from "node:fs/promises";
import { basename, join } from "node:path";
import { receive, send } from "../src/wormhole/index.js";
import sodium from "libsodium";
import { loadBox } from "../src/wormhole/records-box.js";
import { serveTransit } from "../src/wormhole/worker-transit.js";

const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const args = JSON.parse(process.argv[2]);
const controller = new AbortController();
process.on("SIGTERM", () => controller.abort());

let lastProgress = 0;
const carried = { sent: 0, received: 0 };
const sameThreadWorker = {
  postMessage: (message, [port]) => serveTransit(port, carried, loadBox(sodium)),
  addEventListener() {},
  removeEventListener() {},
};
const common = {
  mailboxUrl: args.mailboxUrl,
  transitUrl: args.transitUrl,
  tcpRelay: args.tcpRelay ?? null,
  appid: args.appid,
  signal: controller.signal,
  onState: (state) => say({ event: "state", state }),
  transitWorker: args.transitWorker ? () => sameThreadWorker : undefined,
  onProgress: ({ done, total }) => {
    lastProgress = done;
    if (args.cancelAfterBytes !== undefined && done >= args.cancelAfterBytes) controller.abort();
  },
};

try {
  let result;
  if (args.mode === "send") {
    const opts = {
      ...common,
      onCode: (code) => {
        say({ event: "code", code });
        if (args.cancelOnCode) setTimeout(() => controller.abort(), 200);
      },
    };
    if (args.filePath !== undefined) {
      const file = await openAsBlob(args.filePath);
      file.name = basename(args.filePath);
      opts.file = file;
    } else {
      opts.text = args.text;
    }
    result = await send(opts);
  } else {
    result = await receive({
      ...common,
      code: args.code,
      onOffer: async (offer) => {
        say({ event: "offer", offer });
        if (args.cancelOnOffer) {
          controller.abort();
          return new Promise(() => {}); // the person never answers: the cancel must end it
        }
        return args.accept !== false;
      },
      openSink: async (offer) => {
        const handle = await open(join(args.outDir, offer.name), "w");
        let written = 0;
        return {
          write: async (bytes) => {
            written += bytes.length;
            if (args.failSinkAfterBytes !== undefined && written > args.failSinkAfterBytes) {
              throw new Error("no space left on the test's pretend disk");
            }
            await handle.write(bytes);
          },
          close: () => handle.close(),
          abort: () => handle.close(),
        };
      },
    });
  }
  say({ event: "result", result, progress: lastProgress, carried });
} catch (err) {
  say({ event: "error", kind: err.kind ?? null, message: err.message, stack: err.kind ? undefined : err.stack });
  process.exitCode = 1;
}
