"""The transit relay: pairs two clients' connections by token and relays their bytes.

`TransitRelay` (relay.py) is the service; `TransitConfig` (config.py) its bounds;
`UsageRecord`/`UsageQueue` (usage.py) what it reports. The pairing decisions are the
sans-I/O core in core.py; docs/transit.md describes the design.
"""

from pigeonhole.transit.config import TransitConfig
from pigeonhole.transit.relay import TransitRelay
from pigeonhole.transit.usage import Mood, UsageQueue, UsageRecord

__all__ = ["Mood", "TransitConfig", "TransitRelay", "UsageQueue", "UsageRecord"]
