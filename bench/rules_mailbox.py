"""What rules cost a serving mailbox, and what a reload stalls: `pigeonhole serve` with no
rules against 10,000 (`--deny-file`), and a SIGHUP under load.

Each round starts `pigeonhole serve` on a fresh data directory on disk with the bench
settings (per-address caps lifted: every client is 127.0.0.1) and runs `loadgen.py
exchanges` at one concurrency for a measured window; rounds alternate no rules and
10,000 rules (seeded networks of both families that do not cover loopback, so every
connection probes every prefix length and is served), and so does which goes first.
Printed: exchanges/s per round, the best of each and their ratio, the p99 of an
exchange's time, and the server's CPU per exchange (user + system over the run, from
/proc: on a machine shared with other work the steadier of the two measures).

Then the reload: a server with the 10,000 rules under the same load gets SIGHUP in the
middle of a window, once with only the settings changed (the motd; the rule file the same
bytes, so not parsed again) and once with the rules changed too (one added). Printed: the
reload's reading time (a worker thread) and its step on the event loop (the settings and
rules swapped in), both from `/status.json`, and the slowest exchange of each window
against the same of a window without a reload.

    .venv/bin/python bench/rules_mailbox.py [--rounds 2] [--measure 6] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from rules_lookup import rule_file

PYTHON = sys.executable
LOADGEN = str(Path(__file__).with_name("loadgen.py"))
LIFTED = [
    "--max-connections", "60000", "--max-connections-per-address", "60000",
    "--max-nameplates-per-address", "60000", "--max-mailboxes-per-address", "60000",
    "--max-stored-bytes-per-address", str(2**40),
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def not_loopback(text: str) -> str:
    """The rules with any that would cover 127.0.0.0/8 or ::1 left out."""
    kept = []
    for line in text.splitlines():
        net = line.split()[1]
        if net.startswith(("127.", "::/", "::1", "0.0.0.0/")):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


class Serve:
    def __init__(self, work: Path, rules: Path | None, toml: Path) -> None:
        self.port, self.admin = free_port(), free_port()
        data = work / f"data-{self.port}"
        args = [PYTHON, "-m", "pigeonhole", "serve", "--port", str(self.port)]
        args += ["--admin-port", str(self.admin), "--transit-port", "0", "--data-dir", str(data)]
        args += ["--config", str(toml), "--log-level", "WARNING", *LIFTED]
        if rules is not None:
            args += ["--deny-file", str(rules)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIGEONHOLE_")}
        self.log = open(work / f"serve-{self.port}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not start: {(work / self.log.name).read_text()}")
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/health", timeout=1):
                return True
        except OSError:
            return False

    def status(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.admin}/status.json"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def cpu(self) -> float:
        """The server's CPU seconds so far (user + system, from /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


def load(port: int, concurrency: int, measure: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [PYTHON, LOADGEN, "exchanges", "--url", f"ws://127.0.0.1:{port}/v1",
             "--concurrency", str(concurrency), "--measure", str(measure), "--warmup", "2",
             "--output", out.name],
            timeout=300, check=True,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(Path(out.name).read_text())
    return result


def rate(result: dict[str, Any], measure: float) -> float:
    return float(result["completed_in_window"]) / measure


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--measure", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rules", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pigeonhole-rules-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        toml = work / "pigeonhole.toml"
        toml.write_text('motd = "bench"\n')
        rules = work / "deny.txt"
        text = not_loopback(rule_file(args.rules, random.Random(36)))
        rules.write_text(text)
        count = len(text.splitlines())
        rates: dict[str, list[float]] = {"none": [], "rules": []}
        slow: dict[str, list[float]] = {"none": [], "rules": []}
        cpu: dict[str, list[float]] = {"none": [], "rules": []}
        for n in range(args.rounds):
            # the order alternates too: a server started second meets a warmer machine
            for name in ("none", "rules") if n % 2 == 0 else ("rules", "none"):
                server = Serve(work, rules if name == "rules" else None, toml)
                try:
                    before = server.cpu()
                    result = load(server.port, args.concurrency, args.measure)
                    used = server.cpu() - before
                finally:
                    server.stop()
                rates[name].append(rate(result, args.measure))
                slow[name].append(p99(result["exchange_seconds"]))
                cpu[name].append(used / max(1, result["completed_total"]))
                print(
                    f"round {n + 1} {name:5}: {rates[name][-1]:7.1f} exchanges/s,"
                    f" p99 {slow[name][-1] * 1000:6.1f} ms, server CPU"
                    f" {cpu[name][-1] * 1000:.2f} ms/exchange, failed {result['failed']}"
                )
        none, many = max(rates["none"]), max(rates["rules"])
        print(f"best: no rules {none:.1f}/s, {count} rules {many:.1f}/s ({many / none:.2f}x)")
        low, high = statistics.median(cpu["none"]), statistics.median(cpu["rules"])
        print(
            f"server CPU per exchange, medians: no rules {low * 1000:.2f} ms,"
            f" {count} rules {high * 1000:.2f} ms ({high / low:.2f}x)"
        )

        server = Serve(work, rules, toml)
        try:
            plain = load(server.port, args.concurrency, args.measure)
            print(
                f"no reload: slowest exchange {max(plain['exchange_seconds']) * 1000:.1f} ms,"
                f" {rate(plain, args.measure):.1f} exchanges/s"
            )
            for what, extra in (("settings only", ""), ("rules changed", "deny 192.0.2.0/24 x\n")):

                def hup(motd: str = what, more: str = extra) -> None:
                    time.sleep(2 + args.measure / 2)  # the warm-up, then mid-window
                    toml.write_text(f'motd = "{motd}"\n')
                    rules.write_text(text + more)
                    server.proc.send_signal(signal.SIGHUP)

                sender = threading.Thread(target=hup)
                sender.start()
                reloaded = load(server.port, args.concurrency, args.measure)
                sender.join()
                shown = server.status()["reload"]
                assert shown is not None and shown["ok"], shown
                print(
                    f"reload, {what} ({shown['rules']} rules): read {shown['read'] * 1000:.1f} ms"
                    f" in a worker thread, {shown['pause'] * 1000:.2f} ms on the event loop;"
                    f" slowest exchange {max(reloaded['exchange_seconds']) * 1000:.1f} ms,"
                    f" {rate(reloaded, args.measure):.1f} exchanges/s"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
