/**
 * The request log suites' operator migration: a view whose row 13 makes PostgreSQL raise, so a
 * user's select of it is a 500 whose cause only the server's log knows (docs/logs.md).
 */
export const LEDGER_MIGRATION = `
CREATE FUNCTION ledger_total(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  IF n = 13 THEN RAISE EXCEPTION 'ledger row 13 is broken'; END IF;
  RETURN n * 10;
END $$;
CREATE TABLE ledger (id int PRIMARY KEY);
INSERT INTO ledger VALUES (1), (13);
CREATE VIEW ledger_totals AS SELECT id, ledger_total(id) AS total FROM ledger;
GRANT SELECT ON ledger_totals TO basalt_user;
`;
