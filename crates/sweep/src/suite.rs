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
//!   - name: chat
//!     dataset: { kind: random, input_len: 1000, output_len: 1000 }
//!     concurrency: [1, 16, 64]
//!     num_prompts: [10, 160, 640]  # one count per case, in the order of the list
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
    request_rate: Option<Vec<RateValue>>,
    #[serde(default)]
    max_concurrency: Option<usize>,
    #[serde(default)]
    num_prompts: Option<PromptCounts>,
    #[serde(default)]
    prompts_per_concurrency: Option<f64>,
}

/// A rate in a suite: a number, or `inf` (YAML `inf`, `"inf"` or `.inf`) for all at once.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RateValue {
    Number(f64),
    Text(String),
}

impl RateValue {
    fn value(&self) -> Option<f64> {
        match self {
            RateValue::Number(x) if *x > 0.0 => Some(*x),
            RateValue::Text(t) => servelab_load::parse_positive_or_inf(t).ok(),
            RateValue::Number(_) => None,
        }
    }
}

/// `num_prompts: 1000` for every level, or one count per level of the list beside it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PromptCounts {
    One(usize),
    PerLevel(Vec<usize>),
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

/// The LMDeploy-style scripted suite: the four cases of LMDeploy's serving benchmark script,
/// each one case of its own prompt count sent all at once (rate inf, no cap): ShareGPT 10,000
/// prompts (needs `--dataset-path`), random 1024:1024 with 2,000, 2000:6000 and 6000:2000 with
/// 500 each. The command's grid does not apply: a case is its count.
pub fn lmdeploy() -> Vec<Scenario> {
    let all_at_once = |mut s: Scenario, n: usize| {
        let inf = Level::Rate(f64::INFINITY);
        s.loads = Some(vec![inf]);
        s.level_prompts = vec![(inf, n)];
        s
    };
    let random = |i: u64, o: u64, n: usize| {
        let name = format!("random-{i}x{o}");
        all_at_once(Scenario::new(name, DatasetChoice::Random { input_len: i, output_len: o }), n)
    };
    let sharegpt =
        Scenario::new("sharegpt", DatasetChoice::Sharegpt { path: None, output_len: None });
    vec![
        all_at_once(sharegpt, 10_000),
        random(1024, 1024, 2000),
        random(2000, 6000, 500),
        random(6000, 2000, 500),
    ]
}

/// The built-in suites: `--suite NAME`.
pub const PRESETS: [&str; 2] = ["classic", "lmdeploy"];

/// `classic`, `lmdeploy`, or the path of a suite YAML file.
pub fn load_suite(spec: &str) -> Result<Vec<Scenario>, SweepError> {
    match spec {
        "classic" => return Ok(classic()),
        "lmdeploy" => return Ok(lmdeploy()),
        _ => {}
    }
    let path = Path::new(spec);
    let text = std::fs::read_to_string(path).map_err(|e| SweepError::Suite {
        path: path.to_path_buf(),
        message: format!("{e} (give a YAML file, or a built-in suite: classic, lmdeploy)"),
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
    // Levels as listed, before sorting: a list of prompt counts pairs with them in order.
    let listed: Option<Vec<Level>> = match (&f.concurrency, &f.request_rate) {
        (Some(_), Some(_)) => {
            return Err(invalid(at("concurrency"), "give concurrency or request_rate, not both"))
        }
        (Some(c), None) => {
            if c.is_empty() || c.contains(&0) {
                return Err(invalid(at("concurrency"), "must list whole numbers >= 1"));
            }
            Some(c.iter().map(|&c| Level::Concurrency(c)).collect())
        }
        (None, Some(r)) => {
            let rates: Option<Vec<f64>> = r.iter().map(RateValue::value).collect();
            match rates {
                Some(rates) if !rates.is_empty() => {
                    Some(rates.into_iter().map(Level::Rate).collect())
                }
                _ => {
                    return Err(invalid(
                        at("request_rate"),
                        "must list rates > 0, or inf for all at once",
                    ))
                }
            }
        }
        (None, None) => None,
    };
    let (num_prompts, mut level_prompts) = match &f.num_prompts {
        None => (None, Vec::new()),
        Some(PromptCounts::One(n)) => (Some(*n), Vec::new()),
        Some(PromptCounts::PerLevel(counts)) => {
            let Some(levels) = &listed else {
                return Err(invalid(
                    at("num_prompts"),
                    "a list of counts needs the concurrency or request_rate list it pairs with",
                ));
            };
            if counts.len() != levels.len() {
                return Err(invalid(
                    at("num_prompts"),
                    format!(
                        "lists {} counts for {} levels: give one count per level, in order",
                        counts.len(),
                        levels.len()
                    ),
                ));
            }
            (None, levels.iter().copied().zip(counts.iter().copied()).collect())
        }
    };
    if num_prompts == Some(0) || level_prompts.iter().any(|(_, n)| *n == 0) {
        return Err(invalid(at("num_prompts"), "must be at least 1"));
    }
    level_prompts.sort_by(|a, b| a.0.value().total_cmp(&b.0.value()));
    for w in level_prompts.windows(2) {
        if w[0].0 == w[1].0 && w[0].1 != w[1].1 {
            return Err(invalid(
                at("num_prompts"),
                format!("{} is listed twice with different counts", w[0].0),
            ));
        }
    }
    level_prompts.dedup_by(|a, b| a.0 == b.0);
    let loads = listed.map(|mut l| {
        l.sort_by(|a, b| a.value().total_cmp(&b.value()));
        l.dedup();
        l
    });
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
        num_prompts,
        prompts_per_load: f.prompts_per_concurrency,
        max_concurrency: f.max_concurrency,
        level_prompts,
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
    fn rate_inf_cases_send_their_prompts_all_at_once() {
        let text = "
scenarios:
  - name: scripted
    request_rate: [inf, 4, \"inf\", .inf]
    num_prompts: [1000, 200, 1000, 1000]
";
        let s = &parse_suite(text).unwrap()[0];
        let inf = Level::Rate(f64::INFINITY);
        assert_eq!(s.loads, Some(vec![Level::Rate(4.0), inf]));
        assert_eq!(s.level_prompts, vec![(Level::Rate(4.0), 200), (inf, 1000)]);
        let e = parse_suite("scenarios:\n  - name: a\n    request_rate: [0]\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "scenario 'a': request_rate: must list rates > 0, or inf for all at once"
        );
    }

    #[test]
    fn cases_carry_their_own_prompt_counts() {
        let text = "
scenarios:
  - name: chat
    concurrency: [64, 1, 16]
    num_prompts: [640, 10, 160]
";
        let s = &parse_suite(text).unwrap()[0];
        assert_eq!(
            s.loads,
            Some(vec![Level::Concurrency(1), Level::Concurrency(16), Level::Concurrency(64)])
        );
        assert_eq!(
            s.level_prompts,
            vec![
                (Level::Concurrency(1), 10),
                (Level::Concurrency(16), 160),
                (Level::Concurrency(64), 640)
            ]
        );
        assert_eq!(s.num_prompts, None);
        let e =
            parse_suite("scenarios:\n  - name: a\n    concurrency: [1, 2]\n    num_prompts: [5]\n")
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "scenario 'a': num_prompts: lists 1 counts for 2 levels: give one count per level, in order"
        );
        let e = parse_suite("scenarios:\n  - name: a\n    num_prompts: [5]\n").unwrap_err();
        assert!(e.to_string().contains("needs the concurrency or request_rate list"), "{e}");
        let e =
            parse_suite("scenarios:\n  - name: a\n    request_rate: [1]\n    num_prompts: [0]\n")
                .unwrap_err();
        assert_eq!(e.to_string(), "scenario 'a': num_prompts: must be at least 1");
    }

    #[test]
    fn classic_has_the_four_cases() {
        let names: Vec<String> = classic().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["sharegpt", "random-1024x1024", "random-2000x6000", "random-6000x2000"]);
        assert_eq!(classic()[0].num_prompts, Some(10_000));
    }

    /// Issue 25 item 7: the preset carries its cases' prompt counts and sends each case all
    /// at once, as LMDeploy's script does; the file version is the same suite.
    #[test]
    fn lmdeploy_preset_has_its_counts_all_at_once() {
        let s = lmdeploy();
        let inf = Level::Rate(f64::INFINITY);
        let cases: Vec<(String, Vec<(Level, usize)>)> =
            s.iter().map(|c| (c.name.clone(), c.level_prompts.clone())).collect();
        assert_eq!(
            cases,
            [
                ("sharegpt".to_string(), vec![(inf, 10_000)]),
                ("random-1024x1024".to_string(), vec![(inf, 2000)]),
                ("random-2000x6000".to_string(), vec![(inf, 500)]),
                ("random-6000x2000".to_string(), vec![(inf, 500)]),
            ]
        );
        assert!(s.iter().all(|c| c.loads == Some(vec![inf])));
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/suites");
        assert_eq!(load_suite(&format!("{dir}/lmdeploy.yaml")).unwrap(), s);
        assert_eq!(load_suite("lmdeploy").unwrap(), s);
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
        assert!(e.ends_with("(give a YAML file, or a built-in suite: classic, lmdeploy)"), "{e}");
    }
}
