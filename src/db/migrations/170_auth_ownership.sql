-- Account ownership (docs/auth.md, Account ownership): proving the mailbox transfers the account.

-- Whether the identity was linked while the account's address was unverified: such an identity
-- is unlinked when the mailbox is first proven. Identities of accounts still unverified today
-- were linked while unverified, so they are marked too (their owner's proof unlinks them).
ALTER TABLE basalt.auth_identities ADD COLUMN linked_unverified boolean NOT NULL DEFAULT false;
UPDATE basalt.auth_identities i SET linked_unverified = true
  FROM basalt.users u WHERE u.id = i.user_id AND u.email_verified_at IS NULL;

-- A linking flow is bound to the browser that started it by a second cookie (`basalt_link`,
-- scoped to the callback); SHA-256 of it here.
ALTER TABLE basalt.auth_oauth_flows ADD COLUMN link_binding_hash bytea;

-- A provider account waiting for the signed-in user's confirmation on the callback's page. Found by
-- the SHA-256 of its random token (the confirm form's; the token itself is never stored), usable
-- only with the `basalt_link` cookie whose SHA-256 is `binding_hash`; single use, 10 minutes.
CREATE TABLE basalt.auth_link_confirmations (
  token_hash     bytea PRIMARY KEY,
  binding_hash   bytea NOT NULL,
  user_id        uuid NOT NULL REFERENCES basalt.users (id) ON DELETE CASCADE,
  provider       text NOT NULL,
  subject        text NOT NULL,
  email          text,
  email_verified boolean NOT NULL,
  redirect_to    text NOT NULL,
  expires_at     timestamptz NOT NULL
);
CREATE INDEX auth_link_confirmations_user_idx ON basalt.auth_link_confirmations (user_id);
