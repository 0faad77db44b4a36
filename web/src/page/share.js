// Sharing a code without reading it out: a link BASE/#CODE (the code in the fragment, which a
// browser never sends to the server, so it reaches no request and no log) and a QR code of
// that link, encoded by qrcode-generator (npm, locked in web/package-lock.json) and drawn
// here as one SVG path (no inline style: the page's Content-Security-Policy allows none).
import qrcode from "qrcode-generator";

const SVG = "http://www.w3.org/2000/svg";
// a code as the CLIs make and take it: the nameplate number, then one or more words
const CODE = /^\d+(-[a-z]+)+$/;

/** The link that opens this page and receives with `code`. */
export function codeLink(code, where = location) {
  return `${where.origin}${where.pathname}#${encodeURIComponent(code)}`;
}

/**
 * The code a link carries in its fragment: null when there is none, else {code} or
 * {error} (a fragment that is not a wormhole code, said so a person understands).
 */
export function codeFromFragment(hash) {
  let raw = (hash || "").replace(/^#/, "");
  if (!raw) return null;
  try {
    raw = decodeURIComponent(raw);
  } catch {
    // not percent-encoded properly: judged as it is below
  }
  const code = raw.trim().toLowerCase();
  if (CODE.test(code)) return { code };
  const shown = raw.length > 60 ? `${raw.slice(0, 60)}…` : raw;
  return {
    error:
      `The link's code "${shown}" is not a wormhole code (a number, then words, like ` +
      `7-guitarist-revenge). Ask the sender for the link again, or type the code below.`,
  };
}

/** Removes the fragment from the address bar (and the history entry), keeping the page. */
export function forgetFragment() {
  history.replaceState(history.state, "", `${location.pathname}${location.search}`);
}

/**
 * An <svg> of `text` as a QR code (error correction M, the version the text needs), dark
 * modules as one path on a light square with the four-module quiet zone readers need.
 */
export function qrSvg(text) {
  const qr = qrcode(0, "M");
  qr.addData(text, "Byte");
  qr.make();
  const n = qr.getModuleCount();
  const quiet = 4;
  const size = n + 2 * quiet;
  let d = "";
  for (let row = 0; row < n; row++) {
    for (let col = 0; col < n; col++) {
      if (qr.isDark(row, col)) d += `M${col + quiet} ${row + quiet}h1v1h-1z`;
    }
  }
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("shape-rendering", "crispEdges");
  const back = document.createElementNS(SVG, "rect");
  back.setAttribute("width", String(size));
  back.setAttribute("height", String(size));
  back.setAttribute("fill", "#ffffff");
  const dark = document.createElementNS(SVG, "path");
  dark.setAttribute("d", d);
  dark.setAttribute("fill", "#000000");
  svg.append(back, dark);
  return svg;
}
