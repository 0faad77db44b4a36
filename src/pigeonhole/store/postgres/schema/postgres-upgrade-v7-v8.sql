-- Pigeonhole on PostgreSQL, schema version 7 -> 8: what each address holds, kept by the database.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-7
-- database, and after the earlier files on a new one.
--
-- Until version 7 every batch that checked a per-address quota counted the address's
-- nameplates, mailboxes and stored bytes (three aggregates over its rows), so when one
-- address holds a crowd (15,000 waiting senders behind one NAT) each batch read 15,000 rows
-- and more; every node's totals, each second, counted every row. Now `channel.holdings`
-- keeps each owner's counts, written by statement-level triggers on the three tables,
-- so every writer (the batch function, pruning, a node of version 7 during a rolling
-- upgrade, an operator's DELETE) keeps them right and a read costs a handful of rows:
--   * sharded counters: a transaction adds to the rows of its own backend
--     (`shard` = pg_backend_pid()), so concurrent transactions of any number of nodes never
--     update one row and never wait for each other there; a shard's values may be negative,
--     an owner holds the sum over its shards;
--   * owner '' (no address is '') holds the totals of every row; a row whose owner is
--     NULL (--blur-usage) or '' counts there only;
--   * `channel.fold_holdings` (the leader, at each pruning run) moves shards no transaction
--     is writing into shard 0 and drops rows that hold nothing: a connection that ends
--     leaves its shards behind until then.
-- `lock_and_load` answers `owners` from it in the same shape; nodes of version 7 keep
-- working (their batches fire the triggers too; their own totals still count rows).
-- The batch functions are never JIT-compiled (see the end of this file).

-- No write may slip between the backfill below and the triggers: the three tables are
-- locked against writers (readers go on) until this transaction commits, in the order
-- a batch usually first writes them.
LOCK TABLE channel.nameplates, channel.mailboxes, channel.messages IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE channel.holdings (
    owner text NOT NULL,                     -- a client address; '': the totals of every row
    shard integer NOT NULL,                  -- the writing backend's pid; 0: folded
    nameplates bigint NOT NULL,
    mailboxes bigint NOT NULL,
    bytes bigint NOT NULL,                   -- stored body bytes (`messages.size`)
    PRIMARY KEY (owner, shard)
) WITH (fillfactor = 50);                    -- room for the updates to stay on their page

INSERT INTO channel.holdings (owner, shard, nameplates, mailboxes, bytes)
SELECT k.owner, 0, sum(d.nameplates), sum(d.mailboxes), sum(d.bytes)
FROM (SELECT owner, 1 AS nameplates, 0 AS mailboxes, 0 AS bytes FROM channel.nameplates
      UNION ALL SELECT owner, 0, 1, 0 FROM channel.mailboxes
      UNION ALL SELECT owner, 0, 0, size FROM channel.messages) d
CROSS JOIN LATERAL (VALUES (nullif(d.owner, '')), ('')) AS k(owner)
WHERE k.owner IS NOT NULL
GROUP BY k.owner;

-- A statement's changes to one table, added to this backend's shards in one upsert, owners
-- in order: TG_ARGV[0] names the column (`nameplates`, `mailboxes`: a row counts 1;
-- `bytes`: its size). An INSERT's rows are `changed`, a DELETE's too (subtracted); an
-- UPDATE (the batch's upserts, a touch) subtracts `gone` and adds `changed`, and writes
-- nothing where they cancel out. Each row counts for its owner (none when NULL or '')
-- and for the totals ('').
CREATE FUNCTION channel.track_holdings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    what text := TG_ARGV[0];
    sign bigint := CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
BEGIN
    IF TG_OP = 'UPDATE' AND what = 'bytes' THEN
        INSERT INTO channel.holdings AS h (owner, shard, nameplates, mailboxes, bytes)
        SELECT k.owner, pg_backend_pid(), 0, 0, sum(d.amount)
        FROM (SELECT owner, size AS amount FROM changed
              UNION ALL SELECT owner, -size FROM gone) d
        CROSS JOIN LATERAL (VALUES (nullif(d.owner, '')), ('')) AS k(owner)
        WHERE k.owner IS NOT NULL GROUP BY k.owner HAVING sum(d.amount) <> 0 ORDER BY k.owner
        ON CONFLICT (owner, shard) DO UPDATE SET bytes = h.bytes + EXCLUDED.bytes;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO channel.holdings AS h (owner, shard, nameplates, mailboxes, bytes)
        SELECT k.owner, pg_backend_pid(),
            CASE what WHEN 'nameplates' THEN sum(d.amount) ELSE 0 END,
            CASE what WHEN 'mailboxes' THEN sum(d.amount) ELSE 0 END, 0
        FROM (SELECT owner, 1 AS amount FROM changed UNION ALL SELECT owner, -1 FROM gone) d
        CROSS JOIN LATERAL (VALUES (nullif(d.owner, '')), ('')) AS k(owner)
        WHERE k.owner IS NOT NULL GROUP BY k.owner HAVING sum(d.amount) <> 0 ORDER BY k.owner
        ON CONFLICT (owner, shard) DO UPDATE SET nameplates = h.nameplates + EXCLUDED.nameplates,
            mailboxes = h.mailboxes + EXCLUDED.mailboxes;
    ELSIF what = 'bytes' THEN
        INSERT INTO channel.holdings AS h (owner, shard, nameplates, mailboxes, bytes)
        SELECT k.owner, pg_backend_pid(), 0, 0, sign * sum(c.size)
        FROM changed c CROSS JOIN LATERAL (VALUES (nullif(c.owner, '')), ('')) AS k(owner)
        WHERE k.owner IS NOT NULL GROUP BY k.owner HAVING sum(c.size) <> 0 ORDER BY k.owner
        ON CONFLICT (owner, shard) DO UPDATE SET bytes = h.bytes + EXCLUDED.bytes;
    ELSE
        INSERT INTO channel.holdings AS h (owner, shard, nameplates, mailboxes, bytes)
        SELECT k.owner, pg_backend_pid(),
            CASE what WHEN 'nameplates' THEN sign * count(*) ELSE 0 END,
            CASE what WHEN 'mailboxes' THEN sign * count(*) ELSE 0 END, 0
        FROM changed c CROSS JOIN LATERAL (VALUES (nullif(c.owner, '')), ('')) AS k(owner)
        WHERE k.owner IS NOT NULL GROUP BY k.owner ORDER BY k.owner
        ON CONFLICT (owner, shard) DO UPDATE SET nameplates = h.nameplates + EXCLUDED.nameplates,
            mailboxes = h.mailboxes + EXCLUDED.mailboxes;
    END IF;
    RETURN NULL;
END
$$;

-- A TRUNCATE leaves nothing of its table held by anyone (it holds the table's lock
-- against every writer of it until commit).
CREATE FUNCTION channel.truncate_holdings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE channel.holdings SET
        nameplates = CASE WHEN TG_ARGV[0] = 'nameplates' THEN 0 ELSE nameplates END,
        mailboxes = CASE WHEN TG_ARGV[0] = 'mailboxes' THEN 0 ELSE mailboxes END,
        bytes = CASE WHEN TG_ARGV[0] = 'bytes' THEN 0 ELSE bytes END;
    RETURN NULL;
END
$$;

-- a plan made for a first statement of a million rows (a new leader's grace for every
-- mailbox) would be kept, and JIT-compiled at every later call, if it could be
ALTER FUNCTION channel.track_holdings() SET jit = off;

CREATE TRIGGER holdings_insert AFTER INSERT ON channel.nameplates
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('nameplates');
CREATE TRIGGER holdings_update AFTER UPDATE ON channel.nameplates
    REFERENCING OLD TABLE AS gone NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('nameplates');
CREATE TRIGGER holdings_delete AFTER DELETE ON channel.nameplates
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('nameplates');
CREATE TRIGGER holdings_truncate AFTER TRUNCATE ON channel.nameplates
    FOR EACH STATEMENT EXECUTE FUNCTION channel.truncate_holdings('nameplates');

CREATE TRIGGER holdings_insert AFTER INSERT ON channel.mailboxes
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('mailboxes');
CREATE TRIGGER holdings_update AFTER UPDATE ON channel.mailboxes
    REFERENCING OLD TABLE AS gone NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('mailboxes');
CREATE TRIGGER holdings_delete AFTER DELETE ON channel.mailboxes
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('mailboxes');
CREATE TRIGGER holdings_truncate AFTER TRUNCATE ON channel.mailboxes
    FOR EACH STATEMENT EXECUTE FUNCTION channel.truncate_holdings('mailboxes');

CREATE TRIGGER holdings_insert AFTER INSERT ON channel.messages
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('bytes');
CREATE TRIGGER holdings_update AFTER UPDATE ON channel.messages
    REFERENCING OLD TABLE AS gone NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('bytes');
CREATE TRIGGER holdings_delete AFTER DELETE ON channel.messages
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_holdings('bytes');
CREATE TRIGGER holdings_truncate AFTER TRUNCATE ON channel.messages
    FOR EACH STATEMENT EXECUTE FUNCTION channel.truncate_holdings('bytes');

-- Fold up to `most` shard rows that no transaction is writing into shard 0, and drop the
-- folded owners' rows that hold nothing; the number of shard rows folded. In one
-- transaction: the rows are locked first (SKIP LOCKED: a writer's open transaction
-- keeps its rows, folded next time, and this never waits for one), so the values it
-- deletes are the ones it adds, and a reader sees the rows before the fold or after it,
-- each owner's sum the same. A writer that meets a folded row waits for this commit and
-- then makes its row anew. Only shard 0 is written by two folds at once (in owner order).
CREATE FUNCTION channel.fold_holdings(most integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    f_owner text[];
    f_shard integer[];
BEGIN
    SELECT coalesce(array_agg(s.owner), '{}'), coalesce(array_agg(s.shard), '{}')
    INTO f_owner, f_shard
    FROM (SELECT h.owner, h.shard FROM channel.holdings h WHERE h.shard <> 0
          ORDER BY h.owner, h.shard LIMIT most FOR UPDATE SKIP LOCKED) s;
    IF cardinality(f_owner) = 0 THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM channel.holdings h USING unnest(f_owner, f_shard) AS f(owner, shard)
        WHERE h.owner = f.owner AND h.shard = f.shard
        RETURNING h.owner, h.nameplates, h.mailboxes, h.bytes)
    INSERT INTO channel.holdings AS h (owner, shard, nameplates, mailboxes, bytes)
    SELECT g.owner, 0, sum(g.nameplates), sum(g.mailboxes), sum(g.bytes)
    FROM gone g GROUP BY g.owner ORDER BY g.owner
    ON CONFLICT (owner, shard) DO UPDATE SET nameplates = h.nameplates + EXCLUDED.nameplates,
        mailboxes = h.mailboxes + EXCLUDED.mailboxes, bytes = h.bytes + EXCLUDED.bytes;
    DELETE FROM channel.holdings h
    WHERE h.owner IN (SELECT DISTINCT unnest(f_owner)) AND h.shard = 0
        AND h.nameplates = 0 AND h.mailboxes = 0 AND h.bytes = 0;
    RETURN cardinality(f_owner);
END
$$;

ALTER FUNCTION channel.fold_holdings(integer)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off;

-- As version 7's, with `owners` read from `channel.holdings`: [owner, nameplates,
-- mailboxes, bytes], each the sum over the owner's shards (an owner holding nothing reads
-- zeros, as before).
-- The names an allocation reads, given how many the batch wants in the app (`wanted`: its
-- `allocate`s there and the names the node's other running batches are making): version
-- 7's answer, plus the lengths after the shortest with a free number, each as
-- [length, 'taken' | 'free', its taken names or free numbers], until the lengths listed
-- hold `wanted` free numbers; the drawn long numbers are read when they do not. A batch
-- that takes the shortest length's last free numbers goes on in the next length knowing
-- its names (with version 7's answer it drew there blind, and a taken draw made the batch
-- collide, and collide again when decided again).
CREATE FUNCTION channel.short_names(app text, long text[], wanted int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    counts int[] := ARRAY[0, 0, 0];
    r record;
    shortest int := 0;
    low int;
    high int;
    kind text;
    names jsonb;
    first_kind text := '';
    first_listed jsonb := '[]'::jsonb;
    more jsonb := '[]'::jsonb;
    free_listed int := 0;
    long_free jsonb := '[]'::jsonb;
BEGIN
    FOR r IN SELECT length(n.name) AS len, count(*) AS taken FROM channel.nameplates n
            WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$' GROUP BY 1 LOOP
        counts[r.len] := r.taken;
    END LOOP;
    FOR k IN 1..3 LOOP
        low := (10 ^ (k - 1))::int;
        high := (10 ^ k)::int;
        CONTINUE WHEN counts[k] >= high - low;
        IF 2 * counts[k] <= high - low THEN
            kind := 'taken';
            SELECT coalesce(jsonb_agg(n.name), '[]'::jsonb) INTO names FROM channel.nameplates n
                WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$' AND length(n.name) = k;
        ELSE
            kind := 'free';
            SELECT coalesce(jsonb_agg(g.n ORDER BY g.n), '[]'::jsonb) INTO names
                FROM generate_series(low, high - 1) AS g(n)
                WHERE g.n::text NOT IN (SELECT n.name FROM channel.nameplates n
                    WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$'
                        AND length(n.name) = k);
        END IF;
        IF shortest = 0 THEN
            shortest := k;
            first_kind := kind;
            first_listed := names;
        ELSE
            more := more || jsonb_build_array(jsonb_build_array(k, kind, names));
        END IF;
        free_listed := free_listed + (high - low - counts[k]);
        EXIT WHEN free_listed >= wanted;
    END LOOP;
    IF free_listed < wanted AND cardinality(long) > 0 THEN
        SELECT coalesce(jsonb_agg(c.name ORDER BY c.i), '[]'::jsonb) INTO long_free
            FROM unnest(long) WITH ORDINALITY AS c(name, i)
            WHERE NOT EXISTS (SELECT 1 FROM channel.nameplates n
                WHERE n.app_id = app AND n.name = c.name);
    END IF;
    RETURN jsonb_build_array(app, to_jsonb(counts), shortest, first_kind, first_listed,
        long_free, more);
END
$$;
ALTER FUNCTION channel.short_names(text, text[], int)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off;

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
        'allocates', (SELECT coalesce(jsonb_agg(CASE WHEN spec ? 'wanted'
                THEN channel.short_names(a.app_id,
                    coalesce(ARRAY(SELECT v->>1 FROM jsonb_array_elements(spec->'long') v
                        WHERE v->>0 = a.app_id), '{}'),
                    coalesce((spec->'wanted'->>a.app_id)::int, 1))
                ELSE channel.short_names(a.app_id,
                    coalesce(ARRAY(SELECT v->>1 FROM jsonb_array_elements(spec->'long') v
                        WHERE v->>0 = a.app_id), '{}')) END), '[]')
            FROM (SELECT DISTINCT jsonb_array_elements_text(coalesce(spec->'allocates', '[]'))
                AS app_id) a),
        'owners', CASE WHEN jsonb_array_length(spec->'owners') = 0 THEN '[]'::jsonb ELSE (SELECT coalesce(jsonb_agg(jsonb_build_array(
                o.owner, t.nameplates, t.mailboxes, t.bytes)), '[]')
            FROM (SELECT jsonb_array_elements_text(spec->'owners') AS owner) o
            CROSS JOIN LATERAL (SELECT coalesce(sum(h.nameplates), 0)::bigint AS nameplates,
                    coalesce(sum(h.mailboxes), 0)::bigint AS mailboxes,
                    coalesce(sum(h.bytes), 0)::bigint AS bytes
                FROM channel.holdings h WHERE h.owner = nullif(o.owner, '')) t) END
    );
END
$$;

-- CREATE OR REPLACE drops the function's settings: set them again as version 3 did, and
-- never JIT-compile the batch functions' statements. A plan's estimated cost counts every
-- part, asked for or not: version 7's, with the owners' aggregates estimated over a crowd
-- of 15,000 rows, passed jit_above_cost, and each call spent some 37 ms compiling (a
-- generic plan is compiled again at every execution) for a statement that runs in under
-- a millisecond.
ALTER FUNCTION channel.lock_and_load(jsonb)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off;
ALTER FUNCTION channel.apply_batch(jsonb) SET jit = off;

UPDATE channel.version SET version = 8;
