//! The store on disk: migrations, the bench life cycle, crashes, concurrent writers, imports.

use std::path::{Path, PathBuf};

use servelab_metrics::{summarize, MetricsConfig, Summary};
use servelab_records::{Chunk, ChunkKind, LoadSpec, Outcome, RequestRecord, RunInfo, Usage};
use servelab_store::model::RunSetup;
use servelab_store::{import_file, Filter, NewRun, RunKind, RunStatus, Store};

fn record(index: u64, ttft_ms: u64) -> RequestRecord {
    let ms = 1_000_000;
    let start = index * 10 * ms;
    RequestRecord {
        index,
        warmup: false,
        scheduled_ns: start,
        intended_ns: start,
        sent_ns: start,
        prompt_tokens: Some(8),
        max_tokens: Some(3),
        usage: Some(Usage { prompt_tokens: 8, completion_tokens: 3, reasoning_tokens: None }),
        chunks: (0..3)
            .map(|k| Chunk {
                t_ns: start + (ttft_ms + 10 * k) * ms,
                kind: ChunkKind::Content,
                text: "x".into(),
                tokens: Some(1),
            })
            .collect(),
        end_ns: Some(start + (ttft_ms + 21) * ms),
        status: Some(200),
        outcome: Outcome::Success,
        server: None,
        read_lag_ns: None,
        retries: 0,
        session: None,
        stream: Default::default(),
    }
}

fn info(model: &str) -> RunInfo {
    RunInfo {
        backend: "openai".into(),
        model: model.into(),
        dataset: "random".into(),
        num_prompts: 4,
        load: LoadSpec { max_concurrency: Some(2), ..LoadSpec::default() },
        started_at: "2026-11-21T10:00:00Z".into(),
        servelab_version: "0.1.0".into(),
        ..RunInfo::default()
    }
}

fn new_run(label: &str, model: &str, tags: &[(&str, &str)]) -> NewRun {
    let tags: Vec<(String, String)> =
        tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    NewRun {
        label: Some(label.into()),
        kind: RunKind::Bench,
        config: RunSetup::new(info(model), &tags),
        tags,
    }
}

fn summary(records: &[RequestRecord], model: &str) -> Summary {
    summarize(records, &info(model), &MetricsConfig::default())
}

fn db(dir: &Path) -> PathBuf {
    dir.join("nested/servelab.db")
}

#[test]
fn a_run_goes_from_running_to_complete_with_records_and_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&db(dir.path())).unwrap();
    assert_eq!(store.schema_version().unwrap(), 3);
    let id = store.begin_run(&new_run("base", "m", &[("gpu", "h100")])).unwrap();
    assert_eq!(store.run(id).unwrap().row.status, RunStatus::Running);
    let records: Vec<RequestRecord> = (0..4).map(|i| record(i, 50 + i)).collect();
    store.append_records(id, &records[..2]).unwrap();
    store.append_records(id, &records[2..]).unwrap();
    let s = summary(&records, "m");
    store.finish_run(id, &s, RunStatus::Complete).unwrap();

    let run = store.run(id).unwrap();
    assert_eq!(run.row.status, RunStatus::Complete);
    assert!(run.row.finished_at.is_some());
    assert_eq!(run.row.tags, vec![("gpu".to_string(), "h100".to_string())]);
    assert_eq!(run.row.headline.completed, Some(4));
    assert_eq!(run.row.headline.ttft_mean_ms, Some(51.5));
    assert_eq!(run.row.headline.success_rate(), Some(1.0));
    assert_eq!(run.summary.as_ref(), Some(&s));
    assert_eq!(run.config.info.model, "m");
    assert_eq!(store.records(id).unwrap(), records);
}

#[test]
fn predicted_runs_are_filed_as_predicted() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&db(dir.path())).unwrap();
    let measured = store.begin_run(&new_run("m", "m", &[])).unwrap();
    let mut p = new_run("p", "m", &[]);
    p.kind = RunKind::PredictedSweepPoint;
    let predicted = store.begin_run(&p).unwrap();
    p.kind = RunKind::Predicted;
    let bench = store.begin_run(&p).unwrap();
    assert_eq!(store.run(measured).unwrap().row.kind, RunKind::Bench);
    assert_eq!(store.run(predicted).unwrap().row.kind, RunKind::PredictedSweepPoint);
    assert_eq!(store.run(bench).unwrap().row.kind, RunKind::Predicted);
}

#[test]
fn a_crash_leaves_the_run_running_and_its_flushed_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(dir.path());
    {
        let mut rec = servelab_store::Recorder::begin(&path, &new_run("crash", "m", &[]));
        for i in 0..3 {
            rec.push(&record(i, 50));
        }
        rec.flush();
        rec.push(&record(3, 50));
        // Dropped without finish: the process died.
    }
    let store = Store::open(&path).unwrap();
    let rows = store.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, RunStatus::Running);
    assert_eq!(rows[0].headline.completed, None);
    assert_eq!(store.record_count(rows[0].id).unwrap(), 3);
}

#[test]
fn the_recorder_finishes_a_run_and_reports_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(dir.path());
    let mut rec = servelab_store::Recorder::begin(&path, &new_run("r", "m", &[]));
    let records: Vec<RequestRecord> = (0..5).map(|i| record(i, 40)).collect();
    for r in &records {
        rec.push(r);
    }
    let id = rec.finish(&records, &summary(&records, "m"), RunStatus::Interrupted).unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.run(id).unwrap().row.status, RunStatus::Interrupted);
    assert_eq!(store.record_count(id).unwrap(), 5);
}

#[test]
fn an_unusable_store_warns_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    // A path under a regular file cannot be created.
    let mut rec = servelab_store::Recorder::begin(&blocker.join("s.db"), &new_run("r", "m", &[]));
    assert_eq!(rec.run_id(), None);
    assert_eq!(rec.warnings().len(), 1);
    let w = rec.warnings()[0].to_string();
    assert!(w.contains("this run is not recorded"), "{:?}", rec.warnings());
    rec.push(&record(0, 1));
    assert_eq!(rec.finish(&[], &summary(&[record(0, 1)], "m"), RunStatus::Complete), None);
}

#[test]
fn list_filters_by_tag_model_label_and_date() {
    let mut store = Store::open_in_memory().unwrap();
    let a = store.begin_run(&new_run("a", "m1", &[("gpu", "h100")])).unwrap();
    let b = store.begin_run(&new_run("b", "m2", &[("gpu", "a100"), ("tp", "2")])).unwrap();
    let mut late = new_run("c", "m1", &[]);
    late.config.info.started_at = "2026-12-01T00:00:00Z".into();
    let c = store.begin_run(&late).unwrap();
    let ids = |s: &Store, f: Filter| s.list(&f).unwrap().iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(&store, Filter::default()), vec![c, b, a]);
    assert_eq!(
        ids(&store, Filter { tags: vec![("gpu".into(), "a100".into())], ..Filter::default() }),
        vec![b]
    );
    assert_eq!(ids(&store, Filter { model: Some("m1".into()), ..Filter::default() }), vec![c, a]);
    assert_eq!(ids(&store, Filter { label: Some("a".into()), ..Filter::default() }), vec![a]);
    assert_eq!(
        ids(&store, Filter { since: Some("2026-11-22".into()), ..Filter::default() }),
        vec![c]
    );
    assert_eq!(store.resolve(&format!("#{b}")).unwrap(), vec![b]);
    assert_eq!(store.resolve("c").unwrap(), vec![c]);
    assert!(store.resolve("nope").unwrap_err().to_string().contains("no run 'nope'"));
    assert!(store.delete(a).unwrap());
    assert!(!store.delete(a).unwrap());
    assert_eq!(ids(&store, Filter::default()), vec![c, b]);
}

#[test]
fn a_version_1_store_migrates_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../fixtures/v1.sql")).unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), 3);
    let rows = store.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    let old = &rows[0];
    assert_eq!((old.label.as_deref(), old.source.as_str()), (Some("old"), "servelab"));
    assert_eq!(old.headline.output_throughput, Some(320.0));
    assert_eq!(old.headline.ttft_p99_ms, Some(60.0));
    assert_eq!(old.headline.itl_p99_ms, None, "added by v2, unknown for old runs");
    assert_eq!(old.kind, RunKind::Bench, "v3: runs of older stores were measured");
    assert_eq!(old.tags, vec![("gpu".to_string(), "h100".to_string())]);
    assert_eq!(store.run(1).unwrap().config.host, "h");
    // And it takes new runs.
    let id = store.begin_run(&new_run("new", "m", &[])).unwrap();
    assert_eq!(id, 2);
}

#[test]
fn two_writers_at_once_both_land() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(dir.path());
    Store::open(&path).unwrap();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                let id = store.begin_run(&new_run(&format!("w{w}"), "m", &[])).unwrap();
                for batch in 0..50u64 {
                    let recs: Vec<RequestRecord> =
                        (0..10).map(|i| record(batch * 10 + i, 5)).collect();
                    store.append_records(id, &recs).unwrap();
                }
                let recs: Vec<RequestRecord> = (0..500).map(|i| record(i, 5)).collect();
                store.finish_run(id, &summary(&recs, "m"), RunStatus::Complete).unwrap();
                id
            })
        })
        .collect();
    let ids: Vec<i64> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    let store = Store::open(&path).unwrap();
    for id in ids {
        assert_eq!(store.record_count(id).unwrap(), 500);
        assert_eq!(store.run(id).unwrap().row.status, RunStatus::Complete);
    }
    let ok: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn vllm_result_imports_with_headline_metrics() {
    let runs = import_file(&fixture("vllm.json")).unwrap();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(r.source.as_str(), "vllm");
    assert_eq!(r.config.info.model, "Qwen/Qwen3-8B");
    assert_eq!(r.config.info.started_at, "2026-11-20T09:30:15Z");
    assert_eq!(r.config.info.load.max_concurrency, Some(16));
    assert_eq!(r.config.info.load.request_rate, None);
    assert_eq!(r.headline.ttft_p99_ms, Some(95.3));
    assert_eq!(r.headline.e2el_p99_ms, Some(6560.9));
    assert_eq!(r.headline.success_rate(), Some(0.99));
    assert_eq!(r.missing, vec!["records".to_string()]);
    assert_eq!(r.label.as_deref(), Some("vllm"));

    let mut store = Store::open_in_memory().unwrap();
    let id = store.import_run(r).unwrap();
    let run = store.run(id).unwrap();
    assert_eq!(run.row.source, "vllm");
    assert_eq!(run.row.status, RunStatus::Complete);
    assert_eq!(run.row.headline, r.headline);
    assert_eq!(run.row.missing, vec!["records".to_string()]);
    assert_eq!(run.summary, None);
    assert_eq!(run.raw.as_ref().unwrap()["p99_ttft_ms"], 95.3);
}

#[test]
fn sglang_jsonl_imports_one_run_per_line_and_marks_failures_unknown() {
    let runs = import_file(&fixture("sglang.jsonl")).unwrap();
    assert_eq!(runs.len(), 2);
    let r = &runs[0];
    assert_eq!(r.source.as_str(), "sglang");
    assert_eq!(r.config.info.load.request_rate, Some(2.0));
    assert_eq!(r.headline.e2el_mean_ms, Some(2098.07));
    assert_eq!(r.headline.itl_p99_ms, Some(18.2));
    assert_eq!(r.headline.total_token_throughput, Some(1295.95 + 825.94));
    assert_eq!(r.headline.failed, None);
    assert_eq!(r.missing, vec!["failed".to_string(), "records".to_string()]);
    assert_eq!(runs[1].config.info.load.request_rate, Some(4.0));
    assert!(!runs[1].missing.contains(&"tpot_mean_ms".to_string()));
    // The draw the file states, in SGLang's convention (its ratio 0: lengths 1 to L); a line
    // without it keeps SGLang's dataset name; its ratio 1 is exact lengths.
    assert_eq!(r.config.info.dataset, "random(1024:1024, ratio 0 sglang)");
    assert_eq!(runs[1].config.info.dataset, "random");
    let exact = import_file(&fixture("sglang-inf.jsonl")).unwrap();
    assert_eq!(exact[0].config.info.dataset, "random(512:128)");
}

#[test]
fn guidellm_report_imports_one_run_per_benchmark() {
    let runs = import_file(&fixture("guidellm.json")).unwrap();
    assert_eq!(runs.len(), 2);
    let a = &runs[0];
    assert_eq!(a.source.as_str(), "guidellm");
    assert_eq!(a.config.info.load.max_concurrency, Some(4));
    assert_eq!(a.config.info.model, "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(a.headline.ttft_p99_ms, Some(70.0));
    assert_eq!(a.headline.e2el_mean_ms, Some(990.0));
    assert_eq!(a.headline.completed, Some(240));
    assert_eq!(a.headline.failed, Some(3));
    assert_eq!(a.headline.duration_s, Some(60.0));
    // TPOT is GuideLLM's inter_token_latency_ms (7.6), not its time_per_output_token_ms
    // (7.5); the file has no per-token ITL.
    assert_eq!((a.headline.tpot_mean_ms, a.headline.tpot_p99_ms), (Some(7.6), Some(9.5)));
    assert_eq!(a.missing, ["itl_mean_ms", "itl_p99_ms", "records"]);
    let b = &runs[1];
    assert_eq!(b.config.info.load.request_rate, Some(8.0));
    assert_eq!(b.headline.ttft_p99_ms, Some(101.0));
    assert_eq!(b.headline.e2el_p99_ms, Some(1900.0));
    assert_eq!(b.headline.tpot_mean_ms, Some(9.1));
    assert!(b.missing.contains(&"total_token_throughput".to_string()));
}

/// The store's files as bytes, to tell whether opening it wrote anything.
fn snapshot(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// A closed store at `path` with one finished run of two records.
fn store_with_a_run(path: &Path) {
    let mut store = Store::open(path).unwrap();
    let id = store.begin_run(&new_run("ro", "m", &[])).unwrap();
    let recs = vec![record(0, 50), record(1, 60)];
    store.append_records(id, &recs).unwrap();
    store.finish_run(id, &summary(&recs, "m"), RunStatus::Complete).unwrap();
}

#[test]
fn a_current_store_is_opened_and_read_without_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(dir.path());
    store_with_a_run(&path);
    let before = snapshot(&path);
    let store = Store::open(&path).unwrap();
    assert!(!store.is_read_only());
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 1);
    drop(store);
    assert!(snapshot(&path) == before, "opening and listing changed the file");
}

#[test]
fn a_read_only_open_reads_everything_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(dir.path());
    store_with_a_run(&path);
    let before = snapshot(&path);
    let mut store = Store::open_read_only(&path).unwrap();
    assert!(store.is_read_only());
    let rows = store.list(&Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(store.records(rows[0].id).unwrap().len(), 2);
    assert!(store.run(rows[0].id).unwrap().summary.is_some());
    let e = store.begin_run(&new_run("x", "m", &[])).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "the results store {} is read-only here: it can be listed, shown and compared, \
             not written",
            path.display()
        )),
        "{e}"
    );
    assert!(store.delete(rows[0].id).is_err());
    drop(store);
    assert!(snapshot(&path) == before, "a read-only open changed the file");
}

#[test]
fn a_read_only_open_of_a_missing_store_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("missing.db");
    let e = Store::open_read_only(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "no results store at {} (pass --db PATH or set SERVELAB_DB to use another file)",
            path.display()
        )
    );
    assert!(!path.exists() && !path.parent().unwrap().exists());
}

#[test]
fn a_read_only_store_that_needs_a_migration_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(servelab_store::schema::MIGRATIONS[0]).unwrap();
    conn.pragma_update(None, "user_version", 1).unwrap();
    drop(conn);
    let before = snapshot(&path);
    let e = Store::open_read_only(&path).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("has schema version 1, older than this servelab's (3)"), "{msg}");
    assert!(msg.contains("cannot be upgraded"), "{msg}");
    assert!(snapshot(&path) == before);
}

/// With the file and its folder made read-only, `Store::open` (what every command calls)
/// falls back to reading. Root may write anyway; then there is nothing to observe and the
/// read-only path is covered by the tests above.
#[test]
fn a_store_without_write_permission_is_opened_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("ro");
    std::fs::create_dir(&sub).unwrap();
    let path = sub.join("runs.db");
    store_with_a_run(&path);
    let set = |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
    set(&path, 0o444).unwrap();
    set(&sub, 0o555).unwrap();
    let still_writable = std::fs::OpenOptions::new().write(true).open(&path).is_ok();
    let opened = Store::open(&path);
    set(&sub, 0o755).unwrap();
    set(&path, 0o644).unwrap();
    if still_writable {
        eprintln!("skipped: running as root, permissions do not stop writes");
        return;
    }
    let store = opened.unwrap();
    assert!(store.is_read_only());
    assert_eq!(store.list(&Filter::default()).unwrap().len(), 1);
}

/// Issue 25 item 3: a ramped vLLM run is a ramp, not `request_rate: inf`, and an import
/// never gets this machine's host name (its file does not say where it ran).
#[test]
fn a_ramped_vllm_run_imports_as_its_ramp_without_a_host() {
    let runs = import_file(&fixture("vllm-ramp.json")).unwrap();
    let info = &runs[0].config.info;
    assert_eq!(info.load.request_rate, None);
    let ramp = info.ramp.expect("the ramp");
    assert_eq!((ramp.start_rps, ramp.end_rps), (1.0, 10.0));
    assert_eq!(info.load_words(), "ramp linear 1→10 req/s");
    assert_eq!(runs[0].config.host, "");
    let plain = import_file(&fixture("vllm.json")).unwrap();
    assert_eq!((plain[0].config.info.ramp, plain[0].config.host.as_str()), (None, ""));
    let mut store = Store::open_in_memory().unwrap();
    let id = store.import_run(&runs[0]).unwrap();
    assert_eq!(store.run(id).unwrap().config.info.ramp, Some(ramp));
}

/// GPU energy and cost come back as they were stored, every figure and the per-GPU rows.
#[test]
fn a_run_with_gpu_telemetry_is_stored_with_its_energy_and_cost() {
    use servelab_records::{GpuReading, GpuScrape};
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&db(dir.path())).unwrap();
    let id = store.begin_run(&new_run("gpu", "m", &[])).unwrap();
    let records: Vec<RequestRecord> = (0..4).map(|i| record(i, 50 + i)).collect();
    let mut s = summary(&records, "m");
    s.info.gpus = Some(2);
    let reading = |gpu: &str, power_w: f64, energy_mj: f64| GpuReading {
        gpu: gpu.into(),
        uuid: Some(format!("GPU-{gpu}")),
        model: Some("NVIDIA H100 80GB HBM3".into()),
        host: Some("node".into()),
        power_w: Some(power_w),
        energy_mj: Some(energy_mj),
        ..GpuReading::default()
    };
    let scrapes: Vec<GpuScrape> = [(-100.0, 0.0), (10_000.0, 3_000_000.0)]
        .iter()
        .map(|&(t_ms, mj)| GpuScrape {
            t_ms,
            gpus: vec![reading("0", 300.0, mj), reading("1", 310.0, 2.0 * mj)],
            error: None,
        })
        .collect();
    servelab_metrics::gpu::attach(&mut s, &scrapes, Some("http://node:9400/metrics"), Some(3.0));
    let g = s.gpu.clone().unwrap();
    assert_eq!((g.gpus_seen, g.cost_gpus, g.per_gpu.len()), (2, Some(2), 2));
    assert!(g.joules_per_output_token.is_some() && g.usd_per_million_output_tokens.is_some());
    store.finish_run(id, &s, RunStatus::Complete).unwrap();
    let run = store.run(id).unwrap();
    assert_eq!(run.summary.as_ref().and_then(|s| s.gpu.as_ref()), Some(&g));
    assert_eq!(run.summary.as_ref(), Some(&s));
}
