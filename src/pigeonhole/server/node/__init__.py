"""This process as one node of a server whose state lives in a shared PostgreSQL database.

`Node` is the decider (server/deciding.py) for `--store postgresql://...`: commands are
decided in batches inside the database's transactions, messages reach other nodes'
readers through NOTIFY, and one node, the leader, prunes and samples usage.
"""

from pigeonhole.server.node.node import Node
from pigeonhole.server.node.refusals import NUL_REFUSED

__all__ = ["NUL_REFUSED", "Node"]
