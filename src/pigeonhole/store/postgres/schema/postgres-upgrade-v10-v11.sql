-- Pigeonhole on PostgreSQL, schema version 10 -> 11: an allocation draws the free short
-- numbers it needs instead of listing every name of a length. Applied by the server in one
-- transaction (under the schema advisory lock) on a version-10 database, and after the
-- earlier files on a new one.
--
-- Until version 10, `channel.short_names` listed the shortest length with a free number
-- whole: its taken names while it was mostly free (the node drew numbers and skipped those),
-- its free numbers while it was mostly taken (which reads every taken name too). With many
-- exchanges in flight they hold hundreds of the three-digit numbers themselves, and every
-- allocation read all of them: the work of one exchange grew with the others open.
--
-- Now a length with a free number is sampled where that is cheaper: numbers of the length
-- drawn uniformly (PostgreSQL's `random()`), each looked up by the primary key, the first
-- `needed` distinct free ones kept in the order drawn (`needed`: the batch's `wanted`, or
-- the length's free count if fewer), answered in order as a listing's free numbers are
-- (the node keeps them sorted). That is sampling without replacement, so the list is a
-- uniform random subset of the free numbers, and the node's uniform choice from it is
-- uniform over all of them: the allocation policy (the shortest free number, each equally
-- likely) is the reference's still. A lookup reads about three pages (the index's root
-- and leaf, the row's page) and a listing about one per taken name, so the function
-- samples when the expected lookups (`needed` x size / free) cost at most what a listing
-- would, and lists as before otherwise (a few free numbers among many taken), or when the
-- draws found fewer than `needed` (the counts may lag the names this transaction sees).
-- The numbers are drawn in one go, (2 x `needed` + 12) x size / free of them, and looked
-- up in the order drawn until `needed` are found: the free ones among the draws number
-- about 2 x `needed` + 12 on average, so all the draws fall short less than once in
-- 10^5 answers (Poisson; the fall-back is a listing, so a shortfall costs time only).
--
-- The answer's shape is version 8's: a sample is a 'free' list, which nodes of versions 8
-- to 10 take as the free numbers they may choose from (a batch never wants more than it
-- asked for), so they keep working beside nodes of version 11.

-- As version 10's, with the sampling above before the listing.
CREATE OR REPLACE FUNCTION channel.short_names(app text, long text[], wanted int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    counts int[] := ARRAY[0, 0, 0];
    r record;
    shortest int := 0;
    low int;
    high int;
    size int;
    free int;
    needed int;
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
        size := high - low;
        free := size - counts[k];
        CONTINUE WHEN free <= 0;
        needed := least(free, greatest(wanted - free_listed, 1));
        names := NULL;
        IF 3 * needed * size <= counts[k] * free THEN
            kind := 'free';
            SELECT coalesce(jsonb_agg(s.n ORDER BY s.n), '[]'::jsonb) INTO names
            FROM (SELECT c.n, c.first
                  FROM (SELECT d.n, min(d.i) AS first
                        FROM unnest(ARRAY(SELECT low + floor(random() * size)::int
                                          FROM generate_series(1, (2 * needed + 12) * size / free)))
                            WITH ORDINALITY AS d(n, i)
                        GROUP BY d.n ORDER BY first OFFSET 0) c
                  WHERE NOT EXISTS (SELECT 1 FROM channel.nameplates p
                      WHERE p.name = c.n::text AND p.app_id = app)
                  LIMIT needed) s;
            IF jsonb_array_length(names) < needed THEN
                names := NULL;
            END IF;
        END IF;
        IF names IS NULL AND 2 * counts[k] <= size THEN
            kind := 'taken';
            SELECT coalesce(jsonb_agg(n.name), '[]'::jsonb) INTO names FROM channel.nameplates n
                WHERE n.app_id = app AND n.name ~ '^[1-9][0-9]{0,2}$' AND length(n.name) = k;
        ELSIF names IS NULL THEN
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
        free_listed := free_listed + free;
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

-- CREATE OR REPLACE leaves a function only the settings it names: version 10's, given
-- again.
ALTER FUNCTION channel.short_names(text, text[], int)
    SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;

UPDATE channel.version SET version = 11;
