// A test-only build of the page's transit worker (web/testing/build-probe.mjs builds it; the
// browser tests serve it in place of /web/transit-worker.js, tests/web/web_support.py): the
// same worker, which also says what it did in globals the tests read with the worker's
// evaluate(): `self.box`, the library that seals the records ("libsodium" or
// "@noble/ciphers"), and `self.carried`, the plaintext bytes it sealed and opened.
import sodium from "libsodium";
import { loadBox } from "../src/wormhole/records-box.js";
import { serveWorker } from "../src/wormhole/worker-transit.js";

const box = loadBox(sodium);
box.then(({ name }) => (self.box = name));
self.carried = { sent: 0, received: 0 };
serveWorker(self, box, self.carried);
