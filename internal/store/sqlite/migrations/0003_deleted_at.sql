-- A job's data (its workspace) may be removed, by DELETE /v1/jobs/{id} or
-- by the retention janitor, while its record and log stay (issue 10).
ALTER TABLE jobs ADD COLUMN deleted_at INTEGER NOT NULL DEFAULT 0;

-- The janitor's query: ended jobs whose data is still there, oldest first.
CREATE INDEX jobs_ended_undeleted ON jobs (ended_at, id) WHERE deleted_at = 0 AND ended_at != 0;
