"""Running a server as a process does: until SIGTERM or SIGINT, then a clean stop;
SIGHUP reloads the settings and the rules (server/reloader.py).

`run(config)` is what `pigeonhole serve` calls once its options are a ServerConfig
(uvicorn's Config -> Server.run shape): the event loop (uvloop when installed), the
signal handlers (removed again on the way out), start, the collector tuned for a
long-lived heap, wait, stop. A store that cannot be opened raises StoreError.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal

from pigeonhole.config import ServerConfig
from pigeonhole.server.app import MailboxServer
from pigeonhole.server.reloader import ReadConfig

log = logging.getLogger("pigeonhole.serve")

#: the signals that stop the server (systemd sends SIGTERM; Ctrl-C is SIGINT)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: the signal that reloads (`systemctl reload` sends it: the unit's ExecReload)
RELOAD_SIGNAL = signal.SIGHUP


def run(config: ServerConfig, read_config: ReadConfig | None = None) -> None:
    """Serve `config` until a stop signal (blocks; the main thread only); on SIGHUP the
    settings are read again by `read_config` (None: only the rules) and taken live."""
    _install_uvloop()
    asyncio.run(serve_until_signalled(config, read_config))


async def serve_until_signalled(
    config: ServerConfig, read_config: ReadConfig | None = None
) -> None:
    """Start the server, wait for SIGTERM or SIGINT, stop it (also if starting failed);
    each SIGHUP meanwhile reloads the settings and the rules (server/reloader.py)."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    server = MailboxServer(config, read_config=read_config)
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stopping.set)
    loop.add_signal_handler(RELOAD_SIGNAL, _reload, server)
    try:
        await server.start()
        _tune_gc()
        await stopping.wait()
        log.info("signal received, shutting down")
    finally:
        for sig in (*STOP_SIGNALS, RELOAD_SIGNAL):
            loop.remove_signal_handler(sig)
        await server.stop()


def _reload(server: MailboxServer) -> None:
    log.info("SIGHUP received: reading the settings and rules again")
    server.ctx.tasks.spawn(server.reload())


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


#: new container objects between collections of the youngest generation (CPython: 700)
YOUNG_OBJECTS = 10_000


def _tune_gc() -> None:
    """Shorter and rarer collector pauses, each of which stalls every connection.

    What exists once the server has started (modules, loaded state) lives as long as the
    process: frozen, it is out of the collector's sight (a full collection at 100
    exchanges in flight takes 12 ms frozen against 28-31 ms unfrozen).

    The youngest generation is collected after YOUNG_OBJECTS new objects instead of 700.
    An exchange's objects live as long as the exchange, a few hundred ms in flight; at 700
    nearly all of them outlived two young collections and were promoted to the oldest
    generation, so full collections came every few seconds, and each one walks every
    long-lived object: beside 15,000 waiting clients one took 210 ms instead of 35 ms and
    the collector's time per exchange doubled (0.11 -> 0.23 ms at 200 in flight). At
    10,000 they die young, and a connection that ends is in no reference cycle
    (server/connection.py `connection_lost`), so what an exchange leaves is freed as it
    goes, not kept for a full collection that now comes rarely: a few young collections
    a second, no full one in minutes (`bench/README.md`, "The collector, the readers'
    touch and SQLite's rows in creation order"). Full collections come after 100
    middle-generation ones instead of 10.
    """
    gc.collect()
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, 100)
