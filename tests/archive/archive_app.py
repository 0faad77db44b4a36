"""Serve an archive app on 127.0.0.1 (a free port) for the kill -9 test.

Usage: python archive_app.py DATA_DIR. Prints the port on stdout once listening,
then serves until killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiohttp import web

from pigeonhole.archive.config import ArchiveConfig
from pigeonhole.archive.endpoint import add_archive_routes


async def main(data_dir: Path) -> None:
    app = web.Application()
    add_archive_routes(app, ArchiveConfig(data_dir=data_dir, min_pow=0.0))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
