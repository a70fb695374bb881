-- Issue 15: the isolation tier a job runs under (container, gvisor,
-- microvm), resolved when it is submitted; '' for jobs from before tiers,
-- which ran as containers.
ALTER TABLE jobs ADD COLUMN isolation TEXT NOT NULL DEFAULT '';
