"""Connections for batches and reads whose backends keep their heap between batches.

glibc's malloc (Debian's PostgreSQL and most others link it) gives freed memory at the top
of its heap back to the system once more than 128 KiB of it is free. A backend whose
batches each use a little more than that gives it back after every batch and faults it
in again in the next: 3 to 30 page faults per exchange in the crowd bench, more or fewer
by each backend's history, and about 55 µs of system time. glibc moves that threshold
itself after a large block it mapped is freed: it then keeps up to twice the block's size
of free heap, and serves allocations under the block's size from the heap. So each batch
and read connection makes and frees one such block as it opens (KEEP_HEAP); with another
allocator it is one 4 MiB allocation per connection and nothing more.
"""

from __future__ import annotations

from typing import Any

#: one allocation of 4 MiB made and freed by the backend: it keeps up to 8 MiB of freed heap
KEEP_HEAP = "SELECT octet_length(repeat('x', 4194304))"


async def keep_heap(conn: Any) -> None:
    """Have the connection's backend keep its heap (asyncpg's pool `init` takes this)."""
    await conn.fetchval(KEEP_HEAP)


async def connect(pg: Any, url: str) -> Any:
    """A connection (asyncpg's `pg.connect`) whose backend keeps its heap."""
    conn = await pg.connect(url)
    try:
        await keep_heap(conn)
    except BaseException:
        conn.terminate()
        raise
    return conn
