-- Pigeonhole on PostgreSQL, schema version 4 -> 5: transit connections waiting for a partner.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-4
-- database, and after the earlier files on a new one. Only a new table: nodes of version 4
-- never read or write it and keep working during a rolling upgrade (their relays pair only
-- the sides that reach them, as before).
--
-- A node's relay records each connection that waits for its partner there; a node whose
-- relay gets the other side finds the row (under a transaction advisory lock per token)
-- and forwards that side to `address`, so the pair meets on the waiting side's node.

CREATE TABLE channel.transit_waiting (
    id bigserial PRIMARY KEY,
    token text NOT NULL,                     -- the handshake's token (64 hex digits)
    side text,                               -- its side; NULL for the old form without one
    address text NOT NULL,                   -- HOST:PORT of the node's relay (--transit-node-address)
    since double precision NOT NULL          -- when it started waiting (rows past the lonely timeout are ignored)
);
CREATE INDEX transit_waiting_token_idx ON channel.transit_waiting (token);
CREATE INDEX transit_waiting_address_idx ON channel.transit_waiting (address);

UPDATE channel.version SET version = 5;
