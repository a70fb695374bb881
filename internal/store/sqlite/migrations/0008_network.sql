-- Issue 26: the egress policy in force for a job (egress.Policy JSON, ''
-- for none stated; PATCH /v1/jobs/{id}/network changes it), and its bound
-- on the bytes its sandbox moves through the egress proxy (0: the default).
ALTER TABLE jobs ADD COLUMN network TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN limit_egress_bytes INTEGER NOT NULL DEFAULT 0;
