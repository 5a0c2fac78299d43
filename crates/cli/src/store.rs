//! `servelab runs | compare | report`: open the store, call the library, print.

use std::path::Path;

use servelab_compare::{CompareOptions, Sources};
use servelab_outputs::term;
use servelab_store::model::parse_tag;
use servelab_store::{Filter, RunStatus, Store, ViewError};

use crate::args::{CompareArgs, DbArg, Format, MergeArgs, ReportArgs, RunsCommand};
use crate::{ExitStatus, Failure};

fn db_path(db: &DbArg) -> Result<std::path::PathBuf, Failure> {
    servelab_store::resolve_db_path(db.db.clone())
        .ok_or_else(|| Failure::usage("no HOME or XDG_DATA_HOME: pass --db PATH"))
}

/// The store, created when missing: for commands that write.
pub(crate) fn open(db: &DbArg) -> Result<Store, Failure> {
    Store::open(&db_path(db)?).map_err(Failure::runtime)
}

/// The existing store: for commands that only read (a missing file is an error, not a new
/// empty store).
pub(crate) fn open_existing(db: &DbArg) -> Result<Store, Failure> {
    Store::open_existing(&db_path(db)?).map_err(Failure::usage)
}

fn tags(raw: &[String]) -> Result<Vec<(String, String)>, Failure> {
    raw.iter()
        .map(|t| {
            parse_tag(t)
                .ok_or_else(|| Failure::usage(format!("--tag: expected KEY=VALUE (got '{t}')")))
        })
        .collect()
}

pub fn runs(cmd: RunsCommand) -> Result<ExitStatus, Failure> {
    match cmd {
        RunsCommand::List(a) => {
            let filter = Filter {
                tags: tags(&a.tags)?,
                model: a.model,
                label: a.label,
                since: a
                    .since
                    .as_deref()
                    .map(servelab_store::check_date)
                    .transpose()
                    .map_err(|e| Failure::usage(format!("--since: {e}")))?,
            };
            let path = db_path(&a.db)?;
            if !path.exists() {
                term::note(&format!("no runs stored yet (no results store at {})", path.display()));
                return Ok(ExitStatus::Success);
            }
            let rows = open_existing(&a.db)?.list(&filter).map_err(Failure::runtime)?;
            let t = servelab_store::list_table(&rows);
            term::stdout(&match a.format {
                Format::Json => {
                    format!("{}\n", serde_json::to_string_pretty(&rows).unwrap_or_default())
                }
                Format::Markdown => t.to_markdown(),
                Format::Table if rows.iter().any(|r| r.status == RunStatus::Running) => format!(
                    "{}\nincomplete: still running, or the bench stopped before finishing\n",
                    t.to_plain()
                ),
                Format::Table => t.to_plain(),
            });
        }
        RunsCommand::Show { run, db } => {
            let store = open_existing(&db)?;
            let id = store.one_run(&run).map_err(Failure::usage)?;
            term::stdout(&store.show(id).map_err(Failure::runtime)?);
        }
        RunsCommand::Export { run, output, detailed, format, db } => {
            let store = open_existing(&db)?;
            let id = store.one_run(&run).map_err(Failure::usage)?;
            let json = store.export(id, detailed, format.into()).map_err(Failure::usage)?;
            match output {
                Some(p) => {
                    std::fs::write(&p, json).map_err(|e| {
                        Failure::runtime(format!("cannot write {}: {e}", p.display()))
                    })?;
                    term::note(&format!("Exported run #{id} to {}", p.display()));
                }
                None => term::stdout(&json),
            }
        }
        RunsCommand::Import { files, label, tags: raw, db } => {
            let extra = tags(&raw)?;
            let mut store = open(&db)?;
            for f in &files {
                let lines = store.import_into(f, label.as_deref(), &extra);
                for line in lines.map_err(|e| match e {
                    servelab_store::ViewError::Store(e) => Failure::runtime(e),
                    e => Failure::usage(e),
                })? {
                    term::note(&line);
                }
            }
        }
        RunsCommand::Merge { runs, merge } => {
            merge_runs(&merge, Shards::Records(&runs))?;
        }
        RunsCommand::MergeDigests { digests, percentiles, merge } => {
            let ps = percentiles
                .map(|p| servelab_metrics::parse_percentiles(&p))
                .transpose()
                .map_err(|e| Failure::usage(format!("--percentiles: {e}")))?;
            merge_runs(&merge, Shards::Digests(&digests, ps.as_deref()))?;
        }
        RunsCommand::Delete { runs, db } => {
            let mut store = open_existing(&db)?;
            for spec in &runs {
                for id in store.resolve(spec).map_err(Failure::usage)? {
                    store.delete(id).map_err(Failure::runtime)?;
                    term::note(&format!("Deleted run #{id}"));
                }
            }
        }
    }
    Ok(ExitStatus::Success)
}

/// What a merge reads: the shards' records, or their digests (with the percentiles to
/// report, if not the shards' own).
pub enum Shards<'a> {
    /// Run ids, labels, result files or folders of them (`runs merge`).
    Records(&'a [String]),
    /// Digest files or folders of them (`runs merge-digests`).
    Digests(&'a [String], Option<&'a [f64]>),
}

/// `runs merge` and `runs merge-digests` as their flags give them.
fn merge_runs(m: &MergeArgs, shards: Shards) -> Result<(), Failure> {
    let opts = servelab_metrics::merge::MergeOptions {
        max_clock_spread_ms: m.max_clock_spread_ms,
        force: m.force,
    };
    merge_and_store(&m.db, &m.label, &tags(&m.tags)?, opts, shards)
}

/// One merge into the store (`runs merge`, `runs merge-digests`, `scale local`): print the
/// merged run's summary and say where it was stored.
pub fn merge_and_store(
    db: &DbArg,
    label: &str,
    tags: &[(String, String)],
    opts: servelab_metrics::merge::MergeOptions,
    shards: Shards,
) -> Result<(), Failure> {
    let mut store = open(db)?;
    let merged = match shards {
        Shards::Records(specs) => store.merge_into(specs, label, tags, opts),
        Shards::Digests(specs, ps) => store.merge_digests_into(specs, label, tags, opts, ps),
    };
    let (id, summary) = merged.map_err(|e| match e {
        ViewError::Store(e) => Failure::runtime(e),
        e => Failure::usage(e),
    })?;
    term::stdout(&servelab_outputs::render_text(&summary));
    term::note(&format!("Stored the merged run as #{id} ({label})"));
    Ok(())
}

pub async fn compare(a: CompareArgs) -> Result<ExitStatus, Failure> {
    let o = CompareOptions::from_flags(a.min_success_rate, a.resamples, a.seed)
        .map_err(Failure::usage)?;
    let mut sources = Sources::new(a.db.db.clone());
    if a.by_scenario {
        let mut runs = Vec::new();
        for spec in &a.runs {
            runs.extend(sources.runs(spec).map_err(Failure::usage)?);
        }
        let views = servelab_compare::deploy::scenario_views(&runs);
        term::stdout(&match a.format {
            Format::Table => {
                servelab_compare::deploy::render_views(&views, &o, false, a.per_deployment)
            }
            Format::Markdown => {
                servelab_compare::deploy::render_views(&views, &o, true, a.per_deployment)
            }
            Format::Json => {
                return Err(Failure::usage(
                    "--by-scenario: prints a table or markdown (--format json gives every value \
                     of the point-by-point comparison instead)",
                ))
            }
        });
        return Ok(ExitStatus::Success);
    }
    let operands = a.runs.iter().map(|spec| sources.subjects(spec)).collect::<Result<Vec<_>, _>>();
    let pairing =
        servelab_compare::pair(operands.map_err(Failure::usage)?).map_err(Failure::usage)?;
    let unmatched = pairing.unmatched;
    let points = tokio::task::spawn_blocking(move || {
        pairing
            .points
            .into_iter()
            .map(|p| (p.heading, servelab_compare::compare(&p.subjects, &o)))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| Failure::runtime(format!("comparison failed: {e}")))?;
    term::stdout(&match a.format {
        Format::Table => servelab_compare::render::render_points(&points, &unmatched, false),
        Format::Markdown => servelab_compare::render::render_points(&points, &unmatched, true),
        Format::Json => servelab_compare::render::render_points_json(&points, &unmatched),
    });
    Ok(ExitStatus::Success)
}

pub async fn report(a: ReportArgs) -> Result<ExitStatus, Failure> {
    let o = CompareOptions::from_flags(a.min_success_rate, a.resamples, a.seed)
        .map_err(Failure::usage)?;
    // Headline figures first (a few kB a run); the summaries and records only for a report
    // small enough to show them (report::DETAIL_RUNS).
    let mut sources = Sources::new(a.db.db.clone()).headline_only(true);
    let mut runs = Vec::new();
    for spec in &a.runs {
        runs.extend(sources.runs(spec).map_err(Failure::usage)?);
    }
    if runs.len() <= servelab_compare::report::DETAIL_RUNS {
        let mut sources = Sources::new(a.db.db.clone());
        runs.clear();
        for spec in &a.runs {
            runs.extend(sources.runs(spec).map_err(Failure::usage)?);
        }
    }
    let title = a.title.clone();
    let r = tokio::task::spawn_blocking(move || servelab_compare::report::build(&title, runs, &o))
        .await
        .map_err(|e| Failure::runtime(format!("report failed: {e}")))?;
    let mut r = r;
    r.per_deployment = a.per_deployment;
    let md_path = a.output.with_extension("md");
    // The overlaid deployment charts also go to files, next to the report, for the Markdown
    // twin to show and for slides.
    let charts = servelab_compare::report::deployment_charts(&r);
    let stem = a.output.file_stem().map_or("servelab-report".into(), |s| s.to_string_lossy());
    let chart_dir = format!("{stem}-charts");
    if !charts.is_empty() {
        let dir = a.output.with_file_name(&chart_dir);
        for c in &charts {
            let svg = servelab_outputs::chart::render_svg(c)
                .map_err(|e| Failure::runtime(format!("chart {}: {}", e.name, e.message)))?;
            write(&dir.join(format!("{}.svg", c.name)), &svg)?;
        }
        r.chart_dir = Some(chart_dir.clone());
    }
    write(&a.output, &servelab_compare::report::html(&r))?;
    write(&md_path, &servelab_compare::report::markdown(&r))?;
    let svgs = if charts.is_empty() {
        String::new()
    } else {
        format!(" and {} charts in {}", charts.len(), a.output.with_file_name(&chart_dir).display())
    };
    term::note(&format!("Wrote {} and {}{svgs}", a.output.display(), md_path.display()));
    for s in &r.verdicts {
        for v in s.models.iter().chain(&s.variants) {
            term::note(&format!("  {} {}", v.headline, v.text));
        }
    }
    for f in &r.findings {
        term::note(&format!("  {}", f.text));
    }
    Ok(ExitStatus::Success)
}

fn write(p: &Path, text: &str) -> Result<(), Failure> {
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(p, text)
        .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", p.display())))
}
