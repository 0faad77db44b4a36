"""A reload without a restart (server/reloader.py): the settings read again as `serve`
reads them, the rules with them; live settings taken, restart-only ones kept; open
connections of newly denied addresses told why and closed, no other; a bad file changes
nothing and says where it is wrong."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from pigeonhole.cli.reload import ConfigReader
from pigeonhole.cli.serve import ENV_PREFIX, refuse_contradictions, serve
from pigeonhole.server.app import MailboxServer
from tests.server.status_support import status
from tests.support.server import APPID, Client, FakeClock, open_client

pytestmark = pytest.mark.asyncio

DENIED = "Your network is blocked since the last reload"


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No PIGEONHOLE_* from outside; the log level a reload sets is put back after."""
    for name in [n for n in os.environ if n.startswith("PIGEONHOLE_")]:
        monkeypatch.delenv(name)
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


class Files:
    """The settings file and the rule file a served server reads, and its reader."""

    def __init__(self, tmp_path: Path, data_dir: Path, store: str | None) -> None:
        self.toml = tmp_path / "pigeonhole.toml"
        self.rules = tmp_path / "deny.txt"
        args = ["--config", str(self.toml), "--data-dir", str(data_dir), "--host", "127.0.0.1"]
        args += ["--port", "0", "--admin-port", "0", "--transit-port", "0"]
        args += ["--deny-file", str(self.rules)]
        if store is not None:
            args += ["--store", store]
        self.reader = ConfigReader(serve, args, refuse_contradictions, ENV_PREFIX)

    def write(self, toml: str, rules: str) -> None:
        self.toml.write_text(toml)
        self.rules.write_text(rules)


@asynccontextmanager
async def served(files: Files, clock: FakeClock) -> AsyncIterator[MailboxServer]:
    """A server started from the files as `serve` starts one, reloading as it does."""
    async with MailboxServer(files.reader.read(), clock, files.reader.read) as srv:
        yield srv


@pytest.fixture
def files(tmp_path: Path, data_dir: Path, store: str | None) -> Files:
    return Files(tmp_path, data_dir, store)


async def client_at(srv: MailboxServer, address: str, side: str) -> Client:
    client = await open_client(srv.url, {"X-Real-IP": address})
    await client.bind(APPID, side)
    return client


async def test_live_settings_apply_at_once_and_restart_only_ones_are_kept(
    files: Files, clock: FakeClock
) -> None:
    files.write('motd = "before"\nhashcash-bits = 20\n', "")
    async with served(files, clock) as srv:
        port = srv.port
        files.write(
            'motd = "after"\ncommit-sync = "loop"\nmax-creations = 9\nlog-level = "DEBUG"\n',
            "notice 192.0.2.0/24 Hello from the rules\n",
        )
        result = await srv.reload()
        assert result.ok, result.summary
        assert set(result.changed) == {
            "--motd before -> after",
            "--max-creations 4 -> 9",
            "--log-level INFO -> DEBUG",
        }
        assert result.needs_restart == ("--commit-sync process -> loop",)
        assert result.rules == 1 and result.closed == 0
        c = srv.config
        assert (c.commit_sync, c.motd, c.limits.max_creations) == ("process", "after", 9)
        assert logging.getLogger().level == logging.DEBUG
        fresh = await open_client(srv.url)
        assert fresh.welcome["motd"] == "after"
        noticed = await open_client(srv.url, {"X-Real-IP": "192.0.2.8"})
        assert noticed.welcome["motd"] == "Hello from the rules\n\nafter"
        assert srv.port == port
        shown = await status(srv)
        assert shown["reload"]["ok"] and shown["reload"]["at"] > 0
        assert shown["reload"]["needs_restart"] == ["--commit-sync process -> loop"]
        assert shown["figures"]["pigeonhole_reloads_total"] == {"ok": 1}
        assert shown["rules"]["notice"] == 1
        for client in (fresh, noticed):
            await client.disconnect()


async def test_a_reload_closes_the_newly_denied_and_no_other(
    files: Files, clock: FakeClock
) -> None:
    """A waiting sender from an address still served keeps its mailbox and completes with
    a receiver that comes after the reload; the newly denied one gets the reason."""
    files.write("", "deny 198.51.100.0/24 already denied\n")
    async with served(files, clock) as srv:
        sender = await client_at(srv, "192.0.2.10", "sender")
        mailbox = await sender.claim("7")
        assert await sender.open(mailbox) == []
        await sender.add("pake", "aa" * 16)
        doomed = await client_at(srv, "203.0.113.44", "doomed")
        other = await client_at(srv, "2001:db8::44", "other")
        files.write("", f"deny 198.51.100.0/24 already denied\ndeny 203.0.113.0/24 {DENIED}\n")
        result = await srv.reload()
        assert result.ok and result.closed == 1, result
        assert (await srv.reload()).closed == 0  # told and closing already: not twice
        error = await doomed.next()
        assert error["type"] == "error" and error["error"] == DENIED and error["orig"] == {}
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(doomed.ws.recv(), 5)
        assert (doomed.ws.close_code, doomed.ws.close_reason) == (1008, DENIED)
        # the others are open and served; the waiting sender completes its exchange
        await other.quiet()
        await sender.quiet()
        receiver = await client_at(srv, "192.0.2.11", "receiver")
        assert await receiver.claim("7") == mailbox
        got = await receiver.open(mailbox)
        assert [(m["side"], m["phase"]) for m in got] == [("sender", "pake")]
        await receiver.add("pake", "bb" * 16)
        assert (await sender.next_non_ack())["side"] == "receiver"
        figures = (await status(srv))["figures"]
        assert figures["pigeonhole_denied_by_rule_total"] == {"mailbox": 1}
        for client in (sender, other, receiver):
            await client.disconnect()


@pytest.mark.parametrize(
    ("toml", "rules", "where"),
    [
        ('motd = "changed"\n', "deny 192.0.2.0/24 fine\ndeny 10.0.0.1/8 typo\n", "deny.txt:2: "),
        ('motd = "changed"\nhashcash-bits = 99\n', "", "pigeonhole.toml:2: 'hashcash-bits = 99'"),
        ('motd = "changed"\nport = = 1\n', "", "pigeonhole.toml: "),
        ('motd = "changed"\nlog-level = "LOUD"\n', "", "--log-level: no level named 'LOUD'"),
    ],
    ids=["bad rule", "out of bounds", "bad toml", "bad log level"],
)
async def test_a_bad_file_changes_nothing_and_says_where(
    files: Files, clock: FakeClock, toml: str, rules: str, where: str
) -> None:
    files.write('motd = "kept"\n', "deny 203.0.113.0/24 still denied\n")
    async with served(files, clock) as srv:
        kept = srv.config
        files.write(toml, rules)
        result = await srv.reload()
        assert not result.ok and where in result.summary, result.summary
        assert result.summary.startswith("refused, nothing changed: ")
        assert srv.config is kept
        assert srv.ctx.settings.rules.match("203.0.113.1") is not None
        assert srv.ctx.settings.rules.match("192.0.2.1") is None
        client = await open_client(srv.url)
        assert client.welcome["motd"] == "kept"
        await client.disconnect()
        shown = await status(srv)
        assert shown["reload"]["ok"] is False and where in shown["reload"]["summary"]
        assert shown["figures"]["pigeonhole_reloads_total"] == {"refused": 1}


async def test_the_policy_ledger_relay_and_archive_take_their_new_bounds(
    files: Files, clock: FakeClock
) -> None:
    files.write('permissions = "hashcash"\nhashcash-bits = 10\n', "")
    async with served(files, clock) as srv:
        first = await open_client(srv.url)
        assert first.welcome["permission-required"]["hashcash"]["bits"] == 10
        files.write(
            'permissions = "hashcash"\nhashcash-bits = 12\ntransit-max-rate = 5000\n'
            "max-stored-bytes = 4096\narchive-max-bytes = 8192\narchive-min-pow = 0.5\n",
            "",
        )
        assert (await srv.reload()).ok
        second = await open_client(srv.url)
        assert second.welcome["permission-required"]["hashcash"]["bits"] == 12
        assert srv.ctx.ledger.limits.max_stored_bytes == 4096
        assert srv.ctx.transit is not None
        assert srv.ctx.transit.relay.config.max_rate_bytes_per_second == 5000
        assert srv.ctx.archive is not None
        assert srv.ctx.archive.figures()["max_bytes"] == 8192
        assert srv.ctx.archive.quota.max_bytes == 8192
        assert srv.ctx.archive.config.min_pow == 0.5
        for client in (first, second):
            await client.disconnect()


@pytest.mark.sqlite_only
async def test_a_reload_while_the_store_is_stuck_takes_effect_and_loses_nothing(
    files: Files, clock: FakeClock
) -> None:
    """The store helper stopped with a claim in its pipe: the reload does not wait for
    storage; the new motd is served at once, and the claim is answered once it resumes."""
    files.write('motd = "before"\n', "")
    async with served(files, clock) as srv:
        helper = srv.ctx.storage.helper
        assert helper is not None and helper.pid is not None
        waiting = await client_at(srv, "192.0.2.20", "waiting")
        os.kill(helper.pid, signal.SIGSTOP)  # our own server's child
        try:
            await waiting.send("claim", nameplate="3")
            files.write('motd = "after"\n', f"deny 203.0.113.0/24 {DENIED}\n")
            result = await asyncio.wait_for(srv.reload(), 10)
            assert result.ok and result.changed == ("--motd before -> after",)
            fresh = await open_client(srv.url)
            assert fresh.welcome["motd"] == "after"
            await fresh.disconnect()
        finally:
            os.kill(helper.pid, signal.SIGCONT)
        await waiting.expect_ack()
        assert (await waiting.next())["type"] == "claimed"
        await waiting.disconnect()
