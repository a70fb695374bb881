-- The blob store a cluster shares (internal/blobs/pgblobs), when
-- AGENTBOX_BLOBS is "postgres": checkpoints of the jobs' workspaces, one
-- namespace (ns) per job. A blob's bytes are cut into chunks of at most
-- 1 MiB (blob_chunks, seq from 0) so no one holds a large blob in memory;
-- its blob_objects row is written in the transaction of its chunks, after
-- they were verified, so a blob with a row is whole.
CREATE TABLE blob_objects (
    ns     TEXT    NOT NULL,
    digest TEXT    NOT NULL, -- lowercase hex SHA-256 of the bytes
    size   BIGINT  NOT NULL,
    chunks INTEGER NOT NULL,
    PRIMARY KEY (ns, digest)
);

CREATE TABLE blob_chunks (
    ns     TEXT    NOT NULL,
    digest TEXT    NOT NULL,
    seq    INTEGER NOT NULL,
    data   BYTEA   NOT NULL,
    PRIMARY KEY (ns, digest, seq)
);

-- Small named values of a namespace (which checkpoint is a job's latest).
CREATE TABLE blob_refs (
    ns    TEXT  NOT NULL,
    name  TEXT  NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (ns, name)
);
