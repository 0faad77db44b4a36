// Where a received file goes: streamed to disk through the service worker (sw.js), or, when
// the browser offers no service worker, gathered in memory and saved at the end.
// Both follow the core's sink contract: write(bytes) -> Promise (back-pressure), close(), abort();
// write may take the buffer of the bytes it is given.

import { ownsBuffer } from "../wormhole/bytes.js";

const BATCH = 256 * 1024; // bytes posted to the worker at once
const IN_FLIGHT = 4 * 1024 * 1024; // unacknowledged bytes the page lets out
const START_TIMEOUT_MS = 15000;
const PING_MS = 10000;

/** The service worker's registration once active, or null when there is none (and why). */
export async function registerWorker() {
  if (!("serviceWorker" in navigator)) {
    return { registration: null, why: "this browser offers no service worker here (it needs HTTPS)" };
  }
  try {
    const registration = await navigator.serviceWorker.register("/web/sw.js", { scope: "/web/" });
    await activated(registration);
    if (!registration.active) throw new Error("it is not active");
    return { registration, why: null };
  } catch (error) {
    return { registration: null, why: `the service worker did not start (${error.message})` };
  }
}

function activated(registration) {
  // navigator.serviceWorker.ready never settles here: the page (/) is outside /web/.
  // A newer worker being installed replaces the active one at once (skipWaiting): wait for
  // it, so a download is never announced to the worker that is on its way out.
  const pending = registration.installing || registration.waiting;
  if (!pending) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pending.state === "activated") resolve();
      if (pending.state === "redundant") reject(new Error("it was replaced"));
    };
    pending.addEventListener("statechange", check);
    check();
  });
}

/** A sink that streams into a download the service worker answers. */
export async function workerSink(registration, offer) {
  const id = crypto.randomUUID();
  const channel = new MessageChannel();
  const port = channel.port1;
  let inFlight = 0;
  let failure = null;
  let started = false;
  let done = false;
  let wake = null;
  let batch = new Uint8Array(BATCH);
  let filled = 0;
  const waitForRoom = () => new Promise((resolve) => (wake = resolve));
  const notify = () => {
    if (wake) {
      const w = wake;
      wake = null;
      w();
    }
  };
  let ready = null;
  const known = new Promise((resolve) => (ready = resolve));
  port.onmessage = (event) => {
    const m = event.data;
    if (m.type === "ready") ready();
    else if (m.type === "ack") inFlight -= m.bytes;
    else if (m.type === "started") started = true;
    else if (m.type === "done") done = true;
    else if (m.type === "cancelled") {
      failure = new Error("the download was cancelled in the browser; ask the sender to send it again");
    }
    notify();
  };
  registration.active.postMessage({ type: "download", id, name: offer.name, size: offer.size }, [channel.port2]);
  const ping = setInterval(() => registration.active && registration.active.postMessage({ type: "ping" }), PING_MS);
  const startTimer = setTimeout(() => {
    if (!started) {
      failure = new Error("the browser did not start the download; reload the page and receive again");
      notify();
    }
  }, START_TIMEOUT_MS);
  // only once the worker knows the download: its fetch event may otherwise come before the
  // message, and the link would reach the server (a 404 in place of this page)
  await Promise.race([known, new Promise((resolve) => setTimeout(resolve, START_TIMEOUT_MS))]);
  if (failure) {
    clearInterval(ping);
    port.close();
    throw failure;
  }
  startDownload(`/web/download/${id}`);

  const move = (chunk) => {
    port.postMessage({ type: "chunk", data: chunk }, [chunk.buffer]);
    inFlight += chunk.byteLength;
  };
  const post = () => {
    if (filled === 0) return;
    move(filled === BATCH ? batch : batch.slice(0, filled));
    batch = new Uint8Array(BATCH);
    filled = 0;
  };
  const finish = () => {
    clearInterval(ping);
    clearTimeout(startTimer);
  };
  return {
    async write(bytes) {
      if (filled === 0 && bytes.byteLength >= BATCH && ownsBuffer(bytes)) {
        if (failure) throw failure;
        move(bytes); // a whole buffer of ours (the core's pieces are) goes as it is
      } else {
        for (let offset = 0; offset < bytes.byteLength; ) {
          if (failure) throw failure;
          const n = Math.min(BATCH - filled, bytes.byteLength - offset);
          batch.set(bytes.subarray(offset, offset + n), filled);
          filled += n;
          offset += n;
          if (filled === BATCH) post();
          while (inFlight >= IN_FLIGHT && !failure) await waitForRoom();
        }
      }
      while (inFlight >= IN_FLIGHT && !failure) await waitForRoom();
      if (failure) throw failure;
    },
    async close() {
      if (failure) throw failure;
      post();
      port.postMessage({ type: "end" });
      // done: the worker handed the last byte to the browser's download
      while (!done && !failure) await waitForRoom();
      finish();
      if (failure) throw failure;
    },
    async abort(reason) {
      port.postMessage({ type: "abort", reason: String(reason && reason.message ? reason.message : reason) });
      finish();
    },
  };
}

function startDownload(url) {
  // a link to a URL in the worker's scope: the worker answers it as an attachment, so the
  // page stays. (Not `download` in general: Chromium then fetches it past the worker. Not
  // an iframe: the Content-Security-Policy allows no frame.) Firefox is the exception: a
  // navigation that turns into a download stops the page's network work as it begins,
  // the transit worker's WebSocket among it (the relay then sees it close before its
  // handshake, or mid-transfer), while a `download` link is no navigation and its worker
  // still answers it (docs/web.md, "Firefox and WebKit").
  const link = document.createElement("a");
  link.href = url;
  link.hidden = true;
  if (/\bFirefox\//.test(navigator.userAgent)) link.download = "";
  document.body.append(link);
  link.click();
  link.remove();
}

/** A sink that holds the file in memory and saves it when complete (no service worker). */
export function memorySink(offer) {
  let parts = [];
  return {
    async write(bytes) {
      parts.push(bytes.slice());
    },
    async close() {
      const url = URL.createObjectURL(new Blob(parts, { type: "application/octet-stream" }));
      parts = [];
      const link = document.createElement("a");
      link.href = url;
      link.download = offer.name;
      link.hidden = true;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    },
    async abort() {
      parts = [];
    },
  };
}
