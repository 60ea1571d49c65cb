-- The SQL of scripts/sqlite-benchmark.sh, read by both sides: Benchmarks/SQLiteThroughput (E3DBSQLite) and
-- Benchmarks/SQLiteBaseline/sqlite_baseline.py (SQLCipher 4 through sqlcipher3). A line `-- @name` starts a
-- section; other lines starting with `--` are dropped; $ROWS is replaced by the row count. Every workload is one
-- statement, so the host language's loop does not count.

-- @table
CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v TEXT NOT NULL)

-- @index
CREATE INDEX t_k ON t (k)

-- @insert
-- Rows 1..$ROWS in id order; k is scattered (a multiplicative hash), so the index on k is written in a scattered
-- order; v is 80..120 bytes of text (hex of a few products of x, then letters).
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $ROWS)
INSERT INTO t (id, k, v)
SELECT x, (x * 2654435761) % 4294967291,
       substr(printf('%d %x %x %x %x %x %x', x, x * 2654435761, x * 2246822519, x * 3266489917, x * 668265263,
                     x * 374761393, x * 1181783497)
              || ' abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz', 1, 80 + x % 41)
FROM c

-- @point_reads
-- $ROWS lookups by primary key in a scattered order ((x * 7919) mod $ROWS visits every id once when $ROWS is not a
-- multiple of 7919), aggregated so that only one row comes back.
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $ROWS)
SELECT count(*), sum(length(t.v)), sum(t.k % 1000) FROM c JOIN t ON t.id = (c.x * 7919) % $ROWS + 1

-- @scan
-- A full scan of the table with a filter on the text (about a quarter of the rows match).
SELECT count(*), sum(length(v)) FROM t WHERE v LIKE '%77%'

-- @first_read
-- What each open runs after the key: the first read of the database (page 1 and the schema).
SELECT count(*) FROM sqlite_schema
