// Runs Python snippets in the project's .venv (python-spake2, magic-wormhole, PyNaCl and
// Pigeonhole itself are installed there by `scripts/setup --test`), so the JS is checked
// against the reference implementations rather than against numbers copied into the tests.

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const WEB_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const PYTHON = resolve(WEB_DIR, process.env.PIGEONHOLE_PYTHON ?? "../.venv/bin/python");
export const VENV_BIN = dirname(PYTHON);

if (!existsSync(PYTHON)) {
  throw new Error(`no Python at ${PYTHON}: run scripts/setup --test, or set PIGEONHOLE_PYTHON`);
}

// Runs `code` with `input` as JSON on stdin; the code prints one JSON value, returned here.
export function python(code, input = null) {
  const run = spawnSync(PYTHON, ["-c", code], {
    input: JSON.stringify(input),
    encoding: "utf8",
    timeout: 120_000,
  });
  if (run.status !== 0) throw new Error(`python failed (${run.status}): ${run.stderr}`);
  return JSON.parse(run.stdout);
}

export const hex = (bytes) => Buffer.from(bytes).toString("hex");
export const unhex = (text) => new Uint8Array(Buffer.from(text, "hex"));
