"""The outbox's ordering rules, on a sink that records frames (no sockets needed)."""

from __future__ import annotations

import asyncio

import orjson

from pigeonhole.server.outbox import Outbox
from pigeonhole.store.group_commit import Commit


class Sink:
    def __init__(self) -> None:
        self.open = True
        self.sent: list[str] = []

    def send_text(self, data: bytes) -> None:
        self.sent.append(orjson.loads(data)["n"])

    def begin(self) -> None:
        pass

    def end(self) -> None:
        pass

    def write_buffer_size(self) -> int:
        return 0


def test_replies_wait_for_their_commit_in_order() -> None:
    sink = Sink()
    box = Outbox(sink)
    first, second = Commit(), Commit()
    box.put({"n": "r1"}, first)
    box.put({"n": "r2"}, second)
    box.put({"n": "ack"})  # nothing to wait for, but behind held replies
    second.resolve()
    assert sink.sent == []
    first.resolve()
    assert sink.sent == ["r1", "r2", "ack"]


async def test_a_sliced_release_keeps_each_connections_order() -> None:
    """A connection whose turn comes in a later slice: what it queues meanwhile waits."""
    sinks = [Sink() for _ in range(6)]
    boxes = [Outbox(sink) for sink in sinks]
    commit = Commit()
    for i, box in enumerate(boxes):
        box.put({"n": f"reply{i}"}, commit)
    commit.resolve(per_iteration=2)
    assert [s.sent for s in sinks[:2]] == [["reply0"], ["reply1"]]
    assert all(s.sent == [] for s in sinks[2:])
    # the commit is done, but boxes 2-5 still hold their replies: a frame with nothing to
    # wait for, or with the done commit, queues behind them; another side's message not
    boxes[4].put({"n": "pong"})
    boxes[5].put({"n": "next reply"}, commit)
    boxes[5].deliver({"n": "peer"})
    assert sinks[4].sent == [] and sinks[5].sent == ["peer"]
    for _ in range(2):
        await asyncio.sleep(0)  # a loop iteration per slice
    assert sinks[2].sent == ["reply2"] and sinks[3].sent == ["reply3"]
    assert sinks[4].sent == ["reply4", "pong"]
    assert sinks[5].sent == ["peer", "reply5", "next reply"]
    assert all(len(box) == 0 for box in boxes)


def test_other_sides_messages_overtake_held_replies() -> None:
    sink = Sink()
    box = Outbox(sink)
    commit = Commit()
    box.put({"n": "echo"}, commit)
    box.deliver({"n": "peer"})
    assert sink.sent == ["peer"]
    commit.resolve()
    assert sink.sent == ["peer", "echo"]


def test_messages_queue_behind_a_held_replay() -> None:
    sink = Sink()
    box = Outbox(sink)
    commit = Commit()
    box.put({"n": "old1"}, commit, pin=True)
    box.put({"n": "old2"}, commit, pin=True)
    box.deliver({"n": "new"})
    box.put({"n": "reply"})
    assert sink.sent == [] and len(box) == 4
    commit.resolve()
    assert sink.sent == ["old1", "old2", "new", "reply"]
    box.deliver({"n": "later"})  # nothing pinned any more: at once
    assert sink.sent[-1] == "later" and len(box) == 0


def test_a_failed_commit_stops_everything() -> None:
    sink = Sink()
    box = Outbox(sink)
    commit = Commit()
    box.put({"n": "replay"}, commit, pin=True)
    commit.resolve(OSError("EIO"))
    assert box.overflowed and sink.sent == []
    box.deliver({"n": "peer"})
    box.put({"n": "reply"})
    assert sink.sent == []


def test_stop_forgets_held_frames_and_pins() -> None:
    sink = Sink()
    box = Outbox(sink)
    box.put({"n": "replay"}, Commit(), pin=True)
    box.stop()
    assert len(box) == 0
    box.deliver({"n": "peer"})  # not held behind a replay that will never be sent
    assert sink.sent == ["peer"]


def test_too_many_held_frames_drop_the_client() -> None:
    sink = Sink()
    dropped: list[bool] = []
    box = Outbox(sink, max_frames=2, on_slow=lambda: dropped.append(True))
    commit = Commit()
    box.put({"n": "r1"}, commit, pin=True)
    box.deliver({"n": "m1"})
    box.deliver({"n": "m2"})
    assert dropped == [True] and box.overflowed
    commit.resolve()
    assert sink.sent == []


def test_an_emptied_queue_is_given_back_and_made_again_when_needed() -> None:
    """Nearly every connection holds a frame once (its first ack): an idle one keeps none."""
    sink = Sink()
    box = Outbox(sink)
    first = Commit()
    box.put({"n": "ack"}, first)
    first.resolve()
    assert sink.sent == ["ack"]
    assert box._held is None  # white-box: the deque's 600 bytes are memory per idle client
    second = Commit()
    box.put({"n": "reply"}, second)
    box.deliver({"n": "peer"})
    assert len(box) == 1 and sink.sent == ["ack", "peer"]
    second.resolve()
    assert sink.sent == ["ack", "peer", "reply"] and box._held is None
