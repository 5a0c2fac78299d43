-- servelab store, schema version 2: imported runs (source tool, raw file, what is missing)
-- and the rest of the headline metrics, indexed for sorting and filtering.
ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'servelab';
ALTER TABLE runs ADD COLUMN raw_json TEXT;
ALTER TABLE runs ADD COLUMN missing_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE summaries ADD COLUMN total_token_throughput REAL;
ALTER TABLE summaries ADD COLUMN tpot_mean_ms REAL;
ALTER TABLE summaries ADD COLUMN tpot_p99_ms REAL;
ALTER TABLE summaries ADD COLUMN itl_mean_ms REAL;
ALTER TABLE summaries ADD COLUMN itl_p99_ms REAL;
ALTER TABLE summaries ADD COLUMN e2el_p99_ms REAL;
ALTER TABLE summaries ADD COLUMN duration_s REAL;
CREATE INDEX runs_model ON runs (model);
CREATE INDEX tags_kv ON tags (key, value);
CREATE INDEX summaries_output_throughput ON summaries (output_throughput);
CREATE INDEX summaries_ttft_p99 ON summaries (ttft_p99_ms);
