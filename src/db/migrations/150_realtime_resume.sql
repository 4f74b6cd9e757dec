-- Realtime tickets (docs/realtime.md, "In a browser"):
-- claims: a user's basalt.jwt() claims when the ticket was issued, so the stream's
--   visibility checks see what a Database API request with that token would.
-- resume_of: set on a resume credential (the cookie a ticket's stream sets): the hash of
--   the ticket it was issued for. EventSource reconnects with the same URL, the spent
--   ticket in it, and the cookie; the pair opens the stream again until expires_at.
ALTER TABLE basalt.realtime_tickets ADD COLUMN claims jsonb;
ALTER TABLE basalt.realtime_tickets ADD COLUMN resume_of bytea;
