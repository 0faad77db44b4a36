-- Pigeonhole on PostgreSQL, schema version 3 -> 4: the transit relay's usage records.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-3
-- database, and after the earlier files on a new one. A new table, `usage.transit` (the
-- SQLite usage-v2.sql's `transit`), and `channel.apply_batch` taught one more kind of
-- write, `usage_transit`; its signature and every version-3 kind are unchanged, so nodes
-- of version 3 keep working during a rolling upgrade (they never send the new kind).

CREATE TABLE usage.transit (
    id bigserial PRIMARY KEY,                -- export cursor
    started double precision NOT NULL,       -- connect time (blurred); of the side that recorded, for a pair
    total_time double precision NOT NULL,    -- last close minus the first connect
    waiting_time double precision,           -- second side's connect minus the first's; NULL if never paired
    total_bytes bigint NOT NULL,             -- both directions (rounded up when blurred)
    result text NOT NULL                     -- happy | jilted | lonely | redundant | errory | impatient | empty
);
CREATE INDEX transit_started_idx ON usage.transit (started);

-- As version 3's, with `usage_transit`: [started, total_time, waiting_time, total_bytes,
-- result] per row.
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
        WHEN 'usage_transit' THEN
            INSERT INTO usage.transit
                (started, total_time, waiting_time, total_bytes, result)
            SELECT (r->>0)::double precision, (r->>1)::double precision,
                (r->>2)::double precision, (r->>3)::bigint, r->>4
            FROM jsonb_array_elements(part->1) r;
        ELSE
            RAISE EXCEPTION 'unknown write %', part->>0;
        END CASE;
    END LOOP;
END
$$;

-- CREATE OR REPLACE drops the function's settings: set them again as version 3 did
ALTER FUNCTION channel.apply_batch(jsonb)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan;

UPDATE channel.version SET version = 4;
