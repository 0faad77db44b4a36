"""The report's charts: small pandas frames in, PNG bytes out (matplotlib, Agg, no display).

Every function accepts an empty frame and then draws a labelled empty chart, so a report
over a quiet period still renders. Colours are fixed per result so charts compare.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from matplotlib.axes import Axes
from matplotlib.figure import Figure

RESULT_COLOURS = {
    "happy": "#2e7d32",
    "lonely": "#9e9e9e",
    "pruney": "#795548",
    "errory": "#f9a825",
    "scary": "#c62828",
    "crowded": "#6a1b9a",
    "quiet": "#90caf9",
    "other": "#000000",
}
_SIZE = (10, 3.6)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()


def _axes(title: str) -> tuple[Figure, Axes]:
    figure, axes = plt.subplots(figsize=_SIZE)
    axes.set_title(title, loc="left", fontsize=11)
    axes.grid(axis="y", alpha=0.3)
    return figure, axes


def _empty(axes: Axes) -> None:
    axes.text(
        0.5,
        0.5,
        "no data for this period",
        ha="center",
        va="center",
        transform=axes.transAxes,
        color="#666666",
    )


def results_chart(daily: pd.DataFrame) -> bytes:
    """Stacked bars: mailboxes finished per day by result (all apps)."""
    figure, axes = _axes("Transfers finished per day, by result")
    if daily.empty:
        _empty(axes)
        return _png(figure)
    frame = daily.set_index("day")
    bottom = pd.Series(0, index=frame.index, dtype="float64")
    for result, colour in RESULT_COLOURS.items():
        if result in frame and frame[result].sum() > 0:
            axes.bar(
                frame.index, frame[result], bottom=bottom, color=colour, label=result, width=0.8
            )
            bottom += frame[result]
    axes.legend(ncol=4, fontsize=8, loc="upper left")
    axes.set_ylabel("mailboxes")
    figure.autofmt_xdate()
    return _png(figure)


def rates_chart(daily: pd.DataFrame, flagged_days: list[Any]) -> bytes:
    """Lines: success, scary and crowded rates per day; flagged days marked in red."""
    figure, axes = _axes("Success, scary and crowded rates per day (all apps)")
    if daily.empty:
        _empty(axes)
        return _png(figure)
    for column, colour in (
        ("success_rate", "#2e7d32"),
        ("scary_rate", "#c62828"),
        ("crowded_rate", "#6a1b9a"),
    ):
        axes.plot(
            daily["day"],
            daily[column] * 100,
            color=colour,
            marker=".",
            label=column.replace("_", " "),
        )
    for day in flagged_days:
        axes.axvline(day, color="#c62828", alpha=0.25, linewidth=6)
    axes.set_ylabel("% of finished")
    axes.set_ylim(0, 100)
    axes.legend(fontsize=8, loc="center left")
    figure.autofmt_xdate()
    return _png(figure)


def timing_chart(daily: pd.DataFrame) -> bytes:
    """Lines on a log scale: waiting and total time p50/p90/p99 per day."""
    figure, axes = _axes("Waiting time and total time per day (seconds, log scale)")
    present = daily.dropna(subset=["total_p50"]) if not daily.empty else daily
    if present.empty:
        _empty(axes)
        return _png(figure)
    for prefix, colour in (("waiting", "#1565c0"), ("total", "#ef6c00")):
        for p, style in ((50, "-"), (90, "--"), (99, ":")):
            axes.plot(
                present["day"],
                present[f"{prefix}_p{p}"],
                style,
                color=colour,
                label=f"{prefix} p{p}",
            )
    axes.set_yscale("log")
    axes.legend(ncol=2, fontsize=8, loc="upper left")
    figure.autofmt_xdate()
    return _png(figure)


def concurrency_chart(hourly: pd.DataFrame, connections: pd.DataFrame) -> bytes:
    """Lines per hour: peak open mailboxes and nameplates, and the most connections sampled."""
    figure, axes = _axes("Peak concurrency per hour (all apps)")
    if hourly.empty:
        _empty(axes)
        return _png(figure)
    axes.step(
        _hour_index(hourly),
        hourly["peak_mailboxes"],
        where="post",
        color="#1565c0",
        label="peak mailboxes",
    )
    axes.step(
        _hour_index(hourly),
        hourly["peak_nameplates"],
        where="post",
        color="#ef6c00",
        label="peak nameplates",
    )
    if not connections.empty:
        axes.plot(
            _hour_index(connections),
            connections["max_connections"],
            color="#9e9e9e",
            alpha=0.8,
            label="max connections (sampled)",
        )
    axes.legend(fontsize=8, loc="upper left")
    figure.autofmt_xdate()
    return _png(figure)


def apps_chart(apps: pd.DataFrame) -> bytes:
    """Horizontal bars: the busiest app ids by finished transfers, with their success rate."""
    figure, axes = _axes("Busiest app ids (finished transfers, success rate)")
    if apps.empty:
        _empty(axes)
        return _png(figure)
    shown = apps.head(10).iloc[::-1]
    axes.barh(shown["app_id"], shown["finished"], color="#1565c0")
    axes.set_xscale("log")
    for y, (count, rate) in enumerate(zip(shown["finished"], shown["success_rate"], strict=True)):
        axes.text(count, y, f"  {rate:.0%}", va="center", fontsize=8)
    axes.tick_params(axis="y", labelsize=8)
    return _png(figure)


def clients_chart(clients: pd.DataFrame) -> bytes:
    """Stacked area: share of binds per day by client implementation and version."""
    figure, axes = _axes("Client implementations and versions (share of binds)")
    if clients.empty:
        _empty(axes)
        return _png(figure)
    label = clients["implementation"].fillna("not sent") + " " + clients["version"].fillna("")
    table = clients.assign(client=label.str.strip()).pivot_table(
        index="day", columns="client", values="binds", aggfunc="sum", fill_value=0
    )
    top = table.sum().sort_values(ascending=False).index[:8]
    shown = table[top].assign(**{"other versions": table.drop(columns=top).sum(axis=1)})
    share = shown.div(shown.sum(axis=1), axis=0) * 100
    axes.stackplot(share.index, share.T.to_numpy(), labels=share.columns, alpha=0.85)
    axes.set_ylabel("% of binds")
    axes.set_ylim(0, 100)
    axes.legend(ncol=3, fontsize=7, loc="lower left")
    figure.autofmt_xdate()
    return _png(figure)


def heatmap_chart(hourly: pd.DataFrame) -> bytes:
    """Heat map: transfers started per UTC hour of day (rows) and day (columns)."""
    figure, axes = plt.subplots(figsize=(10, 3.2))
    axes.set_title("Transfers started per hour (UTC)", loc="left", fontsize=11)
    if hourly.empty:
        _empty(axes)
        return _png(figure)
    grid = hourly.pivot_table(
        index="hour", columns="day", values="started", aggfunc="sum", fill_value=0
    ).reindex(range(24), fill_value=0)
    image = axes.imshow(grid.to_numpy(), aspect="auto", cmap="viridis", origin="lower")
    axes.set_yticks([0, 6, 12, 18, 23])
    step = max(1, len(grid.columns) // 10)
    axes.set_xticks(range(0, len(grid.columns), step))
    axes.set_xticklabels([str(d)[5:10] for d in grid.columns[::step]], fontsize=8)
    figure.colorbar(image, ax=axes, label="started")
    return _png(figure)


def _hour_index(frame: pd.DataFrame) -> pd.Series:
    return pd.to_datetime(frame["day"]) + pd.to_timedelta(frame["hour"], unit="h")
