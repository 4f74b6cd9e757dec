/**
 * Tables of the relations, aggregates and boolean groups suite (docs/database.md, "Relations",
 * "Aggregates", "Boolean groups"): the spec's examples as rows, and a users' own data pair of
 * tables under row-level security.
 */
export const ANN = '00000000-0000-4000-8000-00000000000a';
export const BO = '00000000-0000-4000-8000-00000000000b';

export const RELATIONS_MIGRATION = `
CREATE TABLE authors (id uuid PRIMARY KEY, name text NOT NULL, karma int8, joined timestamptz,
                      avatar bytea, tags text[], score numeric(6,2));
CREATE TABLE posts (id serial PRIMARY KEY, title text NOT NULL,
                    author_id uuid REFERENCES authors(id), editor_id uuid REFERENCES authors(id));
CREATE TABLE comments (id serial PRIMARY KEY, post_id int4 NOT NULL REFERENCES posts(id),
                       author_id uuid REFERENCES authors(id), body text NOT NULL,
                       hidden boolean NOT NULL DEFAULT false, created_at timestamptz NOT NULL);
INSERT INTO authors VALUES
  ('${ANN}', 'Ann', 9007199254740993, '2026-01-02 03:04:05.123456+00', '\\x01ff', '{a,NULL,"b c"}', 12.50),
  ('${BO}', 'Bo', 1, NULL, NULL, NULL, NULL);
INSERT INTO posts (title, author_id, editor_id) VALUES ('Hello', '${ANN}', '${BO}'), ('Quiet', '${BO}', NULL),
  ('Orphan', NULL, NULL);
-- Hello: 12 visible comments (the latest by Bo) and one hidden; Quiet: none.
INSERT INTO comments (post_id, author_id, body, created_at)
  SELECT 1, CASE WHEN n = 12 THEN '${BO}'::uuid ELSE '${ANN}'::uuid END, 'c' || n,
         timestamptz '2026-03-01 00:00:00+00' + n * interval '1 hour'
    FROM generate_series(1, 12) n;
INSERT INTO comments (post_id, author_id, body, hidden, created_at)
  VALUES (1, '${BO}', 'spam', true, '2026-04-01 00:00:00+00');

CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, country text);
CREATE TABLE orders (id serial PRIMARY KEY, customer_id int4 REFERENCES customers(id), status text NOT NULL,
                     total numeric(10,2) NOT NULL, created_at timestamptz NOT NULL, paid boolean, weight float8);
INSERT INTO customers (name, country)
  SELECT 'fr' || n, 'FR' FROM generate_series(1, 7) n
  UNION ALL SELECT 'de' || n, 'DE' FROM generate_series(1, 2) n
  UNION ALL SELECT 'us', 'US';
-- paid FR: 12 orders of 7 customers, 1530.00; paid DE 800; pending FR 150; pending US 120; refunded DE 20;
-- and one paid FR order of 2025, outside the filter.
INSERT INTO orders (customer_id, status, total, created_at, paid, weight)
  SELECT ((n - 1) % 7) + 1, 'paid', 127.50, timestamptz '2026-02-01T00:00:00Z', true, 1.5 FROM generate_series(1, 12) n
  UNION ALL SELECT 8 + (n % 2), 'paid', 400, '2026-02-02T00:00:00Z', true, 2 FROM generate_series(1, 2) n
  UNION ALL SELECT 1, 'pending', 50, '2026-02-03T00:00:00Z', false, NULL FROM generate_series(1, 3) n
  UNION ALL SELECT 10, 'pending', 120, '2026-02-04T00:00:00Z', false, NULL
  UNION ALL SELECT 8, 'refunded', 20, '2026-02-05T00:00:00Z', false, NULL
  UNION ALL SELECT 1, 'paid', 999, '2025-06-01T00:00:00Z', true, NULL;

-- A two-column key: the relation is named by its first column.
CREATE TABLE regions (country text, code text, name text NOT NULL, PRIMARY KEY (country, code));
CREATE TABLE shops (id serial PRIMARY KEY, country text, code text, label text NOT NULL,
                    FOREIGN KEY (country, code) REFERENCES regions (country, code));
INSERT INTO regions VALUES ('FR', '75', 'Paris'), ('FR', '69', 'Lyon'), ('DE', '75', 'Elsewhere');
INSERT INTO shops (country, code, label) VALUES ('FR', '75', 'a'), ('FR', '69', 'b'), ('FR', '75', 'c');

CREATE TABLE tasks (id serial PRIMARY KEY, title text NOT NULL, done boolean NOT NULL, priority int4, due date);
INSERT INTO tasks (title, done, priority, due) VALUES
  ('urgent', false, 5, '2027-01-01'), ('soon', false, 1, '2026-11-01'), ('later', false, 1, '2027-01-01'),
  ('finished', true, 5, '2026-01-01'), ('undated', false, NULL, NULL);

-- Users' own data: lists and their entries, each user's own under row-level security.
CREATE TABLE lists (id serial PRIMARY KEY, owner_id uuid NOT NULL DEFAULT basalt.uid(), name text NOT NULL,
                    secret text);
CREATE TABLE entries (id serial PRIMARY KEY, list_id int4 NOT NULL REFERENCES lists(id),
                      owner_id uuid NOT NULL DEFAULT basalt.uid(), label text NOT NULL, amount int4 NOT NULL);
CREATE TABLE stamps (id serial PRIMARY KEY, entry_id int4 REFERENCES entries(id), note text);
ALTER TABLE lists ENABLE ROW LEVEL SECURITY;
ALTER TABLE entries ENABLE ROW LEVEL SECURITY;
GRANT SELECT (id, owner_id, name), INSERT (name) ON lists TO basalt_user;
GRANT SELECT, INSERT (list_id, label, amount) ON entries TO basalt_user;
GRANT USAGE ON SEQUENCE lists_id_seq, entries_id_seq TO basalt_user;
CREATE POLICY own ON lists FOR ALL TO basalt_user USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
CREATE POLICY own ON entries FOR ALL TO basalt_user USING (owner_id = basalt.uid()) WITH CHECK (owner_id = basalt.uid());
`;
