// The page's transit worker (/web/transit-worker.js, a module worker): the relay's WebSocket
// and the records' encryption run here, beside the page's thread (../wormhole/worker-transit.js).
// The page posts {op: "port"} with one MessagePort per transfer.
import sodium from "libsodium";
import { loadBox } from "../wormhole/records-box.js";
import { serveTransit } from "../wormhole/worker-transit.js";

// Records are sealed by libsodium's WebAssembly (the page's CSP allows 'wasm-unsafe-eval'
// for it), or by plain JS where the browser allows no WebAssembly. Tests read `self.box`.
const box = loadBox(sodium);
box.then(({ name }) => (self.box = name));

// bytes this worker sealed and opened, over all transfers (tests read it to see it worked)
self.carried = { sent: 0, received: 0 };

self.addEventListener("message", (event) => {
  if (event.data?.op === "port" && event.ports[0]) serveTransit(event.ports[0], self.carried, box);
});
