-- Issue 12: a job may start from another job's workspace or a git
-- repository, in an image of its own, and go on for more turns; the host
-- records what it did with the repository (JSON of store.Git, '' for none).
ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN workspace_from TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN repo TEXT NOT NULL DEFAULT ''; -- JSON of store.Repo, '' for none
ALTER TABLE jobs ADD COLUMN git TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN turn INTEGER NOT NULL DEFAULT 1;
