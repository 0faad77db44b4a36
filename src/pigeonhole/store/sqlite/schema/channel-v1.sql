-- Pigeonhole channel database, schema version 1 (file: DATA_DIR/channel.sqlite).
-- Holds what a restart needs to resume every live channel. Liveness (when a channel
-- was last touched) is kept in memory only: after a restart every channel gets a
-- fresh expiry window, the grace period for clients to reconnect.
-- Mailboxes are keyed per app, so two apps can never clash on a mailbox id.

CREATE TABLE version (
    version INTEGER NOT NULL                 -- schema version of this file (1)
);

CREATE TABLE nameplates (
    app_id TEXT NOT NULL,                    -- AppID the nameplate belongs to
    name TEXT NOT NULL,                      -- the number in "4-purple-sausages"
    mailbox_id TEXT NOT NULL,                -- mailbox the nameplate points at
    PRIMARY KEY (app_id, name)
) WITHOUT ROWID;

CREATE TABLE nameplate_sides (
    app_id TEXT NOT NULL,
    name TEXT NOT NULL,                      -- nameplate name
    side TEXT NOT NULL,                      -- the claiming client's side
    claimed INTEGER NOT NULL,                -- 1 while claimed, 0 once released
    added REAL NOT NULL,                     -- time of the first claim by this side
    PRIMARY KEY (app_id, name, side)
) WITHOUT ROWID;

CREATE TABLE mailboxes (
    app_id TEXT NOT NULL,
    id TEXT NOT NULL,                        -- 13-character base32 id (or a client's choice via `open`)
    for_nameplate INTEGER NOT NULL,          -- 1 if created by a nameplate claim
    created REAL NOT NULL,                   -- creation time
    PRIMARY KEY (app_id, id)
) WITHOUT ROWID;

CREATE TABLE mailbox_sides (
    app_id TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    side TEXT NOT NULL,                      -- the side that opened (or claimed) the mailbox
    opened INTEGER NOT NULL,                 -- 1 until this side closes
    added REAL NOT NULL,                     -- time this side first arrived
    mood TEXT,                               -- mood given with `close`
    PRIMARY KEY (app_id, mailbox_id, side)
) WITHOUT ROWID;

CREATE TABLE messages (
    seq INTEGER PRIMARY KEY,                 -- arrival order
    app_id TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    side TEXT NOT NULL,                      -- sender's side
    phase TEXT NOT NULL,                     -- e.g. "pake", "version", "0"
    body TEXT NOT NULL,                      -- hex, as the client sent it
    server_rx REAL NOT NULL,                 -- when the server received the `add`
    msg_id TEXT NOT NULL                     -- JSON of the `add`'s `id` (echoed in `message`)
);
CREATE INDEX messages_mailbox_idx ON messages (app_id, mailbox_id);

INSERT INTO version (version) VALUES (1);
