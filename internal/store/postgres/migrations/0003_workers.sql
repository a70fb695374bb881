-- The workers that claim jobs, as they register and heartbeat (issue 14):
-- with several hosts, the API finds a running job's worker here.
CREATE TABLE workers (
	id           TEXT PRIMARY KEY,
	address      TEXT NOT NULL DEFAULT '',
	capacity     INTEGER NOT NULL DEFAULT 0,
	running      INTEGER NOT NULL DEFAULT 0,
	started_at   BIGINT NOT NULL,
	heartbeat_at BIGINT NOT NULL
);
