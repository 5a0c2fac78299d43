//! The one HTML page shell of servelab's reports (compare/report, lab): inline CSS, inline
//! SVG charts, no scripts, nothing fetched, so a report opens anywhere.

use crate::chart::{inline_svg, Chart};
use crate::markdown::{Align, Table};

/// Escape text for HTML and XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#222}\
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}\
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0;display:block;overflow-x:auto}\
th,td{border:1px solid #ddd;padding:.25rem .5rem;white-space:nowrap}th{background:#f4f4f4}\
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}td.mid,th.mid{text-align:center}\
ul.findings li{margin:.3rem 0}.notes{color:#555;font-size:.85rem}\
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto}\
figure.chart{margin:1rem 0}figure.chart svg{display:block;max-width:100%;height:auto}";

/// A whole page: `title` as the document title and heading, then `body` (HTML). Control
/// characters that reached the page (an imported model name, a label, an experiment name)
/// are made visible as `\u{1b}` rather than written raw, whichever path carried them.
pub fn page(title: &str, body: &str) -> String {
    let page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{t}</h1>\n{body}\
         </body>\n</html>\n",
        t = esc(title)
    );
    crate::term::sanitize(&page).into_owned()
}

/// A [`Table`] as an HTML table (the same cells and alignment as its Markdown).
pub fn table(t: &Table) -> String {
    let align = |i: usize| match t.align.get(i) {
        Some(Align::Right) => " class=\"num\"",
        Some(Align::Center) => " class=\"mid\"",
        _ => "",
    };
    let mut s = String::from("<table>\n<thead><tr>");
    for (i, h) in t.headers.iter().enumerate() {
        s.push_str(&format!("<th{}>{}</th>", align(i), esc(h)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        s.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            s.push_str(&format!("<td{}>{}</td>", align(i), esc(c)));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// A chart as a figure of the page; a chart that cannot be drawn says so in its place.
pub fn figure(c: &Chart) -> String {
    match inline_svg(c) {
        Ok(svg) => format!("<figure class=\"chart\">{svg}</figure>\n"),
        Err(e) => format!("<p class=\"notes\">{}</p>\n", esc(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_tables_escape_their_text() {
        let p = page("a<b", "<p>x</p>\n");
        assert!(p.starts_with("<!DOCTYPE html>") && p.contains("<h1>a&lt;b</h1>"));
        let mut t = Table::new(["k", "v"]).with_align(&[Align::Left, Align::Right]);
        t.push(["<script>", "1"]);
        let h = table(&t);
        assert!(h.contains("<td>&lt;script&gt;</td><td class=\"num\">1</td>"), "{h}");
    }
}
