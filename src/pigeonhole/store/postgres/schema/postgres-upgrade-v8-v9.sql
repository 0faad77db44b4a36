-- Pigeonhole on PostgreSQL, schema version 8 -> 9: the batch functions join by index only.
-- Applied by the server in one transaction (under the schema advisory lock) on a version-8
-- database, and after the earlier files on a new one. Nothing but settings changes, so
-- nodes of version 8 keep working beside nodes of version 9.
--
-- Every statement of these functions joins a batch's few rows (a JSON array, an array
-- parameter) to a table by its key. Their plans are generic and kept for the life of a
-- connection (`plan_cache_mode = force_generic_plan`), made from the table's size when the
-- connection first ran them, and a table nobody has analyzed (autovacuum off, or not yet
-- come round) stays "small" to the planner however it grows. So a plan made beside an
-- empty table could hash-join the whole table: beside a crowd of 15,000 waiting clients,
-- each batch's touch of its mailboxes read all 15,000 (18,000 buffers, 21 ms), and each
-- allocation past 999 hashed every nameplate of the app to test its few drawn names
-- (8.6 ms). With hash and merge joins (and materialized inner scans) off, a join is a
-- nested loop that looks each batch row up by index, whatever the statistics say, and its
-- cost follows the batch, not the tables.
ALTER FUNCTION channel.apply_batch(jsonb)
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;
ALTER FUNCTION channel.lock_and_load(jsonb)
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;
ALTER FUNCTION channel.short_names(text, text[], int)
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;
ALTER FUNCTION channel.short_names(text, text[])
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;
ALTER FUNCTION channel.fold_holdings(integer)
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_material = off;

UPDATE channel.version SET version = 9;
