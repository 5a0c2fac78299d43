//! `ISL:OSL`, the fixed input and output lengths of a random workload, and the one way to read
//! it: from a `--scenario` argument, a dataset label (`random(3000:150)`), or a published
//! table's heading (`## Benchmark Result (ISL:OSL=3000:150)`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Fixed prompt and output lengths in tokens, written `ISL:OSL` (`3000:150`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IslOsl {
    /// Prompt tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
}

impl fmt::Display for IslOsl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.isl, self.osl)
    }
}

/// Text that is not `ISL:OSL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotIslOsl(pub String);

impl fmt::Display for NotIslOsl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' is not ISL:OSL (input and output tokens, e.g. 3000:150)", self.0)
    }
}

impl std::error::Error for NotIslOsl {}

impl FromStr for IslOsl {
    type Err = NotIslOsl;

    /// `3000:150` (spaces around either number allowed).
    fn from_str(s: &str) -> Result<IslOsl, NotIslOsl> {
        let bad = || NotIslOsl(s.to_string());
        let (i, o) = s.split_once(':').ok_or_else(bad)?;
        Ok(IslOsl {
            isl: i.trim().parse().map_err(|_| bad())?,
            osl: o.trim().parse().map_err(|_| bad())?,
        })
    }
}

impl IslOsl {
    /// The lengths of a random dataset label (`random(3000:150)`) or of a bare `3000:150`.
    pub fn of_label(label: &str) -> Option<IslOsl> {
        let inner =
            label.strip_prefix("random(").and_then(|r| r.strip_suffix(')')).unwrap_or(label);
        inner.parse().ok()
    }

    /// The first `A:B` pair of integers in a heading, after `ISL:OSL=` when the heading says
    /// so (`Benchmark Result (ISL:OSL=3000:150)`, `1000:1000`); else a word `AxB` of two
    /// integers, as `servelab sweep` names a `--scenario A:B` in its `summary.md` (`## 3000x150`).
    pub fn find_in(heading: &str) -> Option<IslOsl> {
        IslOsl::find_colon_pair(heading).or_else(|| {
            heading.split(|c: char| !c.is_ascii_alphanumeric()).find_map(|word| {
                let (a, b) = word.split_once('x')?;
                let digits = |t: &str| !t.is_empty() && t.bytes().all(|d| d.is_ascii_digit());
                (digits(a) && digits(b))
                    .then(|| Some(IslOsl { isl: a.parse().ok()?, osl: b.parse().ok()? }))?
            })
        })
    }

    fn find_colon_pair(heading: &str) -> Option<IslOsl> {
        let upper = heading.to_ascii_uppercase();
        let from = upper.find("ISL:OSL").map_or(0, |i| i + "ISL:OSL".len());
        let s = heading.get(from..)?;
        for (i, _) in s.match_indices(':') {
            let left = s[..i].trim_end();
            let digits_l = left.bytes().rev().take_while(u8::is_ascii_digit).count();
            let right = &s[i + 1..];
            let digits_r = right.bytes().take_while(u8::is_ascii_digit).count();
            if digits_l > 0 && digits_r > 0 {
                let isl = left[left.len() - digits_l..].parse().ok()?;
                let osl = right[..digits_r].parse().ok()?;
                return Some(IslOsl { isl, osl });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn io(isl: u32, osl: u32) -> IslOsl {
        IslOsl { isl, osl }
    }

    #[test]
    fn reads_arguments_labels_and_headings() {
        assert_eq!("3000:150".parse(), Ok(io(3000, 150)));
        assert_eq!(" 3000 : 150 ".parse(), Ok(io(3000, 150)));
        assert_eq!(
            "3000".parse::<IslOsl>().unwrap_err().to_string(),
            "'3000' is not ISL:OSL (input and output tokens, e.g. 3000:150)"
        );
        assert!("a:b".parse::<IslOsl>().is_err());
        assert_eq!(io(1000, 1000).to_string(), "1000:1000");
        assert_eq!(IslOsl::of_label("random(3000:150)"), Some(io(3000, 150)));
        assert_eq!(IslOsl::of_label("1000:1000"), Some(io(1000, 1000)));
        assert_eq!(IslOsl::of_label("sharegpt(a.json)"), None);
        assert_eq!(IslOsl::find_in("Benchmark (ISL:OSL=500:1000)"), Some(io(500, 1000)));
        assert_eq!(IslOsl::find_in("Qwen3 at 12:00, ISL:OSL 3000:150"), Some(io(3000, 150)));
        assert_eq!(IslOsl::find_in("1000:1000"), Some(io(1000, 1000)));
        assert_eq!(IslOsl::find_in("chat"), None);
        assert_eq!(IslOsl::find_in("3000x150"), Some(io(3000, 150)));
        assert_eq!(IslOsl::find_in("random-1000x300 at c"), Some(io(1000, 300)));
        assert_eq!(IslOsl::find_in("Mixtral 8x7B on 2x H100"), None);
    }
}
