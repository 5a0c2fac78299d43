//! `servelab runs | compare | report`, and the bench's recording into the results store.
//!
//! The store itself is `servelab-store`; comparisons, rankings and reports are
//! `servelab-compare`. This module only parses flags, opens the store, and prints.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use servelab_compare::{CompareOptions, RunData, Subject};
use servelab_metrics::{MetricsConfig, Summary};
use servelab_outputs::{Align, Table};
use servelab_records::{RequestRecord, RunInfo};
use servelab_store::model::parse_tag;
use servelab_store::{Filter, NewRun, Recorder, RunConfig, RunKind, RunRow, RunStatus, Store};

use crate::cli::BenchArgs;
use crate::{ExitStatus, Failure};

// ---------------------------------------------------------------- recording a bench

/// How a bench is recorded: `--db`, `--label`, `--tag`, `--no-store`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    pub enabled: bool,
    /// The store file; `None` for the default under the user's data dir.
    pub db: Option<PathBuf>,
    pub label: Option<String>,
    pub tags: Vec<(String, String)>,
    /// `bench`, or `sweep-point` when a sweep runs the bench.
    pub kind: RunKind,
}

impl StoreSettings {
    /// From the bench flags; the error names the bad `--tag`.
    pub fn from_args(a: &BenchArgs) -> Result<StoreSettings, String> {
        let tags = parse_tags(&a.tags)?;
        Ok(StoreSettings {
            enabled: !a.no_store,
            db: a.db.clone(),
            label: a.label.clone(),
            tags,
            kind: RunKind::Bench,
        })
    }
}

fn parse_tags(raw: &[String]) -> Result<Vec<(String, String)>, String> {
    raw.iter()
        .map(|t| parse_tag(t).ok_or_else(|| format!("expected KEY=VALUE (got '{t}')")))
        .collect()
}

/// Begin recording a run: `running` in the store before the first request. Never fails: a
/// store problem is a warning and the bench goes on unrecorded.
pub fn begin_recording(s: &StoreSettings, info: &RunInfo) -> Recorder {
    if !s.enabled {
        return Recorder::disabled();
    }
    let Some(path) = servelab_store::resolve_db_path(s.db.clone()) else {
        eprintln!(
            "warning: results store: no HOME or XDG_DATA_HOME to put it in; pass --db PATH \
             (or --no-store). This run is not recorded."
        );
        return Recorder::disabled();
    };
    let run = NewRun {
        label: s.label.clone(),
        kind: s.kind,
        config: RunConfig::new(info.clone(), &s.tags),
        tags: s.tags.clone(),
    };
    Recorder::begin(&path, &run)
}

/// Store the final records, summary and status, and say where the run is.
pub fn finish_recording(
    rec: Recorder,
    records: &[RequestRecord],
    summary: &Summary,
    interrupted: bool,
) {
    let status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
    if let Some(id) = rec.finish(records, summary, status) {
        eprintln!("Recorded as run #{id} (servelab runs show {id})");
    }
}

// ---------------------------------------------------------------- shared flags

/// `--db PATH` for the commands that read the store.
#[derive(Debug, Clone, Args)]
pub struct DbArg {
    /// Results store (default: $XDG_DATA_HOME/servelab/servelab.db, else
    /// ~/.local/share/servelab/servelab.db).
    #[arg(long, env = "SERVELAB_DB", value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,
}

impl DbArg {
    fn open(&self) -> Result<Store, Failure> {
        let path = servelab_store::resolve_db_path(self.db.clone())
            .ok_or_else(|| Failure::usage("no HOME or XDG_DATA_HOME: pass --db PATH"))?;
        Store::open(&path).map_err(Failure::runtime)
    }
}

/// Output format of `runs list`, `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned plain-text table.
    Table,
    Markdown,
    Json,
}

#[allow(clippy::print_stdout)]
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

// ---------------------------------------------------------------- servelab runs

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List stored runs, newest first.
    List(ListArgs),
    /// Show one run: configuration, tags and its summary.
    Show {
        /// Run id (or label: its latest run).
        run: String,
        #[command(flatten)]
        db: DbArg,
    },
    /// Write a run's result JSON (the shape of `bench --save-result`).
    Export {
        run: String,
        /// Output file (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Add the per-request arrays (as `--save-detailed`).
        #[arg(long)]
        detailed: bool,
        #[command(flatten)]
        db: DbArg,
    },
    /// Import result files: vllm bench serve JSON, SGLang bench_serving JSONL, GuideLLM JSON.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Label for the imported runs (default: the label in the file, else its name).
        #[arg(long)]
        label: Option<String>,
        /// Tag the imported runs, KEY=VALUE (repeatable).
        #[arg(long = "tag", value_name = "KEY=VALUE")]
        tags: Vec<String>,
        #[command(flatten)]
        db: DbArg,
    },
    /// Delete runs and everything stored with them.
    Delete {
        #[arg(required = true)]
        runs: Vec<String>,
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only runs with this tag (repeatable: all must match).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs started on or after this date (YYYY-MM-DD).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    #[command(flatten)]
    pub db: DbArg,
}

pub async fn runs(cmd: RunsCommand) -> Result<ExitStatus, Failure> {
    match cmd {
        RunsCommand::List(a) => list(a),
        RunsCommand::Show { run, db } => show(&db.open()?, &run),
        RunsCommand::Export { run, output, detailed, db } => {
            export(&db.open()?, &run, output.as_deref(), detailed)
        }
        RunsCommand::Import { files, label, tags, db } => {
            let tags = parse_tags(&tags).map_err(|m| Failure::usage(format!("--tag: {m}")))?;
            import(&mut db.open()?, &files, label, &tags)
        }
        RunsCommand::Delete { runs, db } => delete(&mut db.open()?, &runs),
    }
}

/// `YYYY-MM-DD` (optionally followed by a time), checked so a typo does not silently match.
fn check_date(s: &str) -> Result<String, Failure> {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let ok = b.len() >= 10
        && (0..4).all(digit)
        && b[4] == b'-'
        && digit(5)
        && digit(6)
        && b[7] == b'-'
        && digit(8)
        && digit(9);
    if ok {
        Ok(s.to_string())
    } else {
        Err(Failure::usage(format!("--since: expected a date YYYY-MM-DD (got '{s}')")))
    }
}

fn list(a: ListArgs) -> Result<ExitStatus, Failure> {
    let filter = Filter {
        tags: parse_tags(&a.tags).map_err(|m| Failure::usage(format!("--tag: {m}")))?,
        model: a.model,
        label: a.label,
        since: a.since.as_deref().map(check_date).transpose()?,
    };
    let rows = a.db.open()?.list(&filter).map_err(Failure::runtime)?;
    let text = match a.format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&rows).unwrap_or_default()),
        Format::Markdown => list_table(&rows).to_markdown(),
        Format::Table => {
            let mut t = list_table(&rows).to_plain();
            if rows.iter().any(|r| r.status == RunStatus::Running) {
                t.push_str("\nincomplete: still running, or the bench stopped before finishing\n");
            }
            t
        }
    };
    print(&text);
    Ok(ExitStatus::Success)
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

fn list_table(rows: &[RunRow]) -> Table {
    let mut t = Table::new([
        "id",
        "label",
        "status",
        "started",
        "model",
        "source",
        "tags",
        "req/s",
        "out tok/s",
        "TTFT p99 ms",
        "ok %",
    ])
    .with_align(&[
        Align::Right,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
    ]);
    for r in rows {
        let status = match r.status {
            RunStatus::Running => "incomplete",
            s => s.as_str(),
        };
        let tags: Vec<String> = r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        t.push([
            r.id.to_string(),
            r.label.clone().unwrap_or_default(),
            status.to_string(),
            r.started_at.clone(),
            r.model.clone(),
            r.source.clone(),
            tags.join(","),
            opt(r.headline.request_throughput),
            opt(r.headline.output_throughput),
            opt(r.headline.ttft_p99_ms),
            r.headline.success_rate().map_or("-".into(), |s| format!("{:.1}", s * 100.0)),
        ]);
    }
    t
}

/// One id for `spec`: the id itself, or the latest run with that label.
fn one_run(store: &Store, spec: &str) -> Result<i64, Failure> {
    let ids = store.resolve(spec).map_err(Failure::usage)?;
    ids.last().copied().ok_or_else(|| Failure::usage(format!("no run '{spec}'")))
}

/// The run's summary: stored, or recomputed from its records for a run that never finished.
fn summary_of(store: &Store, id: i64) -> Result<Option<(Summary, Vec<RequestRecord>)>, Failure> {
    let run = store.run(id).map_err(Failure::runtime)?;
    let records = store.records(id).map_err(Failure::runtime)?;
    if let Some(s) = run.summary {
        return Ok(Some((s, records)));
    }
    if records.is_empty() {
        return Ok(None);
    }
    let mut s = servelab_metrics::summarize(&records, &run.config.info, &MetricsConfig::default());
    s.warnings.push(format!(
        "run #{id} never finished: this summary is recomputed from the {} records stored",
        records.len()
    ));
    Ok(Some((s, records)))
}

fn show(store: &Store, spec: &str) -> Result<ExitStatus, Failure> {
    let id = one_run(store, spec)?;
    let run = store.run(id).map_err(Failure::runtime)?;
    let r = &run.row;
    let mut out = format!(
        "run #{}  {}  {} ({})  started {}{}\n",
        r.id,
        r.label.as_deref().unwrap_or("(no label)"),
        match r.status {
            RunStatus::Running => "incomplete",
            s => s.as_str(),
        },
        r.source,
        r.started_at,
        r.finished_at.as_deref().map(|f| format!(", finished {f}")).unwrap_or_default()
    );
    let tags: Vec<String> = r.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !tags.is_empty() {
        out.push_str(&format!("tags: {}\n", tags.join(" ")));
    }
    if !r.missing.is_empty() {
        out.push_str(&format!("not in the imported file: {}\n", r.missing.join(", ")));
    }
    out.push_str("configuration:\n");
    out.push_str(&serde_json::to_string_pretty(&run.config).unwrap_or_default());
    out.push('\n');
    match summary_of(store, id)? {
        Some((s, _)) => out.push_str(&servelab_outputs::text::render(&s)),
        None => {
            let mut t = Table::new(["metric", "value"]);
            for (name, v) in
                servelab_metrics::HEADLINE.iter().map(|m| (m.label(), r.headline.get(m)))
            {
                t.push([name, opt(v)]);
            }
            out.push_str(&t.to_plain());
        }
    }
    print(&out);
    Ok(ExitStatus::Success)
}

fn export(
    store: &Store,
    spec: &str,
    output: Option<&Path>,
    detailed: bool,
) -> Result<ExitStatus, Failure> {
    let id = one_run(store, spec)?;
    let run = store.run(id).map_err(Failure::runtime)?;
    let json = match (&run.raw, summary_of(store, id)?) {
        (Some(raw), _) => format!("{raw}\n"),
        (None, Some((s, records))) => servelab_outputs::json::render(&s, &records, detailed),
        (None, None) => {
            return Err(Failure::usage(format!(
                "run #{id} has no summary and no records to export"
            )))
        }
    };
    match output {
        Some(p) => {
            std::fs::write(p, json)
                .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", p.display())))?;
            eprintln!("Exported run #{id} to {}", p.display());
        }
        None => print(&json),
    }
    Ok(ExitStatus::Success)
}

fn import(
    store: &mut Store,
    files: &[PathBuf],
    label: Option<String>,
    tags: &[(String, String)],
) -> Result<ExitStatus, Failure> {
    for f in files {
        let runs = servelab_store::import_file(f).map_err(Failure::usage)?;
        for mut r in runs {
            if label.is_some() {
                r.label = label.clone();
            }
            r.tags.extend(tags.iter().cloned());
            let id = store.import_run(&r).map_err(Failure::runtime)?;
            let missing = r.missing.iter().filter(|m| *m != "records").cloned().collect::<Vec<_>>();
            let note = if missing.is_empty() {
                String::new()
            } else {
                format!("; missing: {}", missing.join(", "))
            };
            eprintln!("Imported {} ({}) as run #{id}{note}", f.display(), r.source.as_str());
        }
    }
    Ok(ExitStatus::Success)
}

fn delete(store: &mut Store, specs: &[String]) -> Result<ExitStatus, Failure> {
    for spec in specs {
        for id in store.resolve(spec).map_err(Failure::usage)? {
            store.delete(id).map_err(Failure::runtime)?;
            eprintln!("Deleted run #{id}");
        }
    }
    Ok(ExitStatus::Success)
}

// ---------------------------------------------------------------- compare, report

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Runs to compare, the first is the baseline: run ids, labels (all runs with the label
    /// are repeats), or result files (servelab/vLLM JSON, SGLang JSONL, GuideLLM JSON).
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<String>,
    /// Runs below this success rate (percent) are rejected: shown, never the winner.
    #[arg(long, default_value_t = 99.0, value_name = "PERCENT")]
    pub min_success_rate: f64,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Bootstrap resamples for the noise intervals.
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    /// Seed of the bootstrap (the same seed gives the same intervals).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Runs to report on: run ids, labels (a label's runs at several loads form a series),
    /// or result files.
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// HTML file to write; the Markdown twin goes next to it with the extension `.md`.
    #[arg(short, long, default_value = "servelab-report.html")]
    pub output: PathBuf,
    #[arg(long, default_value = "servelab report")]
    pub title: String,
    /// Runs below this success rate (percent) are rejected: shown, never the winner.
    #[arg(long, default_value_t = 99.0, value_name = "PERCENT")]
    pub min_success_rate: f64,
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub db: DbArg,
}

fn options(min_success_rate: f64, resamples: usize, seed: u64) -> Result<CompareOptions, Failure> {
    if !(0.0..=100.0).contains(&min_success_rate) {
        return Err(Failure::usage(format!(
            "--min-success-rate: expected a percentage in [0, 100] (got {min_success_rate})"
        )));
    }
    Ok(CompareOptions { min_success_rate: min_success_rate / 100.0, resamples, seed, level: 0.95 })
}

/// Opens the store the first time a run id or label needs it.
struct LazyStore<'a> {
    db: &'a DbArg,
    store: Option<Store>,
}

impl LazyStore<'_> {
    fn get(&mut self) -> Result<&Store, Failure> {
        if self.store.is_none() {
            self.store = Some(self.db.open()?);
        }
        self.store.as_ref().ok_or_else(|| Failure::runtime("results store unavailable"))
    }
}

/// A stored run as comparison data; a run that never finished is summarized from its records.
pub fn load_run(store: &Store, id: i64) -> Result<RunData, Failure> {
    let run = store.run(id).map_err(Failure::runtime)?;
    let mut name = run.row.label.clone().unwrap_or_else(|| format!("#{id}"));
    // A sweep's points share its label; each scenario is its own series, so a report never
    // takes two scenarios at one load for repeats of each other.
    if let Some((_, scenario)) = run.row.tags.iter().find(|(k, _)| k == "sweep.scenario") {
        name = format!("{name} [{scenario}]");
    }
    let mut data = match summary_of(store, id)? {
        Some((s, records)) => RunData::from_summary(&name, s, records),
        None => RunData::from_headline(&name, &run.config.info, run.row.headline),
    };
    data.id = Some(id);
    data.status = match run.row.status {
        RunStatus::Running => "incomplete".into(),
        s => s.as_str().into(),
    };
    data.headline = if run.summary.is_some() || data.summary.is_none() {
        run.row.headline
    } else {
        data.headline
    };
    data.config = Some(run.config);
    data.tags = run.row.tags;
    Ok(data)
}

/// The runs an operand names: a result file, else a run id or label in the store.
fn operand(spec: &str, store: &mut LazyStore<'_>) -> Result<Vec<RunData>, Failure> {
    let path = Path::new(spec);
    if path.is_file() {
        let runs = servelab_store::import_file(path).map_err(Failure::usage)?;
        return Ok(runs
            .into_iter()
            .map(|r| {
                let name = r.label.clone().unwrap_or_else(|| spec.to_string());
                let mut d = RunData::from_headline(&name, &r.config.info, r.headline);
                d.config = Some(r.config);
                d.tags = r.tags;
                d
            })
            .collect());
    }
    let store = store.get()?;
    let ids = store
        .resolve(spec)
        .map_err(|e| Failure::usage(format!("{e}; '{spec}' is not a file either")))?;
    ids.into_iter().map(|id| load_run(store, id)).collect()
}

pub async fn compare(a: CompareArgs) -> Result<ExitStatus, Failure> {
    let o = options(a.min_success_rate, a.resamples, a.seed)?;
    let mut store = LazyStore { db: &a.db, store: None };
    let mut subjects = Vec::new();
    for spec in &a.runs {
        let runs = operand(spec, &mut store)?;
        let loads: Vec<String> = runs.iter().map(|r| r.load.to_string()).collect();
        if loads.iter().any(|l| *l != loads[0]) {
            return Err(Failure::usage(format!(
                "'{spec}' names runs at different loads ({}); compare takes one load per \
                 argument: pass run ids, or use `servelab report` for series",
                loads.join(", ")
            )));
        }
        subjects.push(Subject { name: spec.clone(), runs });
    }
    let c = tokio::task::spawn_blocking(move || servelab_compare::compare(&subjects, &o))
        .await
        .map_err(|e| Failure::runtime(format!("comparison failed: {e}")))?;
    let text = match a.format {
        Format::Table => servelab_compare::render::render_plain(&c),
        Format::Markdown => servelab_compare::render::render_markdown(&c),
        Format::Json => servelab_compare::render::render_json(&c),
    };
    print(&text);
    Ok(ExitStatus::Success)
}

pub async fn report(a: ReportArgs) -> Result<ExitStatus, Failure> {
    let o = options(a.min_success_rate, a.resamples, a.seed)?;
    let mut store = LazyStore { db: &a.db, store: None };
    let mut runs = Vec::new();
    for spec in &a.runs {
        runs.extend(operand(spec, &mut store)?);
    }
    let title = a.title.clone();
    let r = tokio::task::spawn_blocking(move || servelab_compare::report::build(&title, runs, &o))
        .await
        .map_err(|e| Failure::runtime(format!("report failed: {e}")))?;
    let md_path = a.output.with_extension("md");
    let write = |p: &Path, text: String| {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", dir.display())))?;
        }
        std::fs::write(p, text)
            .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", p.display())))
    };
    write(&a.output, servelab_compare::report::html(&r))?;
    write(&md_path, servelab_compare::report::markdown(&r))?;
    eprintln!("Wrote {} and {}", a.output.display(), md_path.display());
    for f in &r.findings {
        eprintln!("  {}", f.text);
    }
    Ok(ExitStatus::Success)
}
