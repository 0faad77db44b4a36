-- Pigeonhole on PostgreSQL, schema version 2 -> 3: a batch's writes are set-based.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-2
-- database, and after the earlier files on a new one. No table changes; the two batch
-- functions keep their signatures, so nodes of version 2 keep working during an upgrade:
--   * `channel.apply_batch` takes the writes grouped into parts (store/parts.py), one
--     statement per part instead of one PL/pgSQL step per write; version 2's array of
--     single writes is still taken (each write is then a part of its own);
--   * `channel.lock_and_load` takes each kind of advisory lock in one statement, still
--     in the one global order (nameplates, then mailboxes, each sorted by key).

-- batch: {"parts": [[kind, [row, ...]], ...]}, each row a write without its kind, or
-- version 2's [[kind, field, ...], ...]. Parts are applied in order; store/parts.py only
-- groups writes whose order does not matter, so a part never writes one row twice.
CREATE OR REPLACE FUNCTION channel.apply_batch(batch jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    parts jsonb := batch->'parts';
    part jsonb;
    c jsonb;
BEGIN
    IF jsonb_typeof(batch) = 'array' THEN
        SELECT coalesce(jsonb_agg(jsonb_build_array(e->0, jsonb_build_array(e - 0)) ORDER BY i), '[]')
        INTO parts FROM jsonb_array_elements(batch) WITH ORDINALITY AS x(e, i);
    END IF;
    FOR part IN SELECT value FROM jsonb_array_elements(parts) LOOP
        CASE part->>0
        WHEN 'insert_nameplate' THEN
            -- an allocated name was not locked when it was chosen: take its lock now, but
            -- never wait for it (two batches allocating each other's names would
            -- deadlock); a name another batch holds or made is a collision: decide again
            IF NOT (SELECT bool_and(pg_try_advisory_xact_lock(
                        hashtextextended('n' || (r->>0) || chr(1) || (r->>1), 0)))
                    FROM jsonb_array_elements(part->1) r) THEN
                RAISE EXCEPTION 'a nameplate is being made by another batch'
                    USING ERRCODE = 'serialization_failure';
            END IF;
            INSERT INTO channel.nameplates (app_id, name, mailbox_id, owner)
            SELECT r->>0, r->>1, r->>2, r->>3 FROM jsonb_array_elements(part->1) r;
        WHEN 'delete_nameplate' THEN
            DELETE FROM channel.nameplate_sides s USING jsonb_array_elements(part->1) r
            WHERE s.app_id = r->>0 AND s.name = r->>1;
            DELETE FROM channel.nameplates n USING jsonb_array_elements(part->1) r
            WHERE n.app_id = r->>0 AND n.name = r->>1;
        WHEN 'put_nameplate_side' THEN
            INSERT INTO channel.nameplate_sides (app_id, name, side, claimed, added)
            SELECT r->>0, r->>1, r->>2, (r->>3)::boolean, (r->>4)::double precision
            FROM jsonb_array_elements(part->1) r
            ON CONFLICT (app_id, name, side) DO UPDATE
            SET claimed = EXCLUDED.claimed, added = EXCLUDED.added;
        WHEN 'put_mailbox' THEN
            INSERT INTO channel.mailboxes (app_id, id, for_nameplate, created, owner, updated)
            SELECT r->>0, r->>1, (r->>2)::boolean, (r->>3)::double precision, r->>4,
                (r->>3)::double precision
            FROM jsonb_array_elements(part->1) r
            ON CONFLICT (app_id, id) DO UPDATE
            SET for_nameplate = EXCLUDED.for_nameplate, created = EXCLUDED.created,
                owner = EXCLUDED.owner;
        WHEN 'delete_mailbox' THEN
            DELETE FROM channel.messages g USING jsonb_array_elements(part->1) r
            WHERE g.app_id = r->>0 AND g.mailbox_id = r->>1;
            DELETE FROM channel.mailbox_sides s USING jsonb_array_elements(part->1) r
            WHERE s.app_id = r->>0 AND s.mailbox_id = r->>1;
            DELETE FROM channel.mailboxes m USING jsonb_array_elements(part->1) r
            WHERE m.app_id = r->>0 AND m.id = r->>1;
        WHEN 'put_mailbox_side' THEN
            INSERT INTO channel.mailbox_sides (app_id, mailbox_id, side, opened, added, mood)
            SELECT r->>0, r->>1, r->>2, (r->>3)::boolean, (r->>4)::double precision, r->>5
            FROM jsonb_array_elements(part->1) r
            ON CONFLICT (app_id, mailbox_id, side) DO UPDATE
            SET opened = EXCLUDED.opened, added = EXCLUDED.added, mood = EXCLUDED.mood;
        WHEN 'touch' THEN
            UPDATE channel.mailboxes m
            SET updated = greatest(m.updated, (r->>2)::double precision)
            FROM jsonb_array_elements(part->1) r
            WHERE m.app_id = r->>0 AND m.id = r->>1;
        WHEN 'put_message' THEN
            INSERT INTO channel.messages (seq, app_id, mailbox_id, side, phase, body,
                body_is_text, server_rx, msg_id, owner, size)
            SELECT (r->>0)::bigint, r->>1, r->>2, r->>3, r->>4,
                CASE WHEN (r->>6)::boolean THEN convert_to(r->>5, 'UTF8')
                     ELSE decode(r->>5, 'hex') END,
                (r->>6)::boolean, (r->>7)::double precision, r->>8, r->>9,
                length(r->>5) / 2
            FROM jsonb_array_elements(part->1) r
            ON CONFLICT (seq) DO UPDATE SET app_id = EXCLUDED.app_id,
                mailbox_id = EXCLUDED.mailbox_id, side = EXCLUDED.side,
                phase = EXCLUDED.phase, body = EXCLUDED.body,
                body_is_text = EXCLUDED.body_is_text, server_rx = EXCLUDED.server_rx,
                msg_id = EXCLUDED.msg_id, owner = EXCLUDED.owner, size = EXCLUDED.size;
        WHEN 'notify' THEN
            -- in row order: the rows come out of jsonb_array_elements in order
            PERFORM pg_notify('pigeonhole', r->>0) FROM jsonb_array_elements(part->1) r;
        WHEN 'usage_nameplate' THEN
            INSERT INTO usage.nameplates (app_id, started, waiting_time, total_time, result)
            SELECT r->>0, (r->>1)::double precision, (r->>2)::double precision,
                (r->>3)::double precision, r->>4
            FROM jsonb_array_elements(part->1) r;
        WHEN 'usage_mailbox' THEN
            INSERT INTO usage.mailboxes
                (app_id, for_nameplate, started, waiting_time, total_time, result)
            SELECT r->>0, (r->>1)::boolean, (r->>2)::double precision,
                (r->>3)::double precision, (r->>4)::double precision, r->>5
            FROM jsonb_array_elements(part->1) r;
        WHEN 'usage_client_version' THEN
            INSERT INTO usage.client_versions
                (app_id, side, connect_time, implementation, version)
            SELECT r->>0, r->>1, (r->>2)::double precision, r->>3, r->>4
            FROM jsonb_array_elements(part->1) r;
        WHEN 'usage_connection_count' THEN
            FOR c IN SELECT value FROM jsonb_array_elements(part->1) LOOP
                INSERT INTO usage.connection_counts
                    (sampled, connections, bound, subscribed, nameplates, mailboxes)
                VALUES ((c->>0)::double precision, (c->>1)::bigint, (c->>2)::bigint,
                    (c->>3)::bigint, (c->>4)::bigint, (c->>5)::bigint);
                DELETE FROM usage.current;
                INSERT INTO usage.current (rebooted, updated, blur_time, connections)
                VALUES ((c->>6)::double precision, (c->>0)::double precision,
                    (c->>7)::integer, (c->>1)::bigint);
            END LOOP;
        ELSE
            RAISE EXCEPTION 'unknown write %', part->>0;
        END CASE;
    END LOOP;
END
$$;

-- As version 2's, but each kind of lock is taken in one statement (not a PL/pgSQL loop
-- step per lock), and the replayed bodies are looked up by key like the other rows.
CREATE OR REPLACE FUNCTION channel.lock_and_load(spec jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    n_app text[];
    n_name text[];
    b_app text[];
    b_id text[];
    r_app text[];
    r_id text[];
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
    -- one statement per kind of lock, taken in the sorted order the subquery yields
    PERFORM pg_advisory_xact_lock(k) FROM (
        SELECT DISTINCT hashtextextended('n' || w.app_id || chr(1) || w.name, 0) AS k
        FROM unnest(n_app, n_name) AS w(app_id, name) ORDER BY 1) AS sorted;
    -- mailboxes the (now locked) nameplates point at (a claim opens it)
    SELECT b_app || coalesce(array_agg(n.app_id), '{}'), b_id || coalesce(array_agg(n.mailbox_id), '{}')
    INTO b_app, b_id
    FROM channel.nameplates n JOIN unnest(n_app, n_name) AS w(app_id, name)
        ON n.app_id = w.app_id AND n.name = w.name;
    PERFORM pg_advisory_xact_lock(k) FROM (
        SELECT DISTINCT hashtextextended('m' || b.app_id || chr(1) || b.id, 0) AS k
        FROM unnest(b_app, b_id) AS b(app_id, id) ORDER BY 1) AS sorted;
    SELECT coalesce(array_agg(v->>0), '{}'), coalesce(array_agg(v->>1), '{}')
    INTO r_app, r_id FROM jsonb_array_elements(spec->'bodies') v;
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
            WHERE (g.app_id, g.mailbox_id) IN (SELECT * FROM unnest(r_app, r_id))) END,
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

-- Both functions look rows up by key among a churning table's live and dead rows: index
-- scans, always (a fresh table's missing statistics made the planner choose sequential
-- scans, whose cost grows with the dead rows between vacuums), and plans made once per
-- connection, not at every call (PL/pgSQL re-plans a statement for its parameters'
-- values unless told not to: measured with pgbench, a one-key lock_and_load took
-- 0.82 ms re-planned and 0.37 ms with its plans kept)
ALTER FUNCTION channel.lock_and_load(jsonb)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION channel.apply_batch(jsonb)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan;

UPDATE channel.version SET version = 3;
