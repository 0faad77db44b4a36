// The page's service worker (scope /web/): streams a received file to disk as it arrives.
// The page posts {type: "download", id, name, size} with a MessagePort, then feeds the
// file's bytes through that port; GET /web/download/<id> (the page opens it as a download)
// is answered with a stream of them. Back-pressure: a chunk is acknowledged only while the
// stream's queue is below its high-water mark, and the page keeps a bounded number of
// unacknowledged bytes in flight, so neither side holds more than a few MiB.

const HIGH_WATER = 2 * 1024 * 1024;
// chunks read by the download that may still be being written out (kept intact)
const KEEP_READ = 2;
const downloads = new Map();

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("message", (event) => {
  const message = event.data;
  if (message && message.type === "download" && event.ports[0]) {
    open(message, event.ports[0]);
  }
  // {type: "ping"} only keeps this worker alive during a long transfer
});

function open({ id, name, size }, port) {
  let controller;
  let unacked = 0;
  let ended = false;
  let over = false; // cancelled by the person, or aborted by the page
  const held = []; // chunks enqueued and not yet released, oldest first
  const release = () => {
    // the download reads chunks in order: those before the queue were read, and all but the
    // last KEEP_READ of them are written out. Detaching frees their bytes now; left to the
    // garbage collector, tens of MiB of them would pile up outside the JS heap first.
    let queued = HIGH_WATER - controller.desiredSize;
    let inQueue = 0;
    while (inQueue < held.length && queued > 0) {
      queued -= held[held.length - 1 - inQueue].byteLength;
      inQueue += 1;
    }
    const done = held.length - inQueue - KEEP_READ;
    for (const chunk of held.splice(0, Math.max(0, done))) detach(chunk.buffer);
  };
  const settle = () => {
    release();
    if (unacked > 0 && controller.desiredSize > 0) {
      port.postMessage({ type: "ack", bytes: unacked });
      unacked = 0;
    }
    if (ended && controller.desiredSize >= HIGH_WATER) {
      // everything was handed to the browser's download: the page may say "done"
      ended = false;
      controller.close();
      port.postMessage({ type: "done" });
    }
  };
  const stream = new ReadableStream(
    {
      start(c) {
        controller = c;
      },
      pull() {
        settle();
      },
      cancel() {
        // the person cancelled the download in the browser
        over = true;
        downloads.delete(id);
        port.postMessage({ type: "cancelled" });
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: HIGH_WATER }),
  );
  port.onmessage = (event) => {
    const m = event.data;
    if (over) return; // chunks the page sent before it heard of a cancel
    if (m.type === "chunk") {
      controller.enqueue(m.data);
      held.push(m.data);
      unacked += m.data.byteLength;
    } else if (m.type === "end") {
      ended = true;
    } else if (m.type === "abort") {
      over = true;
      try {
        controller.error(new Error(m.reason || "transfer failed"));
      } catch {
        // already closed: the download has every byte
      }
      downloads.delete(id);
      return;
    }
    settle();
  };
  downloads.set(id, { name, size, stream, port });
  port.postMessage({ type: "ready" }); // the page opens the download only after this
}

function detach(buffer) {
  if (typeof buffer.transfer === "function") buffer.transfer(0);
}

function disposition(name) {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  const match = /^\/web\/download\/([A-Za-z0-9-]+)$/.exec(url.pathname);
  if (!match || url.origin !== self.location.origin) return;
  const download = downloads.get(match[1]);
  if (!download) return; // the server answers 404
  downloads.delete(match[1]); // one use
  const headers = {
    "Content-Type": "application/octet-stream",
    "Content-Disposition": disposition(download.name),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
  };
  if (Number.isSafeInteger(download.size)) headers["Content-Length"] = String(download.size);
  event.respondWith(new Response(download.stream, { headers }));
  download.port.postMessage({ type: "started" });
});
