-- Upgrade a channel database from version 2 to 3 (run in one transaction): nameplates
-- and mailboxes become rowid tables in creation order (mailboxes by `created`), their
-- sides and messages keyed by the parent's rowid. A side or message whose nameplate or
-- mailbox is gone (version 2 allowed it; nothing could load it) is left behind.

CREATE TABLE nameplates_v3 (
    app_id TEXT NOT NULL,
    name TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    owner TEXT
);
INSERT INTO nameplates_v3 (app_id, name, mailbox_id, owner)
    SELECT app_id, name, mailbox_id, owner FROM nameplates ORDER BY app_id, name;
CREATE TABLE nameplate_sides_v3 (
    nameplate INTEGER NOT NULL,
    side TEXT NOT NULL,
    claimed INTEGER NOT NULL,
    added REAL NOT NULL,
    PRIMARY KEY (nameplate, side)
) WITHOUT ROWID;
INSERT INTO nameplate_sides_v3 (nameplate, side, claimed, added)
    SELECT n.rowid, s.side, s.claimed, s.added
    FROM nameplate_sides s JOIN nameplates_v3 n ON n.app_id = s.app_id AND n.name = s.name;

CREATE TABLE mailboxes_v3 (
    app_id TEXT NOT NULL,
    id TEXT NOT NULL,
    for_nameplate INTEGER NOT NULL,
    created REAL NOT NULL,
    owner TEXT
);
INSERT INTO mailboxes_v3 (app_id, id, for_nameplate, created, owner)
    SELECT app_id, id, for_nameplate, created, owner FROM mailboxes ORDER BY created, app_id, id;
CREATE TABLE mailbox_sides_v3 (
    mailbox INTEGER NOT NULL,
    side TEXT NOT NULL,
    opened INTEGER NOT NULL,
    added REAL NOT NULL,
    mood TEXT,
    PRIMARY KEY (mailbox, side)
) WITHOUT ROWID;
INSERT INTO mailbox_sides_v3 (mailbox, side, opened, added, mood)
    SELECT m.rowid, s.side, s.opened, s.added, s.mood
    FROM mailbox_sides s JOIN mailboxes_v3 m ON m.app_id = s.app_id AND m.id = s.mailbox_id;

CREATE TABLE messages_v3 (
    seq INTEGER PRIMARY KEY,
    mailbox INTEGER NOT NULL,
    app_id TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    side TEXT NOT NULL,
    phase TEXT NOT NULL,
    body BLOB NOT NULL,
    server_rx REAL NOT NULL,
    msg_id TEXT NOT NULL,
    owner TEXT
);
INSERT INTO messages_v3
    (seq, mailbox, app_id, mailbox_id, side, phase, body, server_rx, msg_id, owner)
    SELECT g.seq, m.rowid, g.app_id, g.mailbox_id, g.side, g.phase, g.body, g.server_rx,
        g.msg_id, g.owner
    FROM messages g JOIN mailboxes_v3 m ON m.app_id = g.app_id AND m.id = g.mailbox_id;

DROP TABLE messages;
DROP TABLE mailbox_sides;
DROP TABLE mailboxes;
DROP TABLE nameplate_sides;
DROP TABLE nameplates;
ALTER TABLE nameplates_v3 RENAME TO nameplates;
ALTER TABLE nameplate_sides_v3 RENAME TO nameplate_sides;
ALTER TABLE mailboxes_v3 RENAME TO mailboxes;
ALTER TABLE mailbox_sides_v3 RENAME TO mailbox_sides;
ALTER TABLE messages_v3 RENAME TO messages;
CREATE INDEX messages_mailbox_idx ON messages (mailbox);
UPDATE version SET version = 3;
