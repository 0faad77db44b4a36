-- Pigeonhole on PostgreSQL, schema version 6 -> 7: allocation reads what it needs, not every name.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-6
-- database, and after the earlier files on a new one.
--
-- Until version 6 an `allocate` loaded every nameplate name of its app (`app_names`), so
-- beside a crowd of 15,000 waiting senders each allocation read, sent and parsed 15,000
-- rows. Now the batch lists the apps it allocates in (`allocates`) with a few random long
-- numbers drawn for each (`long`), and `channel.short_names` answers per app from an index
-- of the short numbers alone (1-999, exactly as written: "07" is not 7): how many of each
-- length are taken, the shortest length with a free number and either its taken names (at
-- most half of it taken) or its free numbers (more than half), and, when 1-999 are all
-- taken, which of the drawn long numbers are free. `app_names` stays for `list` and for nodes
-- of version 6 during a rolling upgrade (a spec without the new keys reads as before).

CREATE INDEX nameplates_short_idx ON channel.nameplates (app_id, length(name), name)
    WHERE name ~ '^[1-9][0-9]{0,2}$';

-- [app, [taken of length 1, 2, 3], shortest length with a free number (0: none),
--  'taken' | 'free' | '', its taken names or free numbers, the free ones among `long` (in
--  their order) when 1-999 are all taken]
CREATE FUNCTION channel.short_names(app text, long text[]) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    counts int[] := ARRAY[0, 0, 0];
    r record;
    shortest int := 0;
    low int;
    high int;
    kind text := '';
    listed jsonb := '[]'::jsonb;
    long_free jsonb := '[]'::jsonb;
BEGIN
    FOR r IN SELECT length(n.name) AS len, count(*) AS taken FROM channel.nameplates n
            WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$' GROUP BY 1 LOOP
        counts[r.len] := r.taken;
    END LOOP;
    FOR k IN 1..3 LOOP
        low := (10 ^ (k - 1))::int;
        high := (10 ^ k)::int;
        IF counts[k] < high - low THEN
            shortest := k;
            EXIT;
        END IF;
    END LOOP;
    IF shortest > 0 THEN
        IF 2 * counts[shortest] <= high - low THEN
            kind := 'taken';
            SELECT coalesce(jsonb_agg(n.name), '[]'::jsonb) INTO listed FROM channel.nameplates n
                WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$'
                    AND length(n.name) = shortest;
        ELSE
            kind := 'free';
            SELECT coalesce(jsonb_agg(g.k ORDER BY g.k), '[]'::jsonb) INTO listed
                FROM generate_series(low, high - 1) AS g(k)
                WHERE g.k::text NOT IN (SELECT n.name FROM channel.nameplates n
                    WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$'
                        AND length(n.name) = shortest);
        END IF;
    ELSIF cardinality(long) > 0 THEN
        SELECT coalesce(jsonb_agg(c.name ORDER BY c.i), '[]'::jsonb) INTO long_free
            FROM unnest(long) WITH ORDINALITY AS c(name, i)
            WHERE NOT EXISTS (SELECT 1 FROM channel.nameplates n
                WHERE n.app_id = app AND n.name = c.name);
    END IF;
    RETURN jsonb_build_array(app, to_jsonb(counts), shortest, kind, listed, long_free);
END
$$;
ALTER FUNCTION channel.short_names(text, text[])
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan;

-- As version 3's, with `allocates` in the answer.
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
        'allocates', (SELECT coalesce(jsonb_agg(channel.short_names(a.app_id,
                coalesce(ARRAY(SELECT v->>1 FROM jsonb_array_elements(spec->'long') v
                    WHERE v->>0 = a.app_id), '{}'))), '[]')
            FROM (SELECT DISTINCT jsonb_array_elements_text(coalesce(spec->'allocates', '[]'))
                AS app_id) a),
        'owners', CASE WHEN jsonb_array_length(spec->'owners') = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(o.owner,
                (SELECT count(*) FROM channel.nameplates n WHERE n.owner = o.owner),
                (SELECT count(*) FROM channel.mailboxes m WHERE m.owner = o.owner),
                (SELECT coalesce(sum(g.size), 0) FROM channel.messages g
                    WHERE g.owner = o.owner))), '[]')
            FROM (SELECT jsonb_array_elements_text(spec->'owners') AS owner) o) END
    );
END
$$;

ALTER FUNCTION channel.lock_and_load(jsonb)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan;

UPDATE channel.version SET version = 7;
