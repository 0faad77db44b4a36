"""A batch's writes grouped into parts: one SQL statement per kind of write, not per write.

`channel.apply_batch` (schema/postgres-upgrade-v3-v4.sql) runs each part as one
set-based statement, so a batch of about a hundred commands costs a dozen statements
instead of a hundred and more PL/pgSQL steps. Grouping may reorder writes, so it only
groups writes that commute. Within a *segment* no row is written twice: a side written
again replaces its earlier row and a mailbox touched again keeps the later time, as
applying both in order would. A delete of a nameplate or mailbox drops the segment's
earlier writes to it (the delete would remove them anyway). A new segment starts at a
write to a nameplate or mailbox the segment deleted (a name made again after its
release, in the same batch), at a mailbox or nameplate stored twice, and at a mailbox
stored after the segment touched it. Kinds are applied in `ORDER` within a segment,
segments in order, and writes of a kind keep their order (usage rows their export
order, notifications their commit order). tests/store/test_parts.py checks the result
against applying every write in turn, on random batches.
"""

from __future__ import annotations

from typing import Any

#: the kinds in the order a segment applies them
ORDER = (
    "insert_nameplate",
    "put_mailbox",
    "put_nameplate_side",
    "put_mailbox_side",
    "put_message",
    "touch",
    "delete_nameplate",
    "delete_mailbox",
    "usage_nameplate",
    "usage_mailbox",
    "usage_client_version",
    "usage_connection_count",
    "usage_transit",
    "notify",
)
_RANK = {kind: i for i, kind in enumerate(ORDER)}
_DELETES = frozenset(("delete_nameplate", "delete_mailbox"))
#: kinds a segment writes once per row, and what names the row (fields 1 up to this
#: index): a side written again replaces its earlier row, a mailbox touched again keeps
#: the later time; a mailbox put again (its first put set `updated`) starts a segment
_ROW_KEY = {
    "put_nameplate_side": 4,  # (app, name, side)
    "put_mailbox_side": 4,  # (app, mailbox, side)
    "put_mailbox": 3,  # (app, mailbox)
    "touch": 3,
}
_REPLACED = frozenset(("put_nameplate_side", "put_mailbox_side", "touch"))


def _container(row: list[Any]) -> tuple[str, str, str] | None:
    """The nameplate or mailbox a write belongs to (None: usage rows, notifications)."""
    kind = row[0]
    if kind in ("insert_nameplate", "delete_nameplate", "put_nameplate_side"):
        return ("n", row[1], row[2])
    if kind in ("put_mailbox", "delete_mailbox", "put_mailbox_side", "touch"):
        return ("m", row[1], row[2])
    if kind == "put_message":
        return ("m", row[2], row[3])
    return None


class _Segment:
    __slots__ = ("deleted", "kinds", "touched")

    def __init__(self) -> None:
        #: kind -> row key -> row (the key is the row's identity, or its position)
        self.kinds: dict[str, dict[Any, list[Any]]] = {}
        #: container -> (kind, row key) of this segment's writes to it
        self.touched: dict[tuple[str, str, str], list[tuple[str, Any]]] = {}
        self.deleted: set[tuple[str, str, str]] = set()

    def add(self, row: list[Any], position: int) -> bool:
        """Take the write; False when it must start a new segment."""
        kind = row[0]
        container = _container(row)
        if container is None:
            self.kinds.setdefault(kind, {})[position] = row
            return True
        if container in self.deleted:
            return kind in _DELETES  # deleted again: nothing was written in between
        rows = self.kinds.setdefault(kind, {})
        if kind in _DELETES:
            for written, at in self.touched.pop(container, ()):
                self.kinds[written].pop(at, None)
            self.deleted.add(container)
            rows[position] = row
            return True
        width = _ROW_KEY.get(kind)
        key: Any = tuple(row[1:width]) if width else position
        earlier = rows.get(key)
        if earlier is not None and kind not in _REPLACED:
            return False
        if kind == "put_mailbox" and ("touch", key) in self.touched.get(container, []):
            return False  # a touch before the mailbox is stored touches nothing
        if kind == "touch" and earlier is not None:
            row = row if row[3] >= earlier[3] else earlier
        rows[key] = row
        if earlier is None:
            self.touched.setdefault(container, []).append((kind, key))
        return True

    def parts(self) -> list[list[Any]]:
        return [
            [kind, [row[1:] for row in self.kinds[kind].values()]]
            for kind in sorted(self.kinds, key=_RANK.__getitem__)
            if self.kinds[kind]
        ]


def group(rows: list[list[Any]]) -> dict[str, Any]:
    """`{"parts": [[kind, [row without its kind, ...]], ...]}`, for `channel.apply_batch`."""
    parts: list[list[Any]] = []
    segment = _Segment()
    for position, row in enumerate(rows):
        if not segment.add(row, position):
            parts.extend(segment.parts())
            segment = _Segment()
            segment.add(row, position)
    parts.extend(segment.parts())
    return {"parts": parts}
