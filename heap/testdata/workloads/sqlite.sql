-- A SQLite workload for carve record: an in-memory database with tens of
-- thousands of rows, an index, updates, deletes and queries.
PRAGMA cache_size = -16000;
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, body TEXT, n INTEGER);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 60000)
INSERT INTO t(name, body, n)
  SELECT printf('name-%08d', (x * 7919) % 100003),
         substr(hex(randomblob(200)), 1, 20 + (x * 37) % 300),
         (x * 31) % 1000
  FROM c;
CREATE INDEX t_name ON t(name);
CREATE INDEX t_n ON t(n, name);
UPDATE t SET body = body || body WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(body)) FROM t;
SELECT n, count(*) FROM t GROUP BY n ORDER BY count(*) DESC LIMIT 3;
SELECT name FROM t ORDER BY body LIMIT 1;
