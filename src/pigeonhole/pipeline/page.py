"""The self-contained HTML report: key figures, PNG charts inlined as data URIs, tables.

The page loads nothing from anywhere (no scripts, fonts or stylesheets outside it), so it
can be mailed, archived or opened from any storage as a single file.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd  # type: ignore[import-untyped, unused-ignore]

from pigeonhole.pipeline import charts


@dataclass(frozen=True)
class ReportData:
    """What the page shows, already aggregated (small frames)."""

    #: daily_summary rows of all apps together (app_id NULL)
    daily: pd.DataFrame
    #: per app over the whole period: app_id, finished, success_rate (busiest first)
    apps: pd.DataFrame
    #: hourly_summary rows of all apps, latest days only
    hourly: pd.DataFrame
    #: hourly_connections, latest days only
    connections: pd.DataFrame
    #: day, implementation, version, binds (all apps)
    clients: pd.DataFrame
    #: daily_transit rows (the relay's days)
    transit: pd.DataFrame
    anomalies: pd.DataFrame
    blur_time: int | None
    #: when the data ends (the export's last sample); later periods are not charted
    watermark: dt.datetime | None
    generated: dt.datetime
    #: table name -> (column, type, doc) for every output table
    tables: Mapping[str, Sequence[tuple[str, str, str]]]


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1000px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2rem}
.figures{display:flex;flex-wrap:wrap;gap:1rem;margin:1.5rem 0}
.figure{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;min-width:9rem}
.figure b{display:block;font-size:1.5rem}
img{max-width:100%;border:1px solid #eee;margin:.5rem 0 1.2rem}
table{border-collapse:collapse;font-size:.85rem;margin-bottom:1rem}
td,th{border-bottom:1px solid #eee;padding:.25rem .6rem;text-align:left}
.note{background:#fff8e1;padding:.5rem 1rem;border-left:4px solid #f9a825}
"""


def render(data: ReportData) -> bytes:
    """The whole page as UTF-8 bytes."""
    daily = data.daily.sort_values("day")
    flagged = data.anomalies[data.anomalies["app_id"].isna() & data.anomalies["hour"].isna()]
    images = [
        ("Finished transfers by result", charts.results_chart(daily)),
        ("Success, scary and crowded rates", charts.rates_chart(daily, list(flagged["day"]))),
        ("Waiting and total time", charts.timing_chart(daily)),
        (
            "Peak concurrency per hour",
            charts.concurrency_chart(
                data.hourly.sort_values(["day", "hour"]),
                data.connections.sort_values(["day", "hour"]),
            ),
        ),
        ("Transfers started per hour", charts.heatmap_chart(data.hourly)),
        ("Busiest app ids", charts.apps_chart(data.apps)),
        ("Client implementations and versions", charts.clients_chart(data.clients)),
    ]
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        "<title>Pigeonhole usage report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Pigeonhole usage report</h1>",
        f"<p class=sub>{_period(daily)}{_watermark(data.watermark)} · generated "
        f"{data.generated:%Y-%m-%d %H:%M} UTC</p>",
        _blur_note(data.blur_time),
        _figures(daily, data.anomalies),
        *(
            f'<h2>{html.escape(t)}</h2><img alt="{html.escape(t)}" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            for t, png in images
        ),
        _transit_section(data.transit),
        _anomaly_table(data.anomalies),
        _tables_section(data.tables),
        "</body></html>",
    ]
    return "\n".join(parts).encode()


def _period(daily: pd.DataFrame) -> str:
    if daily.empty:
        return "no data yet"
    return f"{daily['day'].min()} to {daily['day'].max()} ({len(daily)} days, UTC)"


def _watermark(watermark: dt.datetime | None) -> str:
    if watermark is None:
        return ""
    return f" · data until {watermark:%Y-%m-%d %H:%M} UTC (later periods not charted)"


def _blur_note(blur_time: int | None) -> str:
    if not blur_time:
        return ""
    return (
        f"<p class=note>The server blurs usage times to {blur_time} s: start times are "
        "rounded down, so hourly figures and peaks are approximate by up to that much.</p>"
    )


def _figures(daily: pd.DataFrame, anomalies: pd.DataFrame) -> str:
    finished = int(daily["finished"].sum()) if not daily.empty else 0
    happy = int(daily["happy"].sum()) if not daily.empty else 0
    rate = f"{happy / finished:.1%}" if finished else "–"
    peak = int(daily["peak_mailboxes"].max()) if not daily.empty else 0
    figures = [
        ("transfers finished", f"{finished:,}"),
        ("success rate", rate),
        ("peak open mailboxes", f"{peak:,}"),
        ("periods flagged", f"{len(anomalies):,}"),
    ]
    cells = "".join(f"<div class=figure><b>{v}</b>{html.escape(k)}</div>" for k, v in figures)
    return f"<div class=figures>{cells}</div>"


#: daily_transit columns the page shows, and their headings
_TRANSIT_COLUMNS = (
    ("day", "day"),
    ("pairs", "pairs"),
    ("bytes", "GB relayed"),
    ("happy", "happy"),
    ("lonely", "lonely"),
    ("redundant", "redundant"),
    ("errory", "errory"),
    ("impatient", "impatient"),
    ("empty", "empty"),
    ("waiting_p50", "waiting p50 s"),
    ("total_p50", "total p50 s"),
    ("total_p99", "total p99 s"),
    ("peak_pairs", "peak pairs"),
)


def _transit_section(transit: pd.DataFrame) -> str:
    """The relay's latest days: pairs, bytes, moods, pairs' times, peak pairs."""
    head = "<h2>Transit relay</h2>"
    if transit.empty or int(transit["records"].sum()) == 0:
        return head + "<p>No relay records in this period.</p>"
    rows = transit.sort_values("day").tail(14)
    total = int(transit["bytes"].sum())
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_transit_cell(c, r[c]))}</td>" for c, _ in _TRANSIT_COLUMNS)
        + "</tr>"
        for _, r in rows.iterrows()
    )
    header = "".join(f"<th>{html.escape(h)}</th>" for _, h in _TRANSIT_COLUMNS)
    return (
        f"{head}<p>{int(transit['pairs'].sum()):,} pairs relayed {total / 1e9:,.1f} GB over "
        f"{len(transit)} days; the latest {len(rows)} days:</p>"
        f"<table><tr>{header}</tr>{body}</table>"
    )


def _transit_cell(column: str, value: object) -> str:
    if column == "bytes" and isinstance(value, int | float):
        return f"{value / 1e9:,.2f}"
    return _cell(value)


def _anomaly_table(anomalies: pd.DataFrame) -> str:
    head = "<h2>Periods that stand out</h2>"
    if anomalies.empty:
        return head + "<p>None: every period is within its baseline's fences.</p>"
    rows = anomalies.sort_values(["day", "hour"], na_position="first").tail(50)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(_cell(r[c]))}</td>"
            for c in (
                "day",
                "hour",
                "app_id",
                "signal",
                "value",
                "events",
                "baseline_median",
                "fence",
            )
        )
        + "</tr>"
        for _, r in rows.iterrows()
    )
    header = "".join(
        f"<th>{c}</th>"
        for c in ("day", "hour", "app id", "signal", "value", "events", "baseline median", "fence")
    )
    return (
        f"{head}<p>Latest {len(rows)} of {len(anomalies)}; how periods are judged is in "
        f"docs/pipeline.md.</p><table><tr>{header}</tr>{body}</table>"
    )


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "all" if value is None else "–"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _tables_section(tables: Mapping[str, Sequence[tuple[str, str, str]]]) -> str:
    blocks = []
    for name, columns in tables.items():
        rows = "".join(
            f"<tr><td>{c}</td><td>{t}</td><td>{html.escape(d)}</td></tr>" for c, t, d in columns
        )
        blocks.append(
            f"<details><summary><code>tables/{name}/</code></summary>"
            f"<table>{rows}</table></details>"
        )
    return "<h2>Tables</h2>" + "".join(blocks)
