-- E-mail addresses are stored NFKC-normalized and lower-cased, without control or
-- invisible characters (docs/auth.md, E-mail addresses and passwords). Before this,
-- addresses were only trimmed and lower-cased, so fullwidth, decomposed or zero-width
-- lookalikes of one address could be separate accounts.
--
-- The invisible class below is the Default_Ignorable_Code_Point, Cf and Cc characters
-- (plus line/paragraph separators), the same set the application refuses.

-- 1. Each address whose normalized spelling (invisible characters dropped, NFKC,
--    lower-cased, NFKC again, as the application does) is not taken by another
--    account is rewritten to it. When several non-normalized addresses map to one
--    free spelling, the oldest account gets it.
WITH candidate AS (
  SELECT id, created_at,
         normalize(lower(normalize(regexp_replace(email, '[\u0001-\u001f\u007f-\u009f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]', '', 'g'), NFKC)), NFKC) AS normalized
  FROM basalt.users
), changed AS (
  SELECT DISTINCT ON (c.normalized) c.id, c.normalized
  FROM candidate c JOIN basalt.users u ON u.id = c.id
  WHERE c.normalized <> u.email
    AND c.normalized <> ''
    AND c.normalized = lower(btrim(c.normalized))
    AND NOT EXISTS (SELECT 1 FROM basalt.users o WHERE o.email = c.normalized)
  ORDER BY c.normalized, c.created_at, c.id
)
UPDATE basalt.users u SET email = changed.normalized, updated_at = now()
FROM changed WHERE u.id = changed.id;

-- 2. What is left unnormalized collides with an account that has the normalized
--    spelling (or normalizes to nothing). Those rows are kept as they are, for an
--    administrator to resolve (delete, or give another address), and disabled: a login
--    with any spelling of the address now reaches the other account, and their sessions
--    end. The rule below applies to every row written from now on.
UPDATE basalt.users SET disabled_at = now(), updated_at = now()
WHERE disabled_at IS NULL
  AND NOT (email IS NFKC NORMALIZED
           AND email !~ '[\u0001-\u001f\u007f-\u009f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]');

-- 3. The rule as far as SQL can say it: NFKC, no control or invisible characters
--    (trimmed and lower-case is 030's check). NOT VALID keeps the rows of step 2; any
--    new or changed row must satisfy it.
ALTER TABLE basalt.users ADD CONSTRAINT users_email_normalized CHECK (
  email IS NFKC NORMALIZED
  AND email !~ '[\u0001-\u001f\u007f-\u009f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]'
) NOT VALID;
