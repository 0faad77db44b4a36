"""The browser client's core without the page: `Wormhole.send`/`Wormhole.receive` on a blank
page of headless Chromium (tests/web/client_bundle.py), against the `wormhole` CLI through
`pigeonhole serve`. There the relay's bytes go over a `WebSocketStream`, which reads only
as fast as the sink writes (back-pressure on receive): the CLI sends 6 MiB to a sink that
takes 20 ms a write, and Chromium sends 5 MiB (a `File`, read in slices) to the CLI;
sha256 equal both ways. (Node, where web/test/interop.test.js runs the same core against
the CLIs, has no `WebSocketStream`: there the bytes come over the plain `WebSocket`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.relay import ServedRelay
from tests.web.client_bundle import HEX, client_bundle
from tests.web.web_support import MIB, Cli, random_file, sha256_file

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TO_CHROMIUM = 6 * MIB + 5
FROM_CHROMIUM = 5 * MIB + 3

#: receives with a sink that takes 20 ms a write; counts the WebSocketStreams the client
#: opens (the global one, wrapped: the client picks it up where the runtime has one)
RECEIVE_SLOWLY = f"""async (where) => {{
  const Native = globalThis.WebSocketStream;
  let streams = 0;
  if (Native) {{
    globalThis.WebSocketStream = class extends Native {{
      constructor(...args) {{ super(...args); streams++; }}
    }};
  }}
  const chunks = [];
  let writes = 0;
  try {{
    const result = await Wormhole.receive({{ ...where,
      onOffer: async () => true,
      openSink: async () => ({{
        write: async (bytes) => {{
          chunks.push(bytes.slice());
          writes++;
          await new Promise((r) => setTimeout(r, 20));
        }},
        close: async () => {{}},
        abort: async () => {{}},
      }}),
    }});
    const hash = Wormhole.sha256.create();
    for (const c of chunks) hash.update(c);
    return {{ result, writes, native: typeof Native, streams, sha256: ({HEX})(hash.digest()) }};
  }} finally {{
    globalThis.WebSocketStream = Native;
  }}
}}"""

#: starts a send of `size` random bytes as a File; the code goes to globalThis.webjsCode,
#: the outcome (awaited later) to globalThis.webjsRun, a failure's text to globalThis.webjsError
START_SEND = f"""(where) => {{
  globalThis.webjsRun = (async () => {{
    const bytes = new Uint8Array(where.size);
    for (let at = 0; at < bytes.length; at += 65536) {{
      crypto.getRandomValues(bytes.subarray(at, at + 65536));
    }}
    const file = new File([bytes], "from-chromium.bin");
    const result = await Wormhole.send({{ ...where, file,
      onCode: (code) => (globalThis.webjsCode = code) }});
    return {{ result, sha256: ({HEX})(Wormhole.sha256(bytes)) }};
  }})();
  globalThis.webjsRun.catch((error) => (globalThis.webjsError = String(error?.stack ?? error)));
}}"""


@pytest.fixture
def blank(context: Any) -> Iterator[Any]:
    """A blank page (about:blank) of a fresh context with the client's core loaded."""
    page = context.new_page()
    page.add_script_tag(content=client_bundle())
    assert page.evaluate("typeof Wormhole.receive") == "function"
    try:
        yield page
    finally:
        page.close()


def where(web_server: ServedRelay) -> dict[str, Any]:
    """The server's addresses as the client takes them."""
    port = web_server.server.port
    return {
        "mailboxUrl": web_server.server.url,
        "transitUrl": f"ws://127.0.0.1:{port}/transit",
        "tcpRelay": {"host": "127.0.0.1", "port": web_server.port},
    }


def test_web_e2e_client_cli_sends_to_chromium_whose_sink_is_slow(
    blank: Any, cli: Cli, web_server: ServedRelay, tmp_path: Path
) -> None:
    """`wormhole send` -> Chromium over a WebSocketStream, a slow sink; sha256 equal."""
    source = random_file(tmp_path / "source", TO_CHROMIUM, name="to-chromium.bin")
    sender = cli.send(str(source))
    code = sender.wait_code()
    outcome = blank.evaluate(RECEIVE_SLOWLY, {**where(web_server), "code": code})
    assert outcome["native"] == "function", "this Chromium has WebSocketStream"
    assert outcome["streams"] >= 1, f"the client opened no WebSocketStream: {outcome}"
    assert outcome["result"] == {"kind": "file", "name": "to-chromium.bin", "size": TO_CHROMIUM}
    assert outcome["writes"] > 1
    assert outcome["sha256"] == sha256_file(source)
    sender.check(60)
    assert "Confirmation received" in sender.output, sender.describe()


def test_web_e2e_client_chromium_sends_to_the_cli(
    blank: Any, cli: Cli, web_server: ServedRelay
) -> None:
    """Chromium sends a File (read in slices) -> `wormhole receive`; sha256 equal."""
    blank.evaluate(START_SEND, {**where(web_server), "size": FROM_CHROMIUM})
    shown = blank.wait_for_function(
        "() => globalThis.webjsCode ? {code: webjsCode} : globalThis.webjsError", timeout=30_000
    ).json_value()
    assert isinstance(shown, dict), f"the send failed before a code: {shown}"
    code = shown["code"]
    receiver = cli.receive(code, file=True)
    outcome = blank.evaluate("() => globalThis.webjsRun")
    assert outcome["result"] == {"kind": "file", "bytes": FROM_CHROMIUM}
    receiver.check(120)
    assert sha256_file(receiver.received) == outcome["sha256"]
