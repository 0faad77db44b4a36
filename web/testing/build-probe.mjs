// Builds the test-only transit worker (transit-worker-probe.js) to the path given, as
// web/build.mjs builds the page's own: `node web/testing/build-probe.mjs OUT.js`.
import { build } from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const out = process.argv[2];
if (!out) throw new Error("usage: node build-probe.mjs OUT.js");
await build({
  entryPoints: [join(dirname(fileURLToPath(import.meta.url)), "transit-worker-probe.js")],
  outfile: out,
  bundle: true,
  format: "esm",
  minify: true,
  target: ["chrome110", "firefox115", "safari16"],
  logLevel: "warning",
});
