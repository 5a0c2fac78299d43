//! How a dataset is named in results: `random(1024:128)`, `sharegpt(path)`. A random
//! dataset's label says how its lengths were drawn and what prefix its prompts share, so two
//! runs that sent different workloads never read alike, and a fit can redraw its lengths
//! ([`random_spec_of_label`]).

use crate::{DatasetSpec, LengthRange};

/// The flags' words for a range: the ratio and whose convention it follows.
fn range_words(range: LengthRange) -> String {
    match range {
        LengthRange::Around(r) => format!("ratio {r} vllm"),
        LengthRange::Below(r) => format!("ratio {r} sglang"),
    }
}

impl DatasetSpec {
    /// The dataset as results and tables name it.
    pub fn label(&self) -> String {
        match self {
            DatasetSpec::Random { input_len, output_len, range, prefix_len } => {
                let mut extra = String::new();
                if !range.is_exact() {
                    extra.push_str(&format!(", {}", range_words(*range)));
                }
                if *prefix_len > 0 {
                    extra.push_str(&format!(", prefix {prefix_len}"));
                }
                format!("random({input_len}:{output_len}{extra})")
            }
            DatasetSpec::ShareGpt { path, .. } => format!("sharegpt({})", path.display()),
            DatasetSpec::Jsonl { path } => format!("jsonl({})", path.display()),
            DatasetSpec::Prefix { num_prefixes, prefix_len, suffix_len, .. } => {
                format!("prefix({num_prefixes}x{prefix_len}+{suffix_len})")
            }
            DatasetSpec::RandomMultimodal { input_len, output_len, images, .. } => {
                format!("random-mm({input_len}:{output_len}, {} images)", images.per_prompt)
            }
            DatasetSpec::Hf(h) => format!("hf({})", h.name),
            DatasetSpec::Sessions(s) => match &s.source {
                crate::SessionSource::ShareGpt { path, .. } => {
                    format!("sessions(sharegpt({}))", path.display())
                }
                crate::SessionSource::Jsonl { path, .. } => {
                    format!("sessions(jsonl({}))", path.display())
                }
                crate::SessionSource::Synthetic(p) => format!(
                    "sessions({}-{} turns, {}:{}, system {})",
                    p.turns_min, p.turns_max, p.input_len, p.output_len, p.system_prompt_len
                ),
            },
            DatasetSpec::Trace(t) => {
                let format = match t.format {
                    crate::TraceFormat::Mooncake { .. } => "mooncake",
                    crate::TraceFormat::Azure => "azure",
                    crate::TraceFormat::BurstGpt { .. } => "burstgpt",
                };
                format!("trace({format}:{})", t.path.display())
            }
        }
    }
}

/// The random dataset a label names (`random(1024:128)`, `random(1024:128, ratio 0.8
/// sglang)`, `random(1024:128, ratio 0.1 vllm, prefix 64)`, as [`DatasetSpec::label`] writes
/// them); `None` for any other text.
pub fn random_spec_of_label(label: &str) -> Option<DatasetSpec> {
    let inner = label.strip_prefix("random(")?.strip_suffix(')')?;
    let mut parts = inner.split(", ");
    let (i, o) = parts.next()?.split_once(':')?;
    let (input_len, output_len) = (i.parse().ok()?, o.parse().ok()?);
    let (mut range, mut prefix_len) = (LengthRange::EXACT, 0);
    for part in parts {
        let words: Vec<&str> = part.split(' ').collect();
        match words[..] {
            ["ratio", r, "vllm"] => range = LengthRange::Around(r.parse().ok()?),
            ["ratio", r, "sglang"] => range = LengthRange::Below(r.parse().ok()?),
            ["prefix", n] => prefix_len = n.parse().ok()?,
            _ => return None,
        }
    }
    Some(DatasetSpec::Random { input_len, output_len, range, prefix_len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let random = |input_len, output_len, range, prefix_len| DatasetSpec::Random {
            input_len,
            output_len,
            range,
            prefix_len,
        };
        let r = random(3, 2, LengthRange::Around(0.5), 1);
        assert_eq!(r.label(), "random(3:2, ratio 0.5 vllm, prefix 1)");
        let below = random(1024, 1024, LengthRange::Below(0.8), 0);
        assert_eq!(below.label(), "random(1024:1024, ratio 0.8 sglang)");
        let exact = random(7, 5, LengthRange::Below(1.0), 0);
        assert_eq!(exact.label(), "random(7:5)");
        for spec in [r, below, exact] {
            let back = random_spec_of_label(&spec.label()).unwrap();
            assert_eq!(back.label(), spec.label());
        }
        assert!(random_spec_of_label("random(3:2, ratio x vllm)").is_none());
        assert!(random_spec_of_label("sharegpt(a.json)").is_none());
        let j = DatasetSpec::Jsonl { path: "a/b.jsonl".into() };
        assert_eq!(j.label(), "jsonl(a/b.jsonl)");
        let p = DatasetSpec::Prefix {
            num_prefixes: 8,
            prefix_len: 512,
            suffix_len: 128,
            output_len: 1,
        };
        assert_eq!(p.label(), "prefix(8x512+128)");
    }
}
