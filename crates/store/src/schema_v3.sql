-- servelab store, schema version 3: runs predicted by the engine model (`servelab predict`).
-- `kind` keeps what produced the run (bench, sweep-point); `predicted` says nothing was
-- measured. Older stores gain the column as 0: every run they hold was measured.
ALTER TABLE runs ADD COLUMN predicted INTEGER NOT NULL DEFAULT 0 CHECK (predicted IN (0, 1));
