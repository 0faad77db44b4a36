"""The browser client's core (web/src/wormhole) as one script for a blank page, where it
runs without the page's UI: it defines the global `Wormhole` (`send`, `receive`, ...) and
`Wormhole.sha256` (@noble/hashes': about:blank is no secure context, so it has no
`crypto.subtle`). Built by web/'s own esbuild (`scripts/setup` installs it with `npm ci`).
Used by tests/web/test_web_e2e_client.py and bench/web_receive_memory.py.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[2] / "web"
ESBUILD = WEB / "node_modules" / ".bin" / "esbuild"
ENTRY = 'export * from "./src/wormhole/index.js"; export { sha256 } from "@noble/hashes/sha2.js";'
#: one script that sets the global `Wormhole`
OPTIONS = ("--bundle", "--format=iife", "--global-name=Wormhole", "--log-level=warning")

#: an expression: the hex of a byte array (the client's sha256 digests, compared with Python's)
HEX = '(bytes) => [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")'


@functools.cache
def client_bundle() -> str:
    """The script (an IIFE that sets the global `Wormhole`), built once per process."""
    if not ESBUILD.exists():
        pytest.skip(f"no {ESBUILD} (scripts/setup runs `npm ci` in web/)")
    built = subprocess.run(
        [str(ESBUILD), *OPTIONS],
        input=ENTRY,  # read from stdin, resolved from web/
        cwd=WEB,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, f"esbuild failed:\n{built.stderr}"
    return built.stdout
