-- Upgrade a usage database from version 1 to 2 (run in one transaction): the transit
-- relay's records get a table; the mailbox tables are unchanged.

-- One row per transit relay connection that did not pair, and one per pair, when it
-- ends: the reference relay's `usage` row (its moods, its --blur-usage rounding).
CREATE TABLE transit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,    -- export cursor
    started REAL NOT NULL,                   -- connect time (blurred); of the side that recorded, for a pair
    total_time REAL NOT NULL,                -- last close minus the first connect
    waiting_time REAL,                       -- second side's connect minus the first's; NULL if never paired
    total_bytes INTEGER NOT NULL,            -- bytes relayed, both directions (rounded up when blurred)
    result TEXT NOT NULL                     -- happy | jilted | lonely | redundant | errory | impatient | empty
);
CREATE INDEX transit_started_idx ON transit (started);
UPDATE version SET version = 2;
