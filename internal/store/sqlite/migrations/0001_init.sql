-- Jobs and their event logs. Times are unix nanoseconds (UTC), 0 when unset,
-- so ordering and cursors are exact integer comparisons.
CREATE TABLE jobs (
    id                 TEXT    NOT NULL PRIMARY KEY,
    created_at         INTEGER NOT NULL,
    idempotency_key    TEXT    NOT NULL DEFAULT '',
    request_hash       TEXT    NOT NULL DEFAULT '',
    task               TEXT    NOT NULL,
    model              TEXT    NOT NULL DEFAULT '',
    limit_timeout_ns   INTEGER NOT NULL DEFAULT 0,
    limit_max_steps    INTEGER NOT NULL DEFAULT 0,
    limit_memory_bytes INTEGER NOT NULL DEFAULT 0,
    limit_nano_cpus    INTEGER NOT NULL DEFAULT 0,
    metadata           TEXT    NOT NULL DEFAULT '', -- JSON object, '' for none
    status             TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'complete', 'error', 'canceled')),
    attempts           INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL DEFAULT 0,
    steps              INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL    NOT NULL DEFAULT 0,
    error              TEXT    NOT NULL DEFAULT '',
    result             TEXT    NOT NULL DEFAULT '',
    context_tokens     INTEGER NOT NULL DEFAULT 0,
    cancel_requested   INTEGER NOT NULL DEFAULT 0,
    lease_owner        TEXT    NOT NULL DEFAULT '',
    lease_until        INTEGER NOT NULL DEFAULT 0,
    sandbox            TEXT    NOT NULL DEFAULT '', -- driver handle as JSON, '' for none
    updated_at         INTEGER NOT NULL DEFAULT 0,
    started_at         INTEGER NOT NULL DEFAULT 0,
    ended_at           INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Idempotency keys are unique when set.
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key != '';

-- Claiming (oldest pending first) and listing by status (newest first).
CREATE INDEX jobs_status_created ON jobs (status, created_at, id);

-- Listing all jobs newest first, paged by (created_at, id).
CREATE INDEX jobs_created ON jobs (created_at, id);

-- Each job's append-only log; (job_id, seq) is unique and gap-free from 1.
CREATE TABLE events (
    job_id  TEXT    NOT NULL REFERENCES jobs (id),
    seq     INTEGER NOT NULL,
    time    INTEGER NOT NULL,
    type    TEXT    NOT NULL,
    payload TEXT,
    PRIMARY KEY (job_id, seq)
) STRICT;
