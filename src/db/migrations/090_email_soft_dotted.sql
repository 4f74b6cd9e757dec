-- Lower-casing İ (U+0130) gives i followed by a combining dot above (U+0307), which reads
-- exactly like i: `VİCTIM@…` was stored as a second account that looks like `victim@…`.
-- The application now drops a combining dot above after a soft-dotted letter (i, j and
-- the letters that lose their dot under an accent), so both spellings are one address
-- (docs/auth.md, E-mail addresses and passwords). This applies that rule to stored rows,
-- as 060 did for NFKC: a row whose folded spelling is free is rewritten (the oldest
-- first when several fold to one); a row whose folded spelling belongs to another
-- account is a look-alike of it and is disabled, kept for an administrator to resolve.

WITH candidate AS (
  SELECT id, created_at,
         regexp_replace(email, '([ij\u012f\u0249\u0268\u029d\u03f3\u0456\u0458\u1d96\u1e2d\u1ecb\U0001df1a])\u0307', '\1', 'g') AS folded
    FROM basalt.users
   WHERE email ~ '[ij\u012f\u0249\u0268\u029d\u03f3\u0456\u0458\u1d96\u1e2d\u1ecb\U0001df1a]\u0307'
), changed AS (
  SELECT DISTINCT ON (c.folded) c.id, c.folded
    FROM candidate c
   WHERE NOT EXISTS (SELECT 1 FROM basalt.users o WHERE o.email = c.folded)
   ORDER BY c.folded, c.created_at, c.id
)
UPDATE basalt.users u SET email = changed.folded, updated_at = now()
  FROM changed WHERE u.id = changed.id;

UPDATE basalt.users SET disabled_at = now(), updated_at = now()
 WHERE disabled_at IS NULL
   AND email ~ '[ij\u012f\u0249\u0268\u029d\u03f3\u0456\u0458\u1d96\u1e2d\u1ecb\U0001df1a]\u0307';

-- Administrators: rewritten where free. One whose folded spelling is another
-- administrator's stays as it is (there is no disabled state); `basalt admin list` shows
-- both and `basalt admin delete` removes the one not wanted.
WITH candidate AS (
  SELECT id, created_at,
         regexp_replace(email, '([ij\u012f\u0249\u0268\u029d\u03f3\u0456\u0458\u1d96\u1e2d\u1ecb\U0001df1a])\u0307', '\1', 'g') AS folded
    FROM basalt.admins
   WHERE email ~ '[ij\u012f\u0249\u0268\u029d\u03f3\u0456\u0458\u1d96\u1e2d\u1ecb\U0001df1a]\u0307'
), changed AS (
  SELECT DISTINCT ON (c.folded) c.id, c.folded
    FROM candidate c
   WHERE NOT EXISTS (SELECT 1 FROM basalt.admins o WHERE o.email = c.folded)
   ORDER BY c.folded, c.created_at, c.id
)
UPDATE basalt.admins a SET email = changed.folded, updated_at = now()
  FROM changed WHERE a.id = changed.id;
