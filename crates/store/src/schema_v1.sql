-- servelab store, schema version 1.
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    label       TEXT,
    kind        TEXT NOT NULL CHECK (kind IN ('bench', 'sweep-point')),
    status      TEXT NOT NULL CHECK (status IN ('running', 'complete', 'interrupted')),
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    model       TEXT NOT NULL DEFAULT '',
    config_json TEXT NOT NULL
);
CREATE INDEX runs_started ON runs (started_at);
CREATE INDEX runs_label ON runs (label);
CREATE TABLE tags (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE summaries (
    run_id             INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    summary_json       TEXT,
    request_throughput REAL,
    output_throughput  REAL,
    ttft_mean_ms       REAL,
    ttft_p99_ms        REAL,
    e2el_mean_ms       REAL,
    completed          INTEGER,
    failed             INTEGER
);
CREATE TABLE records (
    run_id      INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    warmup      INTEGER NOT NULL,
    record_json TEXT NOT NULL,
    PRIMARY KEY (run_id, warmup, idx)
);
