-- Pigeonhole on PostgreSQL, schema version 1 (`pigeonhole serve --store postgresql://...`).
-- The same tables and columns as the SQLite files channel-v2.sql and usage-v1.sql, in two
-- schemas of one database: `channel` (what a restart needs to resume every live channel)
-- and `usage` (the records `export-usage --store postgresql://...` reads). Created by the
-- server in one transaction under an advisory lock, so nodes starting together cannot race.
-- Times are UNIX seconds (double precision), as in SQLite.

CREATE SCHEMA channel;
CREATE SCHEMA usage;

CREATE TABLE channel.version (
    version integer NOT NULL                 -- schema version of this database (1)
);

CREATE TABLE channel.nameplates (
    app_id text NOT NULL,
    name text NOT NULL,                      -- the number in "4-purple-sausages"
    mailbox_id text NOT NULL,
    owner text,                              -- client address charged; NULL under --blur-usage
    PRIMARY KEY (app_id, name)
);

CREATE TABLE channel.nameplate_sides (
    app_id text NOT NULL,
    name text NOT NULL,
    side text NOT NULL,
    claimed boolean NOT NULL,                -- true while claimed, false once released
    added double precision NOT NULL,         -- this side's first claim
    PRIMARY KEY (app_id, name, side)
);

CREATE TABLE channel.mailboxes (
    app_id text NOT NULL,
    id text NOT NULL,
    for_nameplate boolean NOT NULL,
    created double precision NOT NULL,
    owner text,
    PRIMARY KEY (app_id, id)
);

CREATE TABLE channel.mailbox_sides (
    app_id text NOT NULL,
    mailbox_id text NOT NULL,
    side text NOT NULL,
    opened boolean NOT NULL,                 -- true until this side closes
    added double precision NOT NULL,
    mood text,
    PRIMARY KEY (app_id, mailbox_id, side)
);

CREATE TABLE channel.messages (
    seq bigint PRIMARY KEY,                  -- arrival order, given by the server
    app_id text NOT NULL,
    mailbox_id text NOT NULL,
    side text NOT NULL,
    phase text NOT NULL,
    body bytea NOT NULL,                     -- the bytes the hex spells, or the text as sent
    body_is_text boolean NOT NULL,           -- true: `body` is hex sent in capitals, verbatim
    server_rx double precision NOT NULL,
    msg_id text NOT NULL,                    -- JSON of the `add`'s id
    owner text
);
CREATE INDEX messages_mailbox_idx ON channel.messages (app_id, mailbox_id);

CREATE TABLE usage.nameplates (
    id bigserial PRIMARY KEY,                -- export cursor
    app_id text NOT NULL,
    started double precision NOT NULL,
    waiting_time double precision,
    total_time double precision NOT NULL,
    result text NOT NULL
);
CREATE INDEX nameplates_started_idx ON usage.nameplates (app_id, started);

CREATE TABLE usage.mailboxes (
    id bigserial PRIMARY KEY,
    app_id text NOT NULL,
    for_nameplate boolean NOT NULL,
    started double precision NOT NULL,
    waiting_time double precision,
    total_time double precision NOT NULL,
    result text NOT NULL
);
CREATE INDEX mailboxes_started_idx ON usage.mailboxes (app_id, started);

CREATE TABLE usage.client_versions (
    id bigserial PRIMARY KEY,
    app_id text NOT NULL,
    side text NOT NULL,
    connect_time double precision NOT NULL,
    implementation text,
    version text
);
CREATE INDEX client_versions_time_idx ON usage.client_versions (connect_time);

CREATE TABLE usage.connection_counts (
    id bigserial PRIMARY KEY,
    sampled double precision NOT NULL,
    connections bigint NOT NULL,
    bound bigint NOT NULL,
    subscribed bigint NOT NULL,
    nameplates bigint NOT NULL,
    mailboxes bigint NOT NULL
);
CREATE INDEX connection_counts_sampled_idx ON usage.connection_counts (sampled);

CREATE TABLE usage.current (
    rebooted double precision NOT NULL,
    updated double precision NOT NULL,
    blur_time integer,
    connections bigint NOT NULL
);

-- A batch of effects in one call, so a batch costs one round trip and one transaction:
-- a JSON array of effects, each an array [kind, fields...] in the order store/postgres.py
-- writes them (there, `_encode`). Bodies come as hex; `body_is_text` keeps capitals verbatim.
CREATE FUNCTION channel.apply_batch(batch jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e jsonb;
BEGIN
    FOR e IN SELECT value FROM jsonb_array_elements(batch) LOOP
        CASE e->>0
        WHEN 'put_nameplate' THEN
            INSERT INTO channel.nameplates (app_id, name, mailbox_id, owner)
            VALUES (e->>1, e->>2, e->>3, e->>4)
            ON CONFLICT (app_id, name) DO UPDATE
            SET mailbox_id = EXCLUDED.mailbox_id, owner = EXCLUDED.owner;
        WHEN 'delete_nameplate' THEN
            DELETE FROM channel.nameplate_sides WHERE app_id = e->>1 AND name = e->>2;
            DELETE FROM channel.nameplates WHERE app_id = e->>1 AND name = e->>2;
        WHEN 'put_nameplate_side' THEN
            INSERT INTO channel.nameplate_sides (app_id, name, side, claimed, added)
            VALUES (e->>1, e->>2, e->>3, (e->>4)::boolean, (e->>5)::double precision)
            ON CONFLICT (app_id, name, side) DO UPDATE
            SET claimed = EXCLUDED.claimed, added = EXCLUDED.added;
        WHEN 'put_mailbox' THEN
            INSERT INTO channel.mailboxes (app_id, id, for_nameplate, created, owner)
            VALUES (e->>1, e->>2, (e->>3)::boolean, (e->>4)::double precision, e->>5)
            ON CONFLICT (app_id, id) DO UPDATE
            SET for_nameplate = EXCLUDED.for_nameplate, created = EXCLUDED.created,
                owner = EXCLUDED.owner;
        WHEN 'delete_mailbox' THEN
            DELETE FROM channel.messages WHERE app_id = e->>1 AND mailbox_id = e->>2;
            DELETE FROM channel.mailbox_sides WHERE app_id = e->>1 AND mailbox_id = e->>2;
            DELETE FROM channel.mailboxes WHERE app_id = e->>1 AND id = e->>2;
        WHEN 'put_mailbox_side' THEN
            INSERT INTO channel.mailbox_sides (app_id, mailbox_id, side, opened, added, mood)
            VALUES (e->>1, e->>2, e->>3, (e->>4)::boolean, (e->>5)::double precision, e->>6)
            ON CONFLICT (app_id, mailbox_id, side) DO UPDATE
            SET opened = EXCLUDED.opened, added = EXCLUDED.added, mood = EXCLUDED.mood;
        WHEN 'put_message' THEN
            INSERT INTO channel.messages (seq, app_id, mailbox_id, side, phase, body,
                body_is_text, server_rx, msg_id, owner)
            VALUES ((e->>1)::bigint, e->>2, e->>3, e->>4, e->>5,
                CASE WHEN (e->>7)::boolean THEN convert_to(e->>6, 'UTF8')
                     ELSE decode(e->>6, 'hex') END,
                (e->>7)::boolean, (e->>8)::double precision, e->>9, e->>10)
            ON CONFLICT (seq) DO UPDATE SET app_id = EXCLUDED.app_id,
                mailbox_id = EXCLUDED.mailbox_id, side = EXCLUDED.side,
                phase = EXCLUDED.phase, body = EXCLUDED.body,
                body_is_text = EXCLUDED.body_is_text, server_rx = EXCLUDED.server_rx,
                msg_id = EXCLUDED.msg_id, owner = EXCLUDED.owner;
        WHEN 'usage_nameplate' THEN
            INSERT INTO usage.nameplates (app_id, started, waiting_time, total_time, result)
            VALUES (e->>1, (e->>2)::double precision, (e->>3)::double precision,
                (e->>4)::double precision, e->>5);
        WHEN 'usage_mailbox' THEN
            INSERT INTO usage.mailboxes
                (app_id, for_nameplate, started, waiting_time, total_time, result)
            VALUES (e->>1, (e->>2)::boolean, (e->>3)::double precision,
                (e->>4)::double precision, (e->>5)::double precision, e->>6);
        WHEN 'usage_client_version' THEN
            INSERT INTO usage.client_versions
                (app_id, side, connect_time, implementation, version)
            VALUES (e->>1, e->>2, (e->>3)::double precision, e->>4, e->>5);
        WHEN 'usage_connection_count' THEN
            INSERT INTO usage.connection_counts
                (sampled, connections, bound, subscribed, nameplates, mailboxes)
            VALUES ((e->>1)::double precision, (e->>2)::bigint, (e->>3)::bigint,
                (e->>4)::bigint, (e->>5)::bigint, (e->>6)::bigint);
            DELETE FROM usage.current;
            INSERT INTO usage.current (rebooted, updated, blur_time, connections)
            VALUES ((e->>7)::double precision, (e->>1)::double precision,
                (e->>8)::integer, (e->>2)::bigint);
        ELSE
            RAISE EXCEPTION 'unknown effect %', e->>0;
        END CASE;
    END LOOP;
END
$$;

INSERT INTO channel.version (version) VALUES (1);
