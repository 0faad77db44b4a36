"""One set of figures: every declared counter and gauge is in /metrics, /status.json and
(tests/server/test_status_page.py) the status page, read from one snapshot; and nothing
the server counts is left undeclared."""

from __future__ import annotations

import ast
import gc
import json
import re
from pathlib import Path

from pigeonhole.server.figures import FIGURES, declared, snapshot
from pigeonhole.server.metrics import Metrics
from tests.server.status_support import exchange
from tests.support.server import http_get

SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\S+)$", re.M)


def _samples(text: str) -> dict[str, list[tuple[str, float]]]:
    found: dict[str, list[tuple[str, float]]] = {}
    for name, labels, value in SAMPLE.findall(text):
        found.setdefault(name, []).append((labels, float(value)))
    return found


async def test_every_declared_figure_is_in_metrics_and_status_json(make_server, bound):
    async with make_server() as srv:
        await exchange(bound, "1", srv=srv)
        names = {f.name for f in declared(srv.ctx)}
        # with a relay and an archive every figure is declared here (the store helper's
        # where it commits: SQLite)
        helper = {"pigeonhole_store_helper_starts_total"}
        every = {f.name for f in FIGURES}
        assert names == (every if srv.ctx.storage.helper_starts() is not None else every - helper)
        _, _, text = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
        _, _, body = await http_get(f"http://127.0.0.1:{srv.admin_port}/status.json")
        samples = _samples(text)
        shown = json.loads(body)["figures"]
        snap = snapshot(srv.ctx)
        for figure in declared(srv.ctx):
            assert f"# TYPE {figure.name} {figure.kind}" in text, figure.name
            assert figure.name in shown, figure.name
            value = snap.values[figure.name]
            if figure.labels:
                assert isinstance(shown[figure.name], dict)
            else:
                # the views agree with each other and with a snapshot taken after them
                # (gauges that move on their own aside)
                assert samples[figure.name][0][1] == shown[figure.name], figure.name
                if figure.kind == "counter" and "seconds" not in figure.name:
                    assert shown[figure.name] <= value, figure.name
        assert shown["pigeonhole_exchanges_finished_total"]["happy"] == 1
        assert samples["pigeonhole_commit_latency_seconds_count"][0][1] >= 1


async def test_a_part_that_is_off_declares_none_of_its_figures(make_server):
    async with make_server(transit=False, archive=False, commit_sync="loop") as srv:
        names = {f.name for f in declared(srv.ctx)}
        _, _, text = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
        assert not any(n.startswith(("pigeonhole_transit_", "pigeonhole_archive_")) for n in names)
        assert "pigeonhole_store_helper_starts_total" not in names
        assert "pigeonhole_transit_" not in text and "pigeonhole_archive_" not in text


def test_every_counter_the_server_keeps_is_declared() -> None:
    """A field added to Metrics without a figure fails here (the histogram's are its own)."""
    source = (Path(__file__).parents[2] / "src/pigeonhole/server/figures.py").read_text()
    reads = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "metrics"
    }
    histogram = {"commit_buckets", "commit_count", "commit_sum"}
    assert set(Metrics.__dataclass_fields__) - histogram <= reads, reads


async def test_the_collectors_pauses_are_counted_by_generation(make_server):
    """A full collection forced here shows in /metrics as one more of generation 2, with
    the seconds it took."""
    async with make_server() as srv:
        before = _samples(await _metrics(srv))
        gc.collect()
        after = _samples(await _metrics(srv))
    full = '{generation="2"}'
    collections = dict(after["pigeonhole_gc_collections_total"])
    assert collections[full] >= dict(before["pigeonhole_gc_collections_total"])[full] + 1
    seconds = dict(after["pigeonhole_gc_seconds_total"])
    assert seconds[full] > dict(before["pigeonhole_gc_seconds_total"])[full]
    assert set(seconds) == {'{generation="0"}', '{generation="1"}', full}


async def _metrics(srv) -> str:  # type: ignore[no-untyped-def]
    _, _, text = await http_get(f"http://127.0.0.1:{srv.admin_port}/metrics")
    return text
