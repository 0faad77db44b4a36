-- Pigeonhole on PostgreSQL, schema version 1 -> 2: several nodes share one database.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-1
-- database, and after postgres-v1.sql on a new one. What version 2 adds:
--   * the database is the truth: each node decides a batch of commands inside one
--     transaction that first locks what those commands touch (`channel.lock_and_load`),
--     then writes their effects and notifies the other nodes (`channel.apply_batch`);
--   * `mailboxes.updated` (liveness, for pruning by whichever node prunes) and
--     `messages.size` (quotas per address are counted from the rows);
--   * one sequence for message numbers, handed out in blocks of 1024 per batch;
--   * `channel.nodes`: each node's connection counts, summed into the usage samples.

ALTER TABLE channel.mailboxes ADD COLUMN updated double precision;
UPDATE channel.mailboxes SET updated = created;
ALTER TABLE channel.mailboxes ALTER COLUMN updated SET NOT NULL;
CREATE INDEX mailboxes_owner_idx ON channel.mailboxes (owner) WHERE owner IS NOT NULL;

ALTER TABLE channel.messages ADD COLUMN size bigint;
UPDATE channel.messages
SET size = CASE WHEN body_is_text THEN length(body) / 2 ELSE length(body) END;
ALTER TABLE channel.messages ALTER COLUMN size SET NOT NULL;
CREATE INDEX messages_owner_idx ON channel.messages (owner) INCLUDE (size)
    WHERE owner IS NOT NULL;

CREATE INDEX nameplates_mailbox_idx ON channel.nameplates (app_id, mailbox_id);
CREATE INDEX nameplates_owner_idx ON channel.nameplates (owner) WHERE owner IS NOT NULL;

-- a batch takes one value and numbers its messages from it: within one mailbox, numbers
-- grow in commit order (the batch holds the mailbox's lock when it takes the value)
CREATE SEQUENCE channel.message_seq INCREMENT BY 1024;
SELECT setval('channel.message_seq', coalesce(max(seq), 0) + 1024) FROM channel.messages;

CREATE TABLE channel.nodes (
    node text PRIMARY KEY,                   -- a node's random id, new at every start
    started double precision NOT NULL,
    updated double precision NOT NULL,       -- its last report; stale rows are not summed
    connections bigint NOT NULL,
    bound bigint NOT NULL,
    subscribed bigint NOT NULL
);

-- Lock what a batch of commands touches and return it, as one JSON object.
-- spec: {"names": [[app, name]...], "mailboxes": [[app, id]...], "apps": [app...],
--        "owners": [owner...], "bodies": [[app, id]...], "seq": bool}
-- Locks are transaction advisory locks taken in one global order, nameplates before
-- mailboxes and each kind sorted by key, so batches on different nodes never deadlock on
-- them: first the named nameplates and those pointing at the named mailboxes, then the
-- named mailboxes and those the locked nameplates point at. Then it reads, under those
-- locks, the rows the protocol core needs to decide (store/shared.py builds a Rendezvous of
-- them): the nameplates and mailboxes with their sides and messages (bodies only for
-- `bodies`), every nameplate name of `apps` (allocate and list), what each owner holds,
-- and, with `seq`, the first of a block of message numbers.
CREATE FUNCTION channel.lock_and_load(spec jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    k bigint;
    n_app text[];
    n_name text[];
    b_app text[];
    b_id text[];
    first_seq bigint;
BEGIN
    SELECT coalesce(array_agg(v->>0), '{}'), coalesce(array_agg(v->>1), '{}')
    INTO n_app, n_name FROM jsonb_array_elements(spec->'names') v;
    SELECT coalesce(array_agg(v->>0), '{}'), coalesce(array_agg(v->>1), '{}')
    INTO b_app, b_id FROM jsonb_array_elements(spec->'mailboxes') v;
    -- nameplates that point at a named mailbox (a close deletes them): no new nameplate
    -- ever points at an existing mailbox, so reading them before the lock is safe
    -- (each part below is only read when the batch asks for it)
    SELECT n_app || coalesce(array_agg(n.app_id), '{}'), n_name || coalesce(array_agg(n.name), '{}')
    INTO n_app, n_name
    FROM channel.nameplates n JOIN unnest(b_app, b_id) AS b(app_id, id)
        ON n.app_id = b.app_id AND n.mailbox_id = b.id;
    FOR k IN
        SELECT DISTINCT hashtextextended('n' || w.app_id || chr(1) || w.name, 0)
        FROM unnest(n_app, n_name) AS w(app_id, name) ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
    -- mailboxes the (now locked) nameplates point at (a claim opens it)
    SELECT b_app || coalesce(array_agg(n.app_id), '{}'), b_id || coalesce(array_agg(n.mailbox_id), '{}')
    INTO b_app, b_id
    FROM channel.nameplates n JOIN unnest(n_app, n_name) AS w(app_id, name)
        ON n.app_id = w.app_id AND n.name = w.name;
    FOR k IN
        SELECT DISTINCT hashtextextended('m' || b.app_id || chr(1) || b.id, 0)
        FROM unnest(b_app, b_id) AS b(app_id, id) ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
    IF (spec->>'seq')::boolean THEN
        first_seq := nextval('channel.message_seq');
    END IF;
    RETURN jsonb_build_object(
        'seq', first_seq,
        'nameplates', CASE WHEN cardinality(n_app) = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                n.app_id, n.name, n.mailbox_id, n.owner)), '[]')
            FROM channel.nameplates n
            WHERE (n.app_id, n.name) IN (SELECT * FROM unnest(n_app, n_name))) END,
        'nameplate_sides', CASE WHEN cardinality(n_app) = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                s.app_id, s.name, s.side, s.claimed, s.added)), '[]')
            FROM channel.nameplate_sides s
            WHERE (s.app_id, s.name) IN (SELECT * FROM unnest(n_app, n_name))) END,
        'mailboxes', CASE WHEN cardinality(b_app) = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                m.app_id, m.id, m.for_nameplate, m.owner, m.updated)), '[]')
            FROM channel.mailboxes m
            WHERE (m.app_id, m.id) IN (SELECT * FROM unnest(b_app, b_id))) END,
        'mailbox_sides', CASE WHEN cardinality(b_app) = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                s.app_id, s.mailbox_id, s.side, s.opened, s.added, s.mood)), '[]')
            FROM channel.mailbox_sides s
            WHERE (s.app_id, s.mailbox_id) IN (SELECT * FROM unnest(b_app, b_id))) END,
        'messages', CASE WHEN cardinality(b_app) = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                g.seq, g.app_id, g.mailbox_id, g.side, g.phase, g.size, g.server_rx,
                g.msg_id, g.owner) ORDER BY g.seq), '[]')
            FROM channel.messages g
            WHERE (g.app_id, g.mailbox_id) IN (SELECT * FROM unnest(b_app, b_id))) END,
        'bodies', CASE WHEN jsonb_array_length(spec->'bodies') = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(g.seq,
                CASE WHEN g.body_is_text THEN convert_from(g.body, 'UTF8')
                     ELSE encode(g.body, 'hex') END)), '[]')
            FROM channel.messages g
            WHERE (g.app_id, g.mailbox_id) IN (
                SELECT v->>0, v->>1 FROM jsonb_array_elements(spec->'bodies') v)) END,
        'app_names', CASE WHEN jsonb_array_length(spec->'apps') = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                n.app_id, n.name, n.mailbox_id)), '[]')
            FROM channel.nameplates n
            WHERE n.app_id IN (SELECT jsonb_array_elements_text(spec->'apps'))) END,
        'owners', CASE WHEN jsonb_array_length(spec->'owners') = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(o.owner,
                (SELECT count(*) FROM channel.nameplates n WHERE n.owner = o.owner),
                (SELECT count(*) FROM channel.mailboxes m WHERE m.owner = o.owner),
                (SELECT coalesce(sum(g.size), 0) FROM channel.messages g
                    WHERE g.owner = o.owner))), '[]')
            FROM (SELECT jsonb_array_elements_text(spec->'owners') AS owner) o) END
    );
END
$$;

-- version 2's batch: as version 1's, plus what several nodes need. A new nameplate is a
-- plain INSERT (`insert_nameplate`, in place of version 1's upsert `put_nameplate`) (two nodes creating one name: the second fails and its batch is decided
-- again), a message records its size, `touch` keeps a mailbox alive (store/shared.py
-- touches every mailbox a command used), and `notify` tells every node (their
-- subscribers) in the same transaction.
CREATE OR REPLACE FUNCTION channel.apply_batch(batch jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e jsonb;
BEGIN
    FOR e IN SELECT value FROM jsonb_array_elements(batch) LOOP
        CASE e->>0
        WHEN 'insert_nameplate' THEN
            -- an allocated name was not locked when it was chosen: take its lock now, but
            -- never wait for it (two batches allocating each other's names would
            -- deadlock); a name another batch holds or made is a collision: decide again
            IF NOT pg_try_advisory_xact_lock(
                    hashtextextended('n' || (e->>1) || chr(1) || (e->>2), 0)) THEN
                RAISE EXCEPTION 'nameplate % is being made by another batch', e->>2
                    USING ERRCODE = 'serialization_failure';
            END IF;
            INSERT INTO channel.nameplates (app_id, name, mailbox_id, owner)
            VALUES (e->>1, e->>2, e->>3, e->>4);
        WHEN 'delete_nameplate' THEN
            DELETE FROM channel.nameplate_sides WHERE app_id = e->>1 AND name = e->>2;
            DELETE FROM channel.nameplates WHERE app_id = e->>1 AND name = e->>2;
        WHEN 'put_nameplate_side' THEN
            INSERT INTO channel.nameplate_sides (app_id, name, side, claimed, added)
            VALUES (e->>1, e->>2, e->>3, (e->>4)::boolean, (e->>5)::double precision)
            ON CONFLICT (app_id, name, side) DO UPDATE
            SET claimed = EXCLUDED.claimed, added = EXCLUDED.added;
        WHEN 'put_mailbox' THEN
            INSERT INTO channel.mailboxes (app_id, id, for_nameplate, created, owner, updated)
            VALUES (e->>1, e->>2, (e->>3)::boolean, (e->>4)::double precision, e->>5,
                (e->>4)::double precision)
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
        WHEN 'touch' THEN
            UPDATE channel.mailboxes SET updated = greatest(updated, (e->>3)::double precision)
            WHERE app_id = e->>1 AND id = e->>2;
        WHEN 'put_message' THEN
            INSERT INTO channel.messages (seq, app_id, mailbox_id, side, phase, body,
                body_is_text, server_rx, msg_id, owner, size)
            VALUES ((e->>1)::bigint, e->>2, e->>3, e->>4, e->>5,
                CASE WHEN (e->>7)::boolean THEN convert_to(e->>6, 'UTF8')
                     ELSE decode(e->>6, 'hex') END,
                (e->>7)::boolean, (e->>8)::double precision, e->>9, e->>10,
                length(e->>6) / 2)
            ON CONFLICT (seq) DO UPDATE SET app_id = EXCLUDED.app_id,
                mailbox_id = EXCLUDED.mailbox_id, side = EXCLUDED.side,
                phase = EXCLUDED.phase, body = EXCLUDED.body,
                body_is_text = EXCLUDED.body_is_text, server_rx = EXCLUDED.server_rx,
                msg_id = EXCLUDED.msg_id, owner = EXCLUDED.owner, size = EXCLUDED.size;
        WHEN 'notify' THEN
            PERFORM pg_notify('pigeonhole', e->>1);
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

UPDATE channel.version SET version = 2;
