-- Pigeonhole channel database, schema version 3 (file: DATA_DIR/channel.sqlite).
-- Holds what a restart needs to resume every live channel. Liveness (when a channel
-- was last touched) is kept in memory only: after a restart every channel gets a
-- fresh expiry window, the grace period for clients to reconnect.
-- Rows sit in creation order: a nameplate's or mailbox's key is its rowid (given as it
-- is inserted), and its sides and messages are keyed by that rowid, so the exchanges in
-- flight write together at the end of each table, whatever else is stored. The store
-- keeps which rowid each (app, name) and (app, mailbox id) has (store/sqlite/channel_rows.py);
-- the core keeps them unique. Mailboxes are per app: two apps never clash on an id.
-- `owner` is the client address a row is charged to (quotas per address survive a
-- restart); NULL under --blur-usage, when no address is written anywhere.
-- Version 3 (from 2): rows keyed by creation order instead of by (app, name) and
-- (app, mailbox id). Version 2 (from 1): bodies as bytes, `seq` given by the server, `owner`.

CREATE TABLE version (
    version INTEGER NOT NULL                 -- schema version of this file (3)
);

CREATE TABLE nameplates (                    -- rowid: creation order
    app_id TEXT NOT NULL,                    -- AppID the nameplate belongs to
    name TEXT NOT NULL,                      -- the number in "4-purple-sausages"
    mailbox_id TEXT NOT NULL,                -- mailbox the nameplate points at
    owner TEXT                               -- address of the client that created it
);

CREATE TABLE nameplate_sides (
    nameplate INTEGER NOT NULL,              -- the nameplate's rowid
    side TEXT NOT NULL,                      -- the claiming client's side
    claimed INTEGER NOT NULL,                -- 1 while claimed, 0 once released
    added REAL NOT NULL,                     -- time of the first claim by this side
    PRIMARY KEY (nameplate, side)
) WITHOUT ROWID;

CREATE TABLE mailboxes (                     -- rowid: creation order
    app_id TEXT NOT NULL,
    id TEXT NOT NULL,                        -- 13-character base32 id (or a client's choice via `open`)
    for_nameplate INTEGER NOT NULL,          -- 1 if created by a nameplate claim
    created REAL NOT NULL,                   -- creation time
    owner TEXT                               -- address of the client that created it
);

CREATE TABLE mailbox_sides (
    mailbox INTEGER NOT NULL,                -- the mailbox's rowid
    side TEXT NOT NULL,                      -- the side that opened (or claimed) the mailbox
    opened INTEGER NOT NULL,                 -- 1 until this side closes
    added REAL NOT NULL,                     -- time this side first arrived
    mood TEXT,                               -- mood given with `close`
    PRIMARY KEY (mailbox, side)
) WITHOUT ROWID;

CREATE TABLE messages (
    seq INTEGER PRIMARY KEY,                 -- arrival order, given by the server
    mailbox INTEGER NOT NULL,                -- the mailbox's rowid
    app_id TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    side TEXT NOT NULL,                      -- sender's side
    phase TEXT NOT NULL,                     -- e.g. "pake", "version", "0"
    body BLOB NOT NULL,                      -- the bytes the hex spells (text if sent in capitals)
    server_rx REAL NOT NULL,                 -- when the server received the `add`
    msg_id TEXT NOT NULL,                    -- JSON of the `add`'s `id` (echoed in `message`)
    owner TEXT                               -- address of the client that added it
);
CREATE INDEX messages_mailbox_idx ON messages (mailbox);

INSERT INTO version (version) VALUES (3);
