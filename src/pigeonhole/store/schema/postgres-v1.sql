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

INSERT INTO channel.version (version) VALUES (1);
