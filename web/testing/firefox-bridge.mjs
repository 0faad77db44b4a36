// Debian's Firefox ESR for the Python end-to-end tests (tests/web/engines.py), driven by
// puppeteer-core over WebDriver BiDi (built into Firefox: no geckodriver, no browser
// download). Headless, a fresh profile, downloads saved without asking into the directory
// given. Reads one JSON command a line on stdin and answers one JSON line on stdout:
//   {"op": "goto", "url"}                    -> {"ok": true}   (in a new tab; the last one closed)
//   {"op": "eval", "expr"}                   -> {"ok": true, "value": <the expression's JSON value, awaited>}
//   {"op": "files", "selector", "paths"}     -> {"ok": true}   (a file input's files)
//   {"op": "close"}                          -> {"ok": true}, then exits
// A failed command answers {"ok": false, "error": "..."}. Usage: node firefox-bridge.mjs DOWNLOADS_DIR

import { createInterface } from "node:readline";
import puppeteer from "puppeteer-core";

const downloads = process.argv[2];
const browser = await puppeteer.launch({
  browser: "firefox",
  executablePath: process.env.FIREFOX ?? "/usr/bin/firefox-esr",
  headless: true,
  protocolTimeout: 120_000,
  extraPrefsFirefox: {
    "browser.download.dir": downloads,
    "browser.download.folderList": 2,
    "browser.download.useDownloadDir": true,
    "browser.download.always_ask_before_handling_new_types": false,
    "browser.download.start_downloads_in_tmp_dir": false,
    "browser.download.alwaysOpenPanel": false,
    "browser.helperApps.neverAsk.saveToDisk": "application/octet-stream,application/zip",
  },
});
let page = await browser.newPage();
page.setDefaultTimeout(120_000);

async function run(command) {
  switch (command.op) {
    case "goto": {
      // a fresh tab each time: the last one may still be busy with a download
      const old = page;
      page = await browser.newPage();
      page.setDefaultTimeout(120_000);
      await old.close();
      await page.goto(command.url, { waitUntil: "load" });
      return undefined;
    }
    case "eval":
      return page.evaluate(command.expr);
    case "files": {
      const input = await page.$(command.selector);
      if (input === null) throw new Error(`no element ${command.selector}`);
      await input.uploadFile(...command.paths);
      return undefined;
    }
    case "close":
      await browser.close();
      return undefined;
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

const answer = (reply) => process.stdout.write(`${JSON.stringify(reply)}\n`);
answer({ ok: true, value: await browser.version() }); // started
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  try {
    const value = await run(command);
    answer({ ok: true, value: value ?? null });
  } catch (err) {
    answer({ ok: false, error: String(err?.stack ?? err) });
  }
  if (command.op === "close") process.exit(0);
}
await browser.close();
