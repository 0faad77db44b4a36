-- Pigeonhole usage database, schema version 2 (file: DATA_DIR/usage.sqlite).
-- Written by the mailbox server and its transit relay, read by `pigeonhole export-usage`
-- and operators' tools.
-- Times are UNIX seconds (REAL). Where --blur-usage=N is set, `started` and
-- `connect_time` are rounded down to a multiple of N; durations are never blurred.
-- Every table has an `id` that only grows, so readers can copy rows incrementally.

CREATE TABLE version (
    version INTEGER NOT NULL                 -- schema version of this file (2)
);

-- One row per nameplate when it is deleted (released by all sides, pruned, or
-- deleted because its mailbox was closed by every side).
CREATE TABLE nameplates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,    -- export cursor
    app_id TEXT NOT NULL,                    -- the AppID the clients bound with
    started REAL NOT NULL,                   -- first claim (blurred)
    waiting_time REAL,                       -- second side's claim minus the first's; NULL if only one side came
    total_time REAL NOT NULL,                -- deletion minus the first claim
    result TEXT NOT NULL                     -- happy | lonely | pruney | crowded
);
CREATE INDEX nameplates_started_idx ON nameplates (app_id, started);

-- One row per mailbox when it is deleted (closed by every side, or pruned).
CREATE TABLE mailboxes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,    -- export cursor
    app_id TEXT NOT NULL,                    -- the AppID
    for_nameplate INTEGER NOT NULL,          -- 1 if the mailbox was made by a nameplate claim, 0 if by a bare `open`
    started REAL NOT NULL,                   -- first side's open or claim (blurred)
    waiting_time REAL,                       -- second side's arrival minus the first's; NULL if only one side came
    total_time REAL NOT NULL,                -- deletion minus the first side's arrival
    result TEXT NOT NULL                     -- quiet | happy | lonely | errory | scary | pruney | crowded
);
CREATE INDEX mailboxes_started_idx ON mailboxes (app_id, started);

-- One row per successful `bind`.
CREATE TABLE client_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,    -- export cursor
    app_id TEXT NOT NULL,                    -- the AppID
    side TEXT NOT NULL,                      -- the client's side (random per wormhole, not per person)
    connect_time REAL NOT NULL,              -- time of the bind (blurred)
    implementation TEXT,                     -- client_version[0], e.g. "python", "rust", "go"; NULL if not sent
    version TEXT                             -- client_version[1]; NULL if not sent
);
CREATE INDEX client_versions_time_idx ON client_versions (connect_time);

-- One row per sample of the live connection counts (every --usage-sample-interval seconds).
CREATE TABLE connection_counts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,    -- export cursor
    sampled REAL NOT NULL,                   -- sample time (blurred like `started`)
    connections INTEGER NOT NULL,            -- open WebSocket connections
    bound INTEGER NOT NULL,                  -- of those, connections that have sent `bind`
    subscribed INTEGER NOT NULL,             -- of those, connections with an open mailbox subscription
    nameplates INTEGER NOT NULL,             -- nameplates alive
    mailboxes INTEGER NOT NULL               -- mailboxes alive
);
CREATE INDEX connection_counts_sampled_idx ON connection_counts (sampled);

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

-- One row, replaced at each sample: the munin-style "is the server alive" record.
CREATE TABLE current (
    rebooted REAL NOT NULL,                  -- server start time (blurred)
    updated REAL NOT NULL,                   -- last sample time
    blur_time INTEGER,                       -- --blur-usage seconds, NULL if not blurred
    connections INTEGER NOT NULL             -- open WebSocket connections at the last sample
);

INSERT INTO version (version) VALUES (2);
