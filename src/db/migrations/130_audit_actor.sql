-- Who made an audited change, and a name for its target (docs/admin.md "Audit log").
-- actor: 'admin' (the panel or the admin API) or 'cli' (the command line, run beside a
-- serving instance or alone), with the operating-system user who ran the command.
-- target_label: what the target is called (a user's or administrator's e-mail, a key's
-- prefix…last4 and name), so the log can be searched by it; targets are often bare ids.
ALTER TABLE basalt.admin_audit ADD COLUMN actor text NOT NULL DEFAULT 'admin';
ALTER TABLE basalt.admin_audit ADD COLUMN os_user text;
ALTER TABLE basalt.admin_audit ADD COLUMN target_label text;
UPDATE basalt.admin_audit SET actor = 'cli' WHERE admin_id IS NULL AND user_agent = 'basalt cli';
UPDATE basalt.admin_audit SET target_label = diff ->> 'email' WHERE diff ->> 'email' IS NOT NULL;

-- A mail job's earlier outcomes: an administrator's retry starts a fresh set of attempts and
-- appends what came before (when, state, attempts, last error), so no error is lost.
ALTER TABLE basalt.mail_jobs ADD COLUMN history jsonb NOT NULL DEFAULT '[]'::jsonb;
