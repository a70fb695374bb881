-- Jobs and their event logs, as in the SQLite store (internal/store/sqlite)
-- so both behave alike: times are unix nanoseconds (UTC), 0 when unset, so
-- ordering and cursors are exact integer comparisons; JSON is kept as text,
-- '' for none.
CREATE TABLE jobs (
    id                   TEXT             NOT NULL PRIMARY KEY,
    created_at           BIGINT           NOT NULL,
    idempotency_key      TEXT             NOT NULL DEFAULT '',
    request_hash         TEXT             NOT NULL DEFAULT '',
    task                 TEXT             NOT NULL,
    model                TEXT             NOT NULL DEFAULT '',
    limit_timeout_ns     BIGINT           NOT NULL DEFAULT 0,
    limit_max_steps      BIGINT           NOT NULL DEFAULT 0,
    limit_memory_bytes   BIGINT           NOT NULL DEFAULT 0,
    limit_nano_cpus      BIGINT           NOT NULL DEFAULT 0,
    metadata             TEXT             NOT NULL DEFAULT '', -- JSON object, '' for none
    status               TEXT             NOT NULL CHECK (status IN ('pending', 'running', 'complete', 'error', 'canceled')),
    attempts             BIGINT           NOT NULL DEFAULT 0,
    max_attempts         BIGINT           NOT NULL DEFAULT 0,
    steps                BIGINT           NOT NULL DEFAULT 0,
    input_tokens         BIGINT           NOT NULL DEFAULT 0,
    output_tokens        BIGINT           NOT NULL DEFAULT 0,
    cache_read_tokens    BIGINT           NOT NULL DEFAULT 0,
    cache_write_tokens   BIGINT           NOT NULL DEFAULT 0,
    cost_usd             DOUBLE PRECISION NOT NULL DEFAULT 0,
    error                TEXT             NOT NULL DEFAULT '',
    result               TEXT             NOT NULL DEFAULT '',
    context_tokens       BIGINT           NOT NULL DEFAULT 0,
    cancel_requested     BOOLEAN          NOT NULL DEFAULT false,
    lease_owner          TEXT             NOT NULL DEFAULT '',
    lease_until          BIGINT           NOT NULL DEFAULT 0,
    sandbox              TEXT             NOT NULL DEFAULT '', -- driver handle as JSON, '' for none
    updated_at           BIGINT           NOT NULL DEFAULT 0,
    started_at           BIGINT           NOT NULL DEFAULT 0,
    ended_at             BIGINT           NOT NULL DEFAULT 0,
    limit_context_window BIGINT           NOT NULL DEFAULT 0,
    deleted_at           BIGINT           NOT NULL DEFAULT 0,
    limit_disk_bytes     BIGINT           NOT NULL DEFAULT 0,
    image                TEXT             NOT NULL DEFAULT '',
    workspace_from       TEXT             NOT NULL DEFAULT '',
    repo                 TEXT             NOT NULL DEFAULT '', -- JSON of store.Repo, '' for none
    git                  TEXT             NOT NULL DEFAULT '', -- JSON of store.Git, '' for none
    turn                 BIGINT           NOT NULL DEFAULT 1,
    -- last_seq is the seq of the job's last event: AppendEvent increments
    -- it, so appenders of one job queue on its row and seqs have no gaps.
    last_seq             BIGINT           NOT NULL DEFAULT 0
);

-- Idempotency keys are unique when set.
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key <> '';

-- Listing by status, newest first.
CREATE INDEX jobs_status_created ON jobs (status, created_at, id);

-- Claiming: the oldest pending job first.
CREATE INDEX jobs_pending ON jobs (created_at, id) WHERE status = 'pending';

-- Listing all jobs newest first, paged by (created_at, id).
CREATE INDEX jobs_created ON jobs (created_at, id);

-- RequeueExpired: running jobs by lease end.
CREATE INDEX jobs_running_lease ON jobs (lease_until) WHERE status = 'running';

-- EndedBefore: ended jobs whose data is still there, oldest first.
CREATE INDEX jobs_ended_undeleted ON jobs (ended_at, id) WHERE deleted_at = 0 AND ended_at <> 0;

-- Each job's append-only log; (job_id, seq) is unique and gap-free from 1.
CREATE TABLE events (
    job_id  TEXT   NOT NULL REFERENCES jobs (id),
    seq     BIGINT NOT NULL,
    time    BIGINT NOT NULL,
    type    TEXT   NOT NULL,
    payload TEXT,
    PRIMARY KEY (job_id, seq)
);
