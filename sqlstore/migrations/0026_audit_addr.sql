-- The audit log keeps the client address each operator's write came from (behind a trusted
-- proxy, the address it forwarded). Entries written before have none.
ALTER TABLE operator_actions ADD COLUMN addr TEXT NOT NULL DEFAULT '';
