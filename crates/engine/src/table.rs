//! Parser of Markdown sweep tables: the published format (one `## ... (ISL:OSL=3000:150)`
//! section per scenario, typos such as "Reqeuest" and "Lantency" included) and servelab's own
//! `summary.md`. Columns are recognised by name, in any order ([`PublishedColumn::recognise`]);
//! missing cells become NaN.

use servelab_records::{IslOsl, PointSummary, PublishedColumn};

use crate::engine::RequestShape;
use crate::error::{EngineError, Result};

/// One table of a Markdown document.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepTable {
    /// The heading above the table.
    pub name: String,
    /// `ISL:OSL` found in the heading, if any.
    pub scenario: Option<IslOsl>,
    /// Rows (NaN where a column is missing or a cell is not a number).
    pub rows: Vec<PointSummary>,
    /// Per row, the lengths of the requests its benchmark sent, in send order, when they were
    /// drawn per request (a range ratio, ShareGPT) and are known (a stored run's records):
    /// empty, or one list per row. A row without a list ran every request at `scenario`'s
    /// lengths, which a mean cannot stand in for where lengths vary: requests of one length
    /// move in lock step and queue their prompts behind each other.
    pub drawn: Vec<Vec<RequestShape>>,
}

impl SweepTable {
    /// A table whose every request had the scenario's lengths.
    pub fn new(name: String, scenario: Option<IslOsl>, rows: Vec<PointSummary>) -> SweepTable {
        SweepTable { name, scenario, rows, drawn: Vec::new() }
    }

    /// The lengths row `i`'s requests were sent with, when known.
    pub fn drawn_at(&self, i: usize) -> Option<&[RequestShape]> {
        self.drawn.get(i).map(Vec::as_slice).filter(|d| !d.is_empty())
    }
}

fn cells(line: &str) -> Vec<&str> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(str::trim).collect()
}

fn is_separator(line: &str) -> bool {
    let c = cells(line);
    !c.is_empty() && c.iter().all(|s| !s.is_empty() && s.chars().all(|ch| matches!(ch, '-' | ':')))
}

fn parse_row(cols: &[Option<PublishedColumn>], line: &str) -> Option<PointSummary> {
    let mut p = PointSummary::missing(0);
    let mut have_conc = false;
    for (c, v) in cols.iter().zip(cells(line)) {
        let Some(c) = *c else { continue };
        let taken = p.set(c, v.replace(',', "").parse().unwrap_or(f64::NAN));
        have_conc |= taken && c == PublishedColumn::Concurrency;
    }
    have_conc.then_some(p)
}

/// Every table with a `Concurrency` column in a Markdown document. Rows whose concurrency is not
/// a positive integer are skipped; an error only if no such table exists.
pub fn parse_sweep_tables(markdown: &str) -> Result<Vec<SweepTable>> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if let Some(h) = line.strip_prefix('#') {
            heading = h.trim_start_matches('#').trim().to_string();
            i += 1;
            continue;
        }
        let starts_table =
            line.starts_with('|') && lines.get(i + 1).is_some_and(|l| is_separator(l));
        if !starts_table {
            i += 1;
            continue;
        }
        let cols: Vec<_> = cells(line).into_iter().map(PublishedColumn::recognise).collect();
        i += 2;
        let mut rows = Vec::new();
        while i < lines.len() && lines[i].trim().starts_with('|') {
            if let Some(r) = parse_row(&cols, lines[i]) {
                rows.push(r);
            }
            i += 1;
        }
        // A table of concurrency and nothing a fit reads (servelab's throughput-per-GPU
        // table under each sweep table) is not a sweep table.
        let figures = cols.iter().flatten().any(|c| *c != PublishedColumn::Concurrency);
        if cols.contains(&Some(PublishedColumn::Concurrency)) && figures {
            let scenario = IslOsl::find_in(&heading);
            out.push(SweepTable::new(heading.clone(), scenario, rows));
        }
    }
    if out.is_empty() {
        return Err(EngineError::Parse {
            what: "sweep table".into(),
            message: "no Markdown table with a `Concurrency` column found".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLISHED: &str = "# title
## Benchmark Result (ISL:OSL=3000:150)

| Concurrency | Reqeuest Throughput (req/s) | Output Token Throughput (tok/s) | Mean E2E Lantency (ms)  | P99 E2E Lantency (ms) | Mean TTFT (ms) | P99 TTFT (ms) | Mean TPOT (ms) | P99 TPOT (ms) |
|:-----------:|:--------------------------:|:-------------------------------:|:-----------------------:|:---------------------:|:--------------:|:-------------:|:-------------:|:------------:|
| 1 | 0.29 | 43.23 | 3467.12 | 3477.42 | 475.28 | 482.74 | 20.08 | 20.1 |
| 2 | 0.48 | 71.56 | 3959.83 | 4444.55 | 621.72 | 924.77 | 22.4 | 24.98 |
";

    const SERVELAB: &str = "# servelab sweep

## 1000:1000

Dataset: `random`

| Concurrency | Request Throughput (req/s) | Output Token Throughput (tok/s) | Mean E2E Latency (ms) | P99 E2E Latency (ms) | Mean TTFT (ms) | P99 TTFT (ms) | Mean TPOT (ms) | P99 TPOT (ms) |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| 8 | 0.51 | 512.29 | 14143.81 | 23884.48 | 198.71 | - | 13.96 | 23.71 |
| x | 1 | 1 | 1 | 1 | 1 | 1 | 1 | 1 |
";

    #[test]
    fn parses_the_published_format_with_its_typos() {
        let t = parse_sweep_tables(PUBLISHED).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].scenario, Some(IslOsl { isl: 3000, osl: 150 }));
        let r = t[0].rows[1];
        assert_eq!(r.concurrency, 2);
        assert_eq!(r.request_throughput, 0.48);
        assert_eq!(r.output_throughput, 71.56);
        assert_eq!((r.mean_e2e_ms, r.p99_e2e_ms), (3959.83, 4444.55));
        assert_eq!((r.mean_ttft_ms, r.p99_ttft_ms), (621.72, 924.77));
        assert_eq!((r.mean_tpot_ms, r.p99_tpot_ms), (22.4, 24.98));
    }

    #[test]
    fn parses_servelab_summaries_and_skips_bad_rows() {
        let t = parse_sweep_tables(SERVELAB).unwrap();
        assert_eq!(t[0].name, "1000:1000");
        assert_eq!(t[0].scenario, Some(IslOsl { isl: 1000, osl: 1000 }));
        assert_eq!(t[0].rows.len(), 1);
        assert!(t[0].rows[0].p99_ttft_ms.is_nan());
        assert_eq!(t[0].rows[0].mean_tpot_ms, 13.96);
    }

    #[test]
    fn the_shared_reference_parses() {
        let text = include_str!("../testdata/calibration-qwen3-32b-h20-vllm-v1.md");
        let t = parse_sweep_tables(text).unwrap();
        let names: Vec<String> = t.iter().map(|t| t.scenario.unwrap().to_string()).collect();
        assert_eq!(names, ["3000:150", "1000:1000", "500:1000", "2500:100"]);
        assert!(t.iter().all(|t| t.rows.len() == 8));
    }

    /// servelab's own `summary.md`: the scenario named `ISLxOSL`, the sweep table, then a
    /// throughput-per-GPU table with a concurrency column and nothing a fit reads.
    #[test]
    fn servelab_summaries_give_their_sweep_tables_only() {
        let md = "# x\n\n## 64x8\n\nDataset: `random(64:8, ratio 0.1 sglang)`\n\n\
            | Concurrency | Output Token Throughput (tok/s) | Mean TTFT (ms) |\n\
            | :-: | :-: | :-: |\n| 1 | 137.39 | 12.59 |\n| 2 | 169.0 | 20.86 |\n\n\
            | Concurrency | GPUs | Output tok/s per GPU | Pareto front |\n\
            | --: | --: | --: | :-: |\n| 1 | - | - | yes |\n| 2 | - | - | yes |\n";
        let t = parse_sweep_tables(md).unwrap();
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!(t[0].scenario, Some(IslOsl { isl: 64, osl: 8 }));
        assert_eq!(t[0].rows.len(), 2);
        assert_eq!(t[0].rows[1].output_throughput, 169.0);
    }

    #[test]
    fn no_table_is_an_error() {
        assert!(parse_sweep_tables("# nothing\n| a | b |\n").is_err());
    }
}
