-- A job may ask for a disk quota of its own (issue 10); until this column
-- store.Limits.DiskBytes was not kept, so a claimed job lost it.
ALTER TABLE jobs ADD COLUMN limit_disk_bytes INTEGER NOT NULL DEFAULT 0;
