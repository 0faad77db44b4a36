// Builds the browser page into src/pigeonhole/web/assets/, which `pigeonhole serve` serves:
// app.js, sw.js and transit-worker.js bundled by esbuild (ES modules, minified, no inline code: the page's
// Content-Security-Policy allows only its own files), index.html and style.css copied.
// Run by scripts/setup after `npm ci`; by hand: `node web/build.mjs`.
import { build } from "esbuild";
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const web = dirname(fileURLToPath(import.meta.url));
const page = join(web, "src", "page");
const out = join(web, "..", "src", "pigeonhole", "web", "assets");

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  entryPoints: [join(page, "app.js"), join(page, "sw.js"), join(page, "transit-worker.js")],
  outdir: out,
  bundle: true,
  format: "esm",
  minify: true,
  target: ["chrome110", "firefox115", "safari16"],
  legalComments: "eof",
  logLevel: "warning",
});
for (const name of ["index.html", "style.css"]) {
  await copyFile(join(page, name), join(out, name));
}
console.log(`web page built in ${out}`);
