//! How a dataset is named in results: `random(1024:128)`, `sharegpt(path)`.

use crate::DatasetSpec;

impl DatasetSpec {
    /// The dataset as results and tables name it.
    pub fn label(&self) -> String {
        match self {
            DatasetSpec::Random { input_len, output_len, .. } => {
                format!("random({input_len}:{output_len})")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let r = DatasetSpec::Random {
            input_len: 3,
            output_len: 2,
            range: crate::LengthRange::Around(0.5),
            prefix_len: 1,
        };
        assert_eq!(r.label(), "random(3:2)");
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
