-- A job may override its model's context window (issue 5).
ALTER TABLE jobs ADD COLUMN limit_context_window INTEGER NOT NULL DEFAULT 0;
