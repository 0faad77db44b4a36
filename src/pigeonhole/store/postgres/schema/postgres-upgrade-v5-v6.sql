-- Pigeonhole on PostgreSQL, schema version 5 -> 6: each waiting transit connection's ticket.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-5
-- database, and after the earlier files on a new one. Only a new nullable column: nodes of
-- version 5 still running during a rolling upgrade record waiters without a ticket, and
-- forward to a node of version 6 with the plain handshake line, as before.
--
-- A node that finds a waiter elsewhere sends its ticket with the handshake
-- (`please relay TOKEN for side SIDE link TICKET`): the waiting node then counts that
-- connection as a link between relays, not as a client of the forwarding node's address.

ALTER TABLE channel.transit_waiting ADD COLUMN ticket text;  -- 32 hex digits; NULL from v5 nodes

UPDATE channel.version SET version = 6;
