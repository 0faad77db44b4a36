"""PID 1 of the private net+mount+pid namespace that the interop clients run in.

Started by `tests.support.netns.NetNS` as
`unshare --net --mount --pid --fork --kill-child python ns_holder.py FD HOSTS`.
It brings `lo` up, bind-mounts HOSTS over /etc/hosts (only inside the namespace:
`transit.magic-wormhole.io` -> 127.0.0.1, for wormhole-william's fixed transit
relay), says `ready` on the SOCK_SEQPACKET socket FD, and then answers each
request `PORT` with a TCP socket listening on 127.0.0.1:PORT *inside* the
namespace, passed back with SCM_RIGHTS. The test process accepts on those
sockets and forwards to the real server and relay on the host's loopback.

When the test process closes its end (or dies), this process exits, and the
kernel kills every process left in the namespace with it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys


def setup(hosts: str) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
    subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True, capture_output=True)


def listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def connected(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def answer(request: bytes) -> socket.socket:
    """`PORT`: a listener on 127.0.0.1:PORT; `connect PORT`: a connection to it."""
    if request.startswith(b"connect "):
        return connected(int(request.split()[1]))
    return listener(int(request))


def main() -> int:
    ctl = socket.socket(fileno=int(sys.argv[1]))
    try:
        setup(sys.argv[2])
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        ctl.send(b"error: " + str(exc).encode() + b" " + detail.strip())
        return 1
    # As PID 1 we inherit orphans (clients whose nsenter was killed): reap them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ctl.send(b"ready")
    while True:
        request = ctl.recv(64)
        if not request:
            return 0
        try:
            sock = answer(request)
        except (OSError, ValueError) as exc:
            ctl.send(b"error: " + str(exc).encode())
            continue
        socket.send_fds(ctl, [b"ok"], [sock.fileno()])
        sock.close()


if __name__ == "__main__":
    sys.exit(main())
