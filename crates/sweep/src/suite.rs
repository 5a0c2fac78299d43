//! Suites: YAML files of named scenarios, each with its dataset and load options, and the
//! built-in `classic` suite.
//!
//! ```yaml
//! scenarios:
//!   - name: rag
//!     dataset: { kind: random, input_len: 3000, output_len: 150 }
//!     concurrency: [1, 2, 4, 8, 16, 32]
//!     prompts_per_concurrency: 5
//!   - name: sharegpt
//!     dataset: { kind: sharegpt }   # path from --dataset-path
//!     num_prompts: 1000
//! ```
//! Options a scenario leaves out come from the command line.

use std::path::Path;

use serde::Deserialize;

use crate::error::{invalid, SweepError};
use servelab_load::Level;

use crate::grid::{DatasetChoice, Scenario};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default)]
    #[allow(dead_code)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    scenarios: Vec<ScenarioFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    #[serde(default)]
    dataset: Option<DatasetChoice>,
    #[serde(default)]
    concurrency: Option<Vec<usize>>,
    #[serde(default)]
    request_rate: Option<Vec<f64>>,
    #[serde(default)]
    max_concurrency: Option<usize>,
    #[serde(default)]
    num_prompts: Option<usize>,
    #[serde(default)]
    prompts_per_concurrency: Option<f64>,
}

/// The classic four-case serving suite: ShareGPT (10,000 prompts, needs `--dataset-path`)
/// and random 1024:1024, 2000:6000 and 6000:2000, each over the command's load grid.
pub fn classic() -> Vec<Scenario> {
    let random = |i: u64, o: u64| {
        Scenario::new(
            format!("random-{i}x{o}"),
            DatasetChoice::Random { input_len: i, output_len: o },
        )
    };
    let mut sharegpt =
        Scenario::new("sharegpt", DatasetChoice::Sharegpt { path: None, output_len: None });
    sharegpt.num_prompts = Some(10_000);
    vec![sharegpt, random(1024, 1024), random(2000, 6000), random(6000, 2000)]
}

/// `classic`, or the path of a suite YAML file.
pub fn load_suite(spec: &str) -> Result<Vec<Scenario>, SweepError> {
    if spec == "classic" {
        return Ok(classic());
    }
    let path = Path::new(spec);
    let text = std::fs::read_to_string(path).map_err(|e| SweepError::Suite {
        path: path.to_path_buf(),
        message: format!("{e} (give a YAML file, or the built-in suite name 'classic')"),
    })?;
    parse_suite(&text)
        .map_err(|e| SweepError::Suite { path: path.to_path_buf(), message: e.to_string() })
}

/// Parse and check a suite's YAML text.
pub fn parse_suite(text: &str) -> Result<Vec<Scenario>, SweepError> {
    let file: SuiteFile =
        serde_yaml_ng::from_str(text).map_err(|e| invalid("suite", e.to_string()))?;
    if file.scenarios.is_empty() {
        return Err(invalid("suite", "lists no scenarios"));
    }
    let mut out: Vec<Scenario> = Vec::new();
    for f in file.scenarios {
        let s = scenario(f)?;
        if out.iter().any(|o| o.name == s.name) {
            return Err(invalid("suite", format!("scenario name '{}' is used twice", s.name)));
        }
        out.push(s);
    }
    Ok(out)
}

fn scenario(f: ScenarioFile) -> Result<Scenario, SweepError> {
    let at = |field: &str| format!("scenario '{}': {field}", f.name);
    if f.name.trim().is_empty() {
        return Err(invalid("suite", "a scenario has an empty name"));
    }
    let loads = match (&f.concurrency, &f.request_rate) {
        (Some(_), Some(_)) => {
            return Err(invalid(at("concurrency"), "give concurrency or request_rate, not both"))
        }
        (Some(c), None) => {
            if c.is_empty() || c.contains(&0) {
                return Err(invalid(at("concurrency"), "must list whole numbers >= 1"));
            }
            let mut c = c.clone();
            c.sort_unstable();
            c.dedup();
            Some(c.into_iter().map(Level::Concurrency).collect())
        }
        (None, Some(r)) => {
            if r.is_empty() || r.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
                return Err(invalid(at("request_rate"), "must list finite rates > 0"));
            }
            let mut r = r.clone();
            r.sort_by(f64::total_cmp);
            r.dedup();
            Some(r.into_iter().map(Level::Rate).collect())
        }
        (None, None) => None,
    };
    if f.num_prompts == Some(0) {
        return Err(invalid(at("num_prompts"), "must be at least 1"));
    }
    if f.max_concurrency == Some(0) {
        return Err(invalid(at("max_concurrency"), "must be at least 1"));
    }
    if let Some(k) = f.prompts_per_concurrency {
        if !(k.is_finite() && k > 0.0) {
            return Err(invalid(at("prompts_per_concurrency"), "must be a number > 0"));
        }
    }
    if let Some(DatasetChoice::Random { input_len, output_len }) = f.dataset {
        if input_len == 0 || output_len == 0 {
            return Err(invalid(at("dataset"), "input_len and output_len must be at least 1"));
        }
    }
    Ok(Scenario {
        name: f.name,
        dataset: f.dataset.unwrap_or(DatasetChoice::FromArgs),
        loads,
        num_prompts: f.num_prompts,
        prompts_per_load: f.prompts_per_concurrency,
        max_concurrency: f.max_concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scenarios_with_defaults() {
        let text = "
scenarios:
  - name: rag
    dataset: { kind: random, input_len: 3000, output_len: 150 }
    concurrency: [4, 1, 2]
  - name: chat
    request_rate: [2.5, 1]
    max_concurrency: 64
    num_prompts: 50
";
        let s = parse_suite(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].dataset, DatasetChoice::Random { input_len: 3000, output_len: 150 });
        assert_eq!(
            s[0].loads,
            Some(vec![Level::Concurrency(1), Level::Concurrency(2), Level::Concurrency(4)])
        );
        assert_eq!(s[1].dataset, DatasetChoice::FromArgs);
        assert_eq!(s[1].loads, Some(vec![Level::Rate(1.0), Level::Rate(2.5)]));
        assert_eq!((s[1].num_prompts, s[1].max_concurrency), (Some(50), Some(64)));
    }

    #[test]
    fn rejects_bad_suites_with_the_field_named() {
        let e = parse_suite("scenarios:\n  - name: a\n    concurrency: [0]\n").unwrap_err();
        assert_eq!(e.to_string(), "scenario 'a': concurrency: must list whole numbers >= 1");
        let e = parse_suite("scenarios:\n  - name: a\n  - name: a\n").unwrap_err();
        assert_eq!(e.to_string(), "suite: scenario name 'a' is used twice");
        let e = parse_suite("scenarios:\n  - name: a\n    concurency: [1]\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `concurency`"), "{e}");
        assert!(parse_suite("scenarios: []\n").is_err());
        assert!(parse_suite(
            "scenarios:\n  - name: a\n    concurrency: [1]\n    request_rate: [1]\n"
        )
        .is_err());
    }

    #[test]
    fn classic_has_the_four_cases() {
        let names: Vec<String> = classic().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["sharegpt", "random-1024x1024", "random-2000x6000", "random-6000x2000"]);
        assert_eq!(classic()[0].num_prompts, Some(10_000));
    }

    #[test]
    fn example_suites_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/suites");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                let s = load_suite(p.to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"));
                assert!(!s.is_empty());
                n += 1;
            }
        }
        assert!(n >= 3, "found {n} example suites");
        let classic_file = load_suite(&format!("{dir}/classic.yaml")).unwrap();
        assert_eq!(classic_file, classic());
    }

    #[test]
    fn missing_suite_file_says_what_to_give() {
        let e = load_suite("/nonexistent/suite.yaml").unwrap_err().to_string();
        assert!(e.starts_with("cannot read suite /nonexistent/suite.yaml: "), "{e}");
        assert!(e.ends_with("(give a YAML file, or the built-in suite name 'classic')"), "{e}");
    }
}
