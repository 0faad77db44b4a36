"""The pipes splice pumps move bytes through (splice.py), lent by the relay's `PipePool`.

Pipes are lent, not owned. A pipe's size sets how much one callback moves, so it sets
the cost per GB (measured at 100 pairs: 1 MiB pipes cost ~2/3 of 512 KiB ones, 64 KiB
ones ~3x, 8 KiB ones ~10x). But pipe memory is limited per user: without CAP_SYS_RESOURCE (the
systemd unit's DynamicUser), once a user's pipes hold `fs.pipe-user-pages-soft` pages
(16384: 64 MiB) F_SETPIPE_SZ fails and every new pipe gets 2 pages (8 KiB), so two pipes
of the full size for each of 100 pairs cannot be had. A pipe holds bytes only between
the two splices of a move, though, and on one event loop only the flows whose receiver
is full keep bytes in theirs. So a flow borrows a pipe from its relay's `PipePool` when
it moves and gives it back as soon as it is empty: a relay whose receivers keep up
needs far fewer full-size pipes than two per pair, and only a flow held up by its
receiver keeps one (its buffer, at most `direction_buffer_bytes`). Pipes are made
at that size while the process's pipes stay within `PipePages` (7/8 of the user's
limit, read from /proc once, when the first relay of the process starts), smaller past
it; with no descriptor left for a pipe, a move copies one slice through Python instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from pathlib import Path

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
PAGE = os.sysconf("SC_PAGE_SIZE")
#: empty pipes a relay keeps for the next moves (more are closed when given back): enough
#: that a busy relay does not close and remake pipes as the number lent moves (100 fast
#: pairs in the benchmark have up to 57 lent at once; keeping 8 remakes ~370 in 5 s)
KEEP_FREE_PIPES = 64
#: capabilities: CAP_SYS_RESOURCE lifts the per-user pipe limit and pipe-max-size,
#: CAP_SYS_ADMIN the per-user limit only
CAP_SYS_RESOURCE = 1 << 24
CAP_SYS_ADMIN = 1 << 21


def _sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys/fs", name).read_text())
    except (OSError, ValueError):
        return None


def _capabilities() -> int:
    """This process's effective capabilities (0 when they cannot be read)."""
    try:
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(row.split()[1], 16) for row in status if row.startswith("CapEff:"))
    except (OSError, ValueError, StopIteration):
        return 0


def pipe_page_limit() -> int | None:
    """Pages this process's pipes may hold: 7/8 of the per-user soft limit (the rest for
    the user's other pipes); None when there is no limit or the process is exempt."""
    soft = _sysctl("pipe-user-pages-soft")
    if not soft or soft <= 0 or _capabilities() & (CAP_SYS_RESOURCE | CAP_SYS_ADMIN):
        return None
    return soft * 7 // 8


def pipe_size_limit() -> int | None:
    """The largest pipe this process may ask for (`fs.pipe-max-size`, 1 MiB by default;
    asking more fails and leaves the pipe as it was); None when exempt."""
    if _capabilities() & CAP_SYS_RESOURCE:
        return None
    return _sysctl("pipe-max-size")


class PipePages:
    """The pages every pump pipe of this process holds, within a limit (None: none)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def take(self, pages: int, needed: bool = False) -> bool:
        """Count `pages` more; unless `needed` (a pipe the kernel already sized), only
        within the limit. False: not granted."""
        if not needed and self.limit is not None and self.used + pages > self.limit:
            return False
        self.used += pages
        return True

    def give_back(self, pages: int) -> None:
        self.used -= pages


@functools.cache
def pipe_pages() -> PipePages:
    """The process's one page account (the per-user limit is the whole process's), made
    when the first pipe pool is."""
    return PipePages(pipe_page_limit())


class Pipe:
    """A non-blocking pipe: its two ends, its capacity in bytes, the account it is in."""

    __slots__ = ("capacity", "pages", "r", "w")

    def __init__(self, r: int, w: int, capacity: int, pages: PipePages) -> None:
        self.r, self.w, self.capacity, self.pages = r, w, capacity, pages

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)
        self.pages.give_back(self.capacity // PAGE)


class PipePool:
    """The empty pipes of one relay, lent to a flow for a move and given back empty."""

    __slots__ = ("_free", "created", "keep", "pages", "size")

    def __init__(self, size: int, keep: int = KEEP_FREE_PIPES) -> None:
        #: the size pipes are made at (a direction's buffer bound, within what the system
        #: lets this process ask for), pages permitting
        limit = pipe_size_limit()
        self.size = size if limit is None else min(size, limit)
        self.pages = pipe_pages()
        self.keep = keep
        self._free: list[Pipe] = []
        #: pipes made so far (each lent again and again)
        self.created = 0

    def borrow(self) -> Pipe:
        """An empty pipe; OSError when no descriptor is left for a new one."""
        if self._free:
            return self._free.pop()
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.created += 1
        capacity = fcntl.fcntl(w, F_GETPIPE_SZ)
        pages = self.pages
        pages.take(capacity // PAGE, needed=True)
        want = self.size
        if want > capacity:  # as large as the page account allows
            while want > capacity and not pages.take((want - capacity) // PAGE):
                want //= 2
            want = max(want, capacity)
        if want != capacity:
            with contextlib.suppress(OSError):  # refused: the pipe keeps its size
                fcntl.fcntl(w, F_SETPIPE_SZ, want)
            got = fcntl.fcntl(w, F_GETPIPE_SZ)
            pages.give_back((max(want, capacity) - got) // PAGE)
            capacity = got
        return Pipe(r, w, capacity, pages)

    def give_back(self, pipe: Pipe) -> None:
        """Take back an empty pipe (kept for the next move, or closed)."""
        if len(self._free) < self.keep:
            self._free.append(pipe)
        else:
            pipe.close()

    def close(self) -> None:
        for pipe in self._free:
            pipe.close()
        self._free.clear()
