"""The sync helper process: fdatasyncs the write-ahead logs each time it is asked.

Run by `ProcessSync` (store/sync_process.py) as `python -I sync_helper.py WAL...`, stdlib
only. Each byte read from stdin is one request; the requests read together are served by
one round of fdatasync over every log, then answered with one byte each on stdout: `k`
when every log was synced, `e` when one failed (the reason goes to stderr). A log that
does not exist yet holds no transaction and is skipped. End of input (the server closed
the pipe, or died) ends the process.

fdatasync on any descriptor of a file flushes that file, whoever wrote it; the server
writes each batch before it asks, so an answer covers every transaction written before
the request.
"""

from __future__ import annotations

import os
import sys


def serve(paths: list[str], requests: int, answers: int) -> None:
    fds: dict[str, int] = {}
    while True:
        try:
            asked = os.read(requests, 4096)
        except InterruptedError:  # pragma: no cover - PEP 475 retries this
            continue
        if not asked:
            return
        answer = b"k"
        for path in paths:
            try:
                fd = fds.get(path)
                if fd is None:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                    fds[path] = fd
                os.fdatasync(fd)
            except FileNotFoundError:
                continue
            except OSError as err:
                print(f"pigeonhole sync helper: fdatasync {path}: {err}", file=sys.stderr)
                answer = b"e"
        try:
            os.write(answers, answer * len(asked))
        except BrokenPipeError:
            return


if __name__ == "__main__":
    serve(sys.argv[1:], sys.stdin.fileno(), sys.stdout.fileno())
