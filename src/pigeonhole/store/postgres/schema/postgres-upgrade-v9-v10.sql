-- Pigeonhole on PostgreSQL, schema version 9 -> 10: fewer and shallower lookups per
-- exchange beside a crowd (the short numbers' counts kept, the owner indexes gone, keys
-- that lead with what tells rows apart). Applied by the server in one transaction (under
-- the schema advisory lock) on a version-9 database, and after the earlier files on a new
-- one.
--
-- Until version 9, every allocation counted the app's taken numbers of each length (1-999)
-- over the index of short names. Beside a crowd holding all 999, each allocation read 999
-- index entries and their rows (860 buffers), the largest part of what an exchange cost
-- the database more beside a crowd. Now `channel.short_taken` keeps those counts, written by
-- statement-level triggers on `channel.nameplates` and sharded by backend as
-- `channel.holdings` is (a transaction adds to its own backend's rows, so concurrent
-- writers never update one row; a shard's count may be negative, the app's count is the
-- sum), and `channel.short_names` reads a handful of rows. `channel.fold_holdings` (the
-- leader, at each pruning run) folds these shards too.
--
-- The indexes on `owner` (version 2's, for counting what an address holds) go: since
-- version 8 `channel.holdings` answers that and no statement reads them, but every
-- nameplate, mailbox and message stored or deleted still wrote them.
--
-- The keys of the channel tables lead with what tells their rows apart (the name, the
-- mailbox id) and end with the app, which nearly every row shares. Every statement looks
-- rows up by all of a key's columns, so any order serves it; but a B-tree's inner pages
-- keep only as many leading columns as separate their children, and with the app first
-- each kept the whole app id (37 characters for the CLIs) and the id: beside 15,000
-- waiting clients these indexes had three levels where the same keys with the app last
-- have two, and every lookup compared the app id first. (`list` reads an app's names
-- from the table.)
--
-- Nodes of versions 8 and 9 keep working beside nodes of version 10: their writes fire
-- the triggers, the functions they call are these, and they read no owner index.

-- No write may slip between the backfill below and the triggers, and changing an index
-- takes its table whole: the tables are locked until this transaction commits, in the
-- order a batch first writes them (a batch that deadlocks with this is rolled back and
-- decided again; so is the upgrade).
LOCK TABLE channel.nameplates, channel.mailboxes, channel.nameplate_sides,
    channel.mailbox_sides, channel.messages IN ACCESS EXCLUSIVE MODE;

CREATE TABLE channel.short_taken (
    app_id text NOT NULL,
    length integer NOT NULL,                 -- 1, 2 or 3: the numbers 1-9, 10-99, 100-999
    shard integer NOT NULL,                  -- the writing backend's pid; 0: folded
    taken bigint NOT NULL,
    PRIMARY KEY (app_id, length, shard)
) WITH (fillfactor = 50);                    -- room for the updates to stay on their page

INSERT INTO channel.short_taken (app_id, length, shard, taken)
SELECT app_id, length(name), 0, count(*) FROM channel.nameplates
WHERE name ~ '^[1-9][0-9]{0,2}$' GROUP BY 1, 2;

DROP INDEX channel.nameplates_owner_idx;
DROP INDEX channel.mailboxes_owner_idx;
DROP INDEX channel.messages_owner_idx;

ALTER TABLE channel.nameplates DROP CONSTRAINT nameplates_pkey, ADD PRIMARY KEY (name, app_id);
ALTER TABLE channel.mailboxes DROP CONSTRAINT mailboxes_pkey, ADD PRIMARY KEY (id, app_id);
ALTER TABLE channel.nameplate_sides
    DROP CONSTRAINT nameplate_sides_pkey, ADD PRIMARY KEY (name, side, app_id);
ALTER TABLE channel.mailbox_sides
    DROP CONSTRAINT mailbox_sides_pkey, ADD PRIMARY KEY (mailbox_id, side, app_id);
DROP INDEX channel.nameplates_mailbox_idx;
CREATE INDEX nameplates_mailbox_idx ON channel.nameplates (mailbox_id, app_id);
DROP INDEX channel.messages_mailbox_idx;
CREATE INDEX messages_mailbox_idx ON channel.messages (mailbox_id, app_id);

-- A statement's short names (1-999, exactly as written: "07" is not one), added to this
-- backend's shards in one upsert, apps in order: an INSERT's rows count 1, a DELETE's -1,
-- an UPDATE's new rows 1 and old rows -1 (the batch's upserts change no name: nothing is
-- written where they cancel out).
CREATE FUNCTION channel.track_short_taken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO channel.short_taken AS s (app_id, length, shard, taken)
        SELECT d.app_id, length(d.name), pg_backend_pid(), sum(d.amount)
        FROM (SELECT app_id, name, 1 AS amount FROM changed
              UNION ALL SELECT app_id, name, -1 FROM gone) d
        WHERE d.name ~ '^[1-9][0-9]{0,2}$'
        GROUP BY 1, 2 HAVING sum(d.amount) <> 0 ORDER BY 1, 2
        ON CONFLICT (app_id, length, shard) DO UPDATE SET taken = s.taken + EXCLUDED.taken;
    ELSE
        INSERT INTO channel.short_taken AS s (app_id, length, shard, taken)
        SELECT c.app_id, length(c.name), pg_backend_pid(),
            CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
        FROM changed c WHERE c.name ~ '^[1-9][0-9]{0,2}$'
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (app_id, length, shard) DO UPDATE SET taken = s.taken + EXCLUDED.taken;
    END IF;
    RETURN NULL;
END
$$;
ALTER FUNCTION channel.track_short_taken() SET jit = off;

-- A TRUNCATE of nameplates leaves no number taken (it holds the table's lock against
-- every writer of it until commit).
CREATE FUNCTION channel.truncate_short_taken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM channel.short_taken;
    RETURN NULL;
END
$$;

CREATE TRIGGER short_taken_insert AFTER INSERT ON channel.nameplates
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_short_taken();
CREATE TRIGGER short_taken_update AFTER UPDATE ON channel.nameplates
    REFERENCING OLD TABLE AS gone NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_short_taken();
CREATE TRIGGER short_taken_delete AFTER DELETE ON channel.nameplates
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION channel.track_short_taken();
CREATE TRIGGER short_taken_truncate AFTER TRUNCATE ON channel.nameplates
    FOR EACH STATEMENT EXECUTE FUNCTION channel.truncate_short_taken();

-- As version 8's, with the taken counts read from `channel.short_taken` (a few rows)
-- instead of counted over the index of short names (up to 999 entries).
CREATE OR REPLACE FUNCTION channel.short_names(app text, long text[], wanted int) RETURNS jsonb
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
    FOR r IN SELECT s.length AS len, sum(s.taken) AS taken FROM channel.short_taken s
            WHERE s.app_id = app GROUP BY 1 LOOP
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

-- As version 8's, and the shards of `channel.short_taken` no transaction is writing folded
-- the same way (at most `most` of each table's); the larger of the two numbers folded.
CREATE OR REPLACE FUNCTION channel.fold_holdings(most integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    f_owner text[];
    f_shard integer[];
    s_app text[];
    s_length integer[];
    s_shard integer[];
BEGIN
    SELECT coalesce(array_agg(s.owner), '{}'), coalesce(array_agg(s.shard), '{}')
    INTO f_owner, f_shard
    FROM (SELECT h.owner, h.shard FROM channel.holdings h WHERE h.shard <> 0
          ORDER BY h.owner, h.shard LIMIT most FOR UPDATE SKIP LOCKED) s;
    IF cardinality(f_owner) > 0 THEN
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
    END IF;
    SELECT coalesce(array_agg(s.app_id), '{}'), coalesce(array_agg(s.length), '{}'),
        coalesce(array_agg(s.shard), '{}')
    INTO s_app, s_length, s_shard
    FROM (SELECT t.app_id, t.length, t.shard FROM channel.short_taken t WHERE t.shard <> 0
          ORDER BY t.app_id, t.length, t.shard LIMIT most FOR UPDATE SKIP LOCKED) s;
    IF cardinality(s_app) > 0 THEN
        WITH gone AS (
            DELETE FROM channel.short_taken t
            USING unnest(s_app, s_length, s_shard) AS f(app_id, length, shard)
            WHERE t.app_id = f.app_id AND t.length = f.length AND t.shard = f.shard
            RETURNING t.app_id, t.length, t.taken)
        INSERT INTO channel.short_taken AS t (app_id, length, shard, taken)
        SELECT g.app_id, g.length, 0, sum(g.taken)
        FROM gone g GROUP BY g.app_id, g.length ORDER BY g.app_id, g.length
        ON CONFLICT (app_id, length, shard) DO UPDATE SET taken = t.taken + EXCLUDED.taken;
        DELETE FROM channel.short_taken t
        WHERE t.app_id IN (SELECT DISTINCT unnest(s_app)) AND t.shard = 0 AND t.taken = 0;
    END IF;
    RETURN greatest(cardinality(f_owner), cardinality(s_app));
END
$$;

-- CREATE OR REPLACE leaves a function only the settings it names: version 8's and 9's,
-- given again.
ALTER FUNCTION channel.short_names(text, text[], int)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;
ALTER FUNCTION channel.fold_holdings(integer)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;

UPDATE channel.version SET version = 10;
