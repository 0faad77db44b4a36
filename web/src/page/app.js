// The page: send a text or a file, receive one, with the wormhole core (../wormhole/index.js)
// over this server's mailbox and WebSocket relay. Same origin only (config.json says where).
import { CODE, completeWord, receive, send, WormholeError } from "../wormhole/index.js";
import { bytes, Meter, progressLine } from "./format.js";
import { describe, fromDrop, fromFiles, fromFolderInput, PickError } from "./picked.js";
import { codeFromFragment, codeLink, forgetFragment, qrSvg } from "./share.js";
import { memorySink, registerWorker, workerSink } from "./sinks.js";

const $ = (id) => document.getElementById(id);
const ui = {
  transfer: $("transfer"),
  status: $("status"),
  sendText: $("send-text"),
  sendFile: $("send-file"),
  sendFolder: $("send-folder"),
  drop: $("drop"),
  fileChosen: $("file-chosen"),
  clearFile: $("clear-file"),
  sendButton: $("send-button"),
  receiveCode: $("receive-code"),
  words: $("code-words"),
  receiveButton: $("receive-button"),
  codeBox: $("code-box"),
  code: $("code"),
  copyCode: $("copy-code"),
  codeLink: $("code-link"),
  copyLink: $("copy-link"),
  qrBox: $("code-qr-box"),
  offer: $("offer"),
  offerText: $("offer-text"),
  accept: $("accept-button"),
  decline: $("decline-button"),
  progressBox: $("progress-box"),
  progress: $("progress"),
  progressText: $("progress-text"),
  receivedBox: $("received-box"),
  receivedText: $("received-text"),
  copyText: $("copy-text"),
  notice: $("notice"),
  cancel: $("cancel-button"),
  reset: $("reset-button"),
};

let running = null; // the AbortController of the transfer in progress
let picked = null; // what to send instead of the text: {kind: "file", file} or {kind: "folder", name, files}
let heldInMemory = null; // why the file being received is held in memory, or null
let savingLine = null; // "Saving NAME (SIZE)…" once an offer is accepted: the receiver's status
// the service worker that streams downloads, registered at once so it is ready: {registration, why}
const worker = registerWorker();
// the dedicated worker that carries the relay's bytes and their encryption, started with the
// page: its script and WebAssembly load while the person picks a file or types a code.
// null until started; false once it failed to start: the core then does it on this thread.
let transitWorker = null;
function startTransitWorker() {
  if (typeof Worker !== "function" || transitWorker === false) return null;
  if (transitWorker === null) {
    transitWorker = new Worker("/web/transit-worker.js", { type: "module", name: "transit" });
    transitWorker.addEventListener("error", () => (transitWorker = false), { once: true });
  }
  return transitWorker;
}
startTransitWorker();

class PageError extends Error {}

async function endpoints() {
  let response;
  try {
    response = await fetch("/web/config.json", { cache: "no-cache" });
  } catch {
    throw new PageError("The server did not answer. Check your connection, then try again.");
  }
  if (!response.ok) {
    throw new PageError(`The server refused this page's settings (HTTP ${response.status}). Reload the page; if it goes on, tell the server's operator.`);
  }
  const config = await response.json();
  const ws = location.protocol === "https:" ? "wss:" : "ws:";
  return {
    appid: config.appid,
    transitWorker: startTransitWorker,
    mailboxUrl: `${ws}//${location.host}${config.mailbox}`,
    transitUrl: config.transit ? `${ws}//${location.host}${config.transit}` : null,
    // the TCP relay for CLI peers: this page's host (an IPv6 literal without its brackets)
    tcpRelay: config.transit_tcp_port
      ? { host: location.hostname.replace(/^\[(.*)\]$/, "$1"), port: config.transit_tcp_port }
      : null,
  };
}

function setState(state, message) {
  ui.transfer.dataset.state = state;
  if (message !== undefined) ui.status.textContent = message;
  ui.status.hidden = false;
  if (state === "done" || state === "failed") settle(state);
  const busy = state === "waiting" || state === "transferring";
  ui.sendButton.disabled = busy;
  ui.receiveButton.disabled = busy;
  ui.cancel.hidden = !busy;
  ui.reset.hidden = busy || state === "idle";
}

function say(text) {
  ui.notice.textContent = text;
  ui.notice.hidden = !text;
}

// At the end, lines about the transfer in progress ("Saving …", "saved as it arrives") are stale.
function settle(state) {
  ui.offer.hidden = true;
  ui.offerText.textContent = "";
  if (heldInMemory) {
    say(state === "done"
      ? `The file was held in memory until it was complete, then saved: ${heldInMemory}.`
      : `The file was held in memory: ${heldInMemory}. A file larger than this tab's memory fails.`);
  } else {
    say("");
  }
  heldInMemory = null;
}

function clearTransfer() {
  // on a phone the transfer box is below the fold: bring it into view as a transfer starts
  ui.transfer.scrollIntoView({ block: "nearest" });
  ui.codeBox.hidden = true;
  ui.code.textContent = "";
  ui.codeLink.textContent = "";
  ui.codeLink.href = "/";
  ui.qrBox.replaceChildren();
  ui.offer.hidden = true;
  ui.accept.hidden = true;
  ui.decline.hidden = true;
  ui.progressBox.hidden = true;
  ui.progress.value = 0;
  ui.progressText.textContent = "";
  ui.receivedBox.hidden = true;
  ui.receivedText.textContent = "";
  heldInMemory = null;
  savingLine = null;
  say("");
}

function progressReporter() {
  const meter = new Meter();
  let shown = 0;
  return ({ done, total }) => {
    // a few times a second is enough for a person, and spares the tab's rendering
    const now = performance.now();
    if (done !== total && done !== 0 && now - shown < 200) return;
    shown = now;
    const { rate, left } = meter.update(done, total);
    ui.progressBox.hidden = false;
    ui.progress.max = total || 1;
    ui.progress.value = total ? done : 0;
    ui.progressText.textContent = progressLine(done, total, rate, left);
  };
}

function failed(error) {
  if (error instanceof PageError) return setState("failed", error.message);
  if (error instanceof WormholeError || (error && error.name === "WormholeError")) {
    if (error.kind === "cancelled" && running && running.signal.aborted) {
      return setState("failed", "Cancelled. Nothing more will be sent or received.");
    }
    return setState("failed", error.message);
  }
  const what = error && error.message ? error.message : String(error);
  setState("failed", `Something went wrong: ${what}. Reload the page and try again.`);
}

function onState(state) {
  if (state === "waiting") setState("waiting", "Waiting for the other side to enter the code…");
  // a receiver that accepted keeps its "Saving NAME (SIZE)…" line
  else if (state === "transferring") setState("transferring", savingLine || "Transferring…");
}

// The link that receives with `code`, and its QR code (the sender's page shows both).
function showLink(code) {
  const link = codeLink(code);
  ui.codeLink.href = link;
  ui.codeLink.textContent = link;
  const qr = qrSvg(link);
  qr.dataset.testid = "code-qr";
  qr.setAttribute("role", "img");
  qr.setAttribute("aria-label", "QR code of the link");
  ui.qrBox.replaceChildren(qr);
}

async function startSend() {
  const text = ui.sendText.value;
  const chosen = picked;
  if (!chosen && !text) {
    setState("failed", "Nothing to send: type a text or choose a file (or several, or a folder) first.");
    ui.sendText.focus();
    return;
  }
  clearTransfer();
  running = new AbortController();
  setState("waiting", "Asking the server for a code…");
  try {
    const where = await endpoints();
    const result = await send({
      ...where,
      ...(chosen === null ? { text } : chosen.kind === "file" ? { file: chosen.file } : { folder: chosen }),
      signal: running.signal,
      onCode(code) {
        ui.code.textContent = code;
        showLink(code);
        ui.codeBox.hidden = false;
        // the code is what the person needs next: show it (below the fold on a phone, at the
        // window's bottom edge on a desktop) and put keyboard and screen-reader focus there
        ui.codeBox.scrollIntoView({ block: "center" });
        ui.copyCode.focus({ preventScroll: true });
      },
      onState,
      onProgress: progressReporter(),
    });
    const what =
      result.kind === "text" ? "The text was"
      : result.kind === "directory" ? `The folder ${chosen.name} (${chosen.files.length} files, a zip of ${bytes(result.bytes)}) was`
      : `${chosen.file.name} (${bytes(result.bytes)}) was`;
    setState("done", `${what} received by the other side.`);
  } catch (error) {
    failed(error);
  } finally {
    running = null;
  }
}

function askOffer(offer) {
  const what =
    offer.kind === "directory"
      ? `The folder ${offer.name.replace(/\.zip$/, "")} (${offer.numFiles} files, ${bytes(offer.numBytes)}), ` +
        `as a zip file ${offer.name} of ${bytes(offer.size)}`
      : `The file ${offer.name} (${bytes(offer.size)})`;
  // one line says what is offered (the status line would only repeat it); Accept or Decline
  // answer it, so Cancel (a decline here) is not shown beside them
  ui.status.hidden = true;
  ui.offerText.textContent = `${what} is offered. Save it?`;
  ui.offer.hidden = false;
  ui.accept.hidden = false;
  ui.decline.hidden = false;
  ui.cancel.hidden = true;
  ui.offer.scrollIntoView({ block: "center" });
  ui.accept.focus({ preventScroll: true });
  return new Promise((resolve) => {
    let answered = false;
    const answer = (yes) => {
      if (answered) return;
      answered = true;
      ui.accept.hidden = true;
      ui.decline.hidden = true;
      ui.accept.onclick = ui.decline.onclick = null;
      // the answer replaces the offer: one line again, in the status
      ui.offer.hidden = true;
      if (yes) savingLine = `Saving ${offer.name} (${bytes(offer.size)})…`;
      ui.status.textContent = yes ? savingLine : `You declined ${offer.name}.`;
      ui.status.hidden = false;
      ui.cancel.hidden = !yes;
      resolve(yes);
    };
    ui.accept.onclick = () => answer(true);
    ui.decline.onclick = () => answer(false);
    // Cancel while the offer is shown is a decline
    if (running) running.signal.addEventListener("abort", () => answer(false), { once: true });
  });
}

async function openSink(offer) {
  const { registration, why } = await worker;
  if (registration) {
    say("The file is saved to your downloads as it arrives.");
    // a download cancelled in the browser fails the sink's next write: the core then stops
    return workerSink(registration, offer);
  }
  heldInMemory = why;
  say(`The file is held in memory until it is complete, then saved: ${why}. A file larger than this tab's memory will fail.`);
  return memorySink(offer);
}

async function startReceive() {
  const code = ui.receiveCode.value.trim().replace(/\s+/g, "-");
  if (!CODE.test(code)) {
    setState("failed", "That is not a wormhole code: it starts with a number, then words, like 7-guitarist-revenge.");
    ui.receiveCode.focus();
    return;
  }
  clearTransfer();
  running = new AbortController();
  setState("waiting", "Connecting to the sender…");
  try {
    const where = await endpoints();
    const result = await receive({
      ...where,
      code,
      signal: running.signal,
      onOffer: askOffer,
      openSink,
      onState,
      onProgress: progressReporter(),
    });
    if (result.kind === "text") {
      ui.receivedText.textContent = result.text;
      ui.receivedBox.hidden = false;
      setState("done", "Text received.");
    } else {
      setState("done", `${result.name} (${bytes(result.size)}) received: it is in your downloads.`);
    }
  } catch (error) {
    failed(error);
  } finally {
    running = null;
  }
}

// -- code completion: the PGP words after the nameplate number, as the CLI completes them

function updateWords() {
  const value = ui.receiveCode.value;
  const parts = value.split("-");
  ui.words.replaceChildren();
  if (parts.length < 2 || !/^\d+$/.test(parts[0])) return;
  const position = parts.length - 2; // index of the word being typed
  const prefix = parts[parts.length - 1];
  if (!prefix) return;
  let words = [];
  try {
    words = completeWord(prefix, position) || [];
  } catch {
    return;
  }
  const head = parts.slice(0, -1).join("-");
  for (const word of words.slice(0, 20)) {
    const option = document.createElement("option");
    option.value = `${head}-${word}`;
    ui.words.append(option);
  }
}

// -- wiring

function choose(what) {
  picked = what;
  ui.fileChosen.textContent = describe(picked);
  ui.clearFile.hidden = picked === null;
  // the inputs show only what was picked in them
  if (picked === null || picked.from !== "files") ui.sendFile.value = "";
  if (picked === null || picked.from !== "folder") ui.sendFolder.value = "";
}

function pickFailed(error) {
  choose(null);
  if (!(error instanceof PickError)) throw error;
  clearTransfer();
  setState("failed", `${error.message} Nothing was sent.`);
}

ui.sendButton.addEventListener("click", startSend);
ui.receiveButton.addEventListener("click", startReceive);
ui.receiveCode.addEventListener("input", updateWords);
ui.receiveCode.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !ui.receiveButton.disabled) startReceive();
});
ui.sendFile.addEventListener("change", () => {
  const what = fromFiles(ui.sendFile.files);
  choose(what && { ...what, from: "files" });
});
ui.sendFolder.addEventListener("change", () => {
  try {
    choose({ ...fromFolderInput(ui.sendFolder.files), from: "folder" });
  } catch (error) {
    pickFailed(error);
  }
});
ui.clearFile.addEventListener("click", () => {
  choose(null);
  ui.sendFile.focus();
});
// a file dropped anywhere on the page is the file to send (never opened in place of the page)
window.addEventListener("dragover", (event) => {
  event.preventDefault();
  ui.drop.classList.add("over");
});
window.addEventListener("dragleave", (event) => {
  if (!event.relatedTarget) ui.drop.classList.remove("over");
});
window.addEventListener("drop", (event) => {
  event.preventDefault();
  ui.drop.classList.remove("over");
  fromDrop(event.dataTransfer).then((what) => what && choose({ ...what, from: "drop" }), pickFailed);
});
ui.cancel.addEventListener("click", () => running && running.abort());
ui.reset.addEventListener("click", () => {
  clearTransfer();
  setState("idle", "Nothing is being sent or received.");
});
async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Select and copy by hand";
  }
  const label = { "copy-code": "Copy code", "copy-link": "Copy link" }[button.id] ?? "Copy text";
  setTimeout(() => (button.textContent = label), 2000);
}
ui.copyCode.addEventListener("click", () => copy(ui.code.textContent, ui.copyCode));
ui.copyLink.addEventListener("click", () => copy(ui.codeLink.href, ui.copyLink));
ui.copyText.addEventListener("click", () => copy(ui.receivedText.textContent, ui.copyText));
setState("idle");

// A link BASE/#CODE starts receiving at once (an offered file still waits for Accept); the
// fragment is taken out of the address bar once read, so the code stays out of the history.
function receiveFromLink() {
  const found = codeFromFragment(location.hash);
  if (found === null) return;
  forgetFragment();
  if (running) {
    say("A link to receive with was opened while a transfer runs: it was not used.");
    return;
  }
  if (found.error) {
    clearTransfer();
    setState("failed", found.error);
    ui.receiveCode.focus();
    return;
  }
  ui.receiveCode.value = found.code;
  startReceive();
}
window.addEventListener("hashchange", receiveFromLink);
receiveFromLink();
