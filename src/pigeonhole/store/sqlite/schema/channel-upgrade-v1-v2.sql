-- Upgrade a channel database from version 1 to 2 (run in one transaction, with the
-- Python function stored_body(hex) registered by store/sqlite.py: the bytes the hex
-- spells, or the text as sent if it has capitals, as new rows are written).
-- Bodies become bytes; nameplates and mailboxes get an owner (NULL: charged to nobody).

CREATE TABLE messages_v2 (
    seq INTEGER PRIMARY KEY,
    app_id TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    side TEXT NOT NULL,
    phase TEXT NOT NULL,
    body BLOB NOT NULL,
    server_rx REAL NOT NULL,
    msg_id TEXT NOT NULL,
    owner TEXT
);
INSERT INTO messages_v2 (seq, app_id, mailbox_id, side, phase, body, server_rx, msg_id)
    SELECT seq, app_id, mailbox_id, side, phase, stored_body(body), server_rx, msg_id
    FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v2 RENAME TO messages;
CREATE INDEX messages_mailbox_idx ON messages (app_id, mailbox_id);
ALTER TABLE nameplates ADD COLUMN owner TEXT;
ALTER TABLE mailboxes ADD COLUMN owner TEXT;
UPDATE version SET version = 2;
