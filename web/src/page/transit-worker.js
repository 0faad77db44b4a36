// The page's transit worker (/web/transit-worker.js, a module worker): the relay's WebSocket
// and the records' encryption run here, beside the page's thread (../wormhole/worker-transit.js).
// The page posts {op: "port"} with one MessagePort per transfer.
import sodium from "libsodium";
import { loadBox } from "../wormhole/records-box.js";
import { serveWorker } from "../wormhole/worker-transit.js";

// Records are sealed by libsodium's WebAssembly (the page's CSP allows 'wasm-unsafe-eval'
// for it), or by plain JS where the browser allows no WebAssembly.
serveWorker(self, loadBox(sodium));
