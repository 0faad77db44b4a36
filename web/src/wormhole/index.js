// The browser's wormhole client: send and receive text and files with the `wormhole` CLIs
// through a Pigeonhole server's mailbox and WebSocket transit relay. No DOM: the page (and
// node's tests) drive it. Its contract with the page is in docs/web.md.

export { APPID } from "./session.js";
export { WormholeError } from "./errors.js";
export { send } from "./send.js";
export { receive } from "./receive.js";
export { completeWord } from "./words.js";
export { CODE } from "./wormhole.js";
export { mintHashcash } from "./hashcash.js";
