//! One table writer for every Markdown-like output, and the Markdown run summary.

use servelab_metrics::{Distribution, Summary};

use crate::fmt::{f2, pct_word};
use crate::text::notes;

/// `s` as Markdown text that renders as itself: `&`, `<` and `>` become entities, so a label
/// such as `<script>` (labels and tags are user text, model names server text) is shown, not
/// interpreted as HTML by the viewer.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Flush left (text).
    Left,
    /// Flush right (numbers).
    Right,
    /// Centred.
    Center,
}

/// A table of strings: headers, per-column alignment, rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column headers; they fix the number of columns.
    pub headers: Vec<String>,
    /// Alignment of each column.
    pub align: Vec<Align>,
    /// Cells, one `Vec` per row, as many as there are headers.
    pub rows: Vec<Vec<String>>,
}

fn pad(s: &str, width: usize, align: Align) -> String {
    let fill = width.saturating_sub(s.chars().count());
    match align {
        Align::Left => format!("{s}{}", " ".repeat(fill)),
        Align::Right => format!("{}{s}", " ".repeat(fill)),
        Align::Center => {
            let left = fill / 2;
            format!("{}{s}{}", " ".repeat(left), " ".repeat(fill - left))
        }
    }
}

impl Table {
    /// A table with these headers, first column left-aligned and the others right-aligned
    /// (labels, then numbers).
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        let align =
            (0..headers.len()).map(|i| if i == 0 { Align::Left } else { Align::Right }).collect();
        Table { headers, align, rows: Vec::new() }
    }

    /// Sets the alignment of every column (missing entries stay as they were).
    pub fn with_align(mut self, align: &[Align]) -> Table {
        for (slot, a) in self.align.iter_mut().zip(align) {
            *slot = *a;
        }
        self
    }

    /// Adds a row; short rows are padded with empty cells, long ones cut to the headers.
    pub fn push<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    fn widths(&self, cell: impl Fn(&str) -> String) -> Vec<usize> {
        (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers[c])
                    .chain(self.rows.iter().map(|r| &r[c]))
                    .map(|s| cell(s).chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// GitHub-flavoured Markdown, columns padded so the source reads as a table too.
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| escape(s).replace('|', "\\|").replace('\n', " ");
        let widths: Vec<usize> = self.widths(esc).into_iter().map(|w| w.max(3)).collect();
        let row = |cells: &[String]| {
            let cells: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(c, s)| pad(&esc(s), widths[c], self.align[c]))
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = row(&self.headers);
        let rules: Vec<String> = widths
            .iter()
            .zip(&self.align)
            .map(|(&w, a)| match a {
                Align::Left => format!(":{}", "-".repeat(w - 1)),
                Align::Right => format!("{}:", "-".repeat(w - 1)),
                Align::Center => format!(":{}:", "-".repeat(w - 2)),
            })
            .collect();
        out.push_str(&format!("| {} |\n", rules.join(" | ")));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }

    /// Plain text: aligned columns two spaces apart, a dashed line under the headers, no
    /// trailing spaces.
    pub fn to_plain(&self) -> String {
        let flat = |s: &str| s.replace('\n', " ");
        let widths = self.widths(flat);
        let row = |cells: &[String]| {
            let cells: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(c, s)| pad(&flat(s), widths[c], self.align[c]))
                .collect();
            format!("{}\n", cells.join("  ").trim_end())
        };
        let mut out = row(&self.headers);
        let rules: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&format!("{}\n", rules.join("  ")));
        for r in &self.rows {
            out.push_str(&row(r));
        }
        out
    }
}

/// Latency table: one row per distribution, Mean/Median/each percentile/Max/samples.
pub fn latency_table(s: &Summary) -> Table {
    let mut headers = vec!["Metric (ms)".to_string(), "Mean".into(), "Median".into()];
    headers.extend(s.percentiles.iter().map(|p| format!("P{}", pct_word(*p))));
    headers.extend(["Max".to_string(), "Samples".into()]);
    let mut t = Table::new(headers);
    fn label(name: &str) -> &str {
        match name {
            "ttft" => "TTFT",
            "tpot" => "TPOT",
            "itl" => "ITL (per token)",
            "e2el" => "E2E latency",
            "itl_chunk" => "ITL (per chunk)",
            "ttfc" => "TTFC",
            "schedule_lag" => "Schedule lag",
            "client_queue" => "Client queue",
            "read_lag" => "Client read lag",
            other => other,
        }
    }
    for (name, d) in s.distributions() {
        t.push(dist_cells(label(name), d));
    }
    t
}

fn dist_cells(label: &str, d: &Distribution) -> Vec<String> {
    let mut cells = vec![label.to_string(), f2(d.mean), f2(d.median)];
    cells.extend(d.percentiles.iter().map(|(_, v)| f2(*v)));
    cells.extend([f2(d.max), d.count.to_string()]);
    cells
}

/// The load section of the Markdown summary: a table of the load, then the steady figures
/// beside the all-requests ones.
pub fn load_section(out: &mut String, s: &Summary) {
    let rows = crate::load::load_rows(s);
    if rows.is_empty() {
        return;
    }
    let mut t = Table::new(["Load", "Value"]).with_align(&[Align::Left, Align::Right]);
    for (k, v) in rows {
        t.push([k, v]);
    }
    out.push_str("\n### Load\n\n");
    out.push_str(&t.to_markdown());
    let steady = crate::load::steady_rows(s);
    if !steady.is_empty() {
        let mut t = Table::new(["Steady state", "Steady", "All requests"]).with_align(&[
            Align::Left,
            Align::Right,
            Align::Right,
        ]);
        for (k, a, b) in steady {
            t.push([k, a, b]);
        }
        out.push('\n');
        out.push_str(&t.to_markdown());
    }
}
/// The run as Markdown: setup and throughput, latencies, failures, warnings.
pub fn markdown_summary(s: &Summary) -> String {
    let i = &s.info;
    let mut out = String::from("## servelab result\n\n");
    let mut run = Table::new(["Setting", "Value"]).with_align(&[Align::Left, Align::Left]);
    run.push(["Model", i.model.as_str()]);
    run.push(["Backend", i.backend.as_str()]);
    run.push(["Endpoint", i.endpoint.as_str()]);
    run.push(["Dataset", i.dataset.as_str()]);
    run.push(["Request rate (req/s)".to_string(), i.load.request_rate.map_or("inf".into(), f2)]);
    run.push([
        "Max concurrency".to_string(),
        i.load.max_concurrency.map_or("none".into(), |c| c.to_string()),
    ]);
    run.push(["Started at", i.started_at.as_str()]);
    out.push_str(&run.to_markdown());
    out.push('\n');

    let mut t = Table::new(["Result", "Value"]);
    let rows: Vec<(&str, String)> = vec![
        ("Successful requests", s.completed.to_string()),
        ("Failed requests", s.failed.to_string()),
        ("Benchmark duration (s)", f2(s.duration_s)),
        ("Total input tokens", s.total_input_tokens.to_string()),
        ("Total generated tokens", s.total_output_tokens.to_string()),
        (
            "Generated tokens (retokenized)",
            s.retokenized_output_tokens.map_or("unknown".into(), |n| n.to_string()),
        ),
        ("Request throughput (req/s)", f2(s.request_throughput)),
        ("Request goodput (req/s)", s.request_goodput.map_or("no SLO".into(), f2)),
        ("Output token throughput (tok/s)", f2(s.output_throughput)),
        ("Peak output token throughput (tok/s)", f2(s.peak_output_throughput)),
        ("Total token throughput (tok/s)", f2(s.total_token_throughput)),
        ("Peak concurrent requests", s.peak_concurrency.to_string()),
        ("Mean concurrent requests", f2(s.mean_concurrency)),
    ];
    for (k, v) in rows {
        t.push([k.to_string(), v]);
    }
    out.push_str(&t.to_markdown());
    out.push('\n');
    out.push_str(&latency_table(s).to_markdown());
    load_section(&mut out, s);

    if !s.failures.is_empty() {
        out.push_str("\n### Failures\n\n");
        let mut f = Table::new(["Kind", "Count", "First messages"]).with_align(&[
            Align::Left,
            Align::Right,
            Align::Left,
        ]);
        for g in &s.failures {
            f.push([g.kind.to_string(), g.count.to_string(), g.messages.join(" / ")]);
        }
        out.push_str(&f.to_markdown());
    }
    let notes = notes(s);
    if !notes.is_empty() {
        out.push_str("\n### Warnings\n\n");
        for n in notes {
            out.push_str(&format!("- {n}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(["name", "value"]);
        t.push(["a|b", "1.00"]);
        t.push(["long name"]);
        t
    }

    #[test]
    fn markdown_cells_show_html_as_text() {
        let mut t = Table::new(["label", "x"]);
        t.push(["<script>alert(1)</script> & co", "1"]);
        let md = t.to_markdown();
        assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"), "{md}");
        assert!(!md.contains("<script>"));
    }

    #[test]
    fn markdown_pads_escapes_and_aligns() {
        assert_eq!(
            table().to_markdown(),
            "| name      | value |\n\
             | :-------- | ----: |\n\
             | a\\|b      |  1.00 |\n\
             | long name |       |\n"
        );
    }

    #[test]
    fn plain_aligns_without_trailing_spaces() {
        let t = table().with_align(&[Align::Center]);
        assert_eq!(
            t.to_plain(),
            "  name     value\n---------  -----\n   a|b      1.00\nlong name\n"
        );
    }
}
