//! Profiles: the workloads every trial runs. A profile is a set of `servelab bench` options
//! (`num_prompts: 1000` is `--num-prompts 1000`); the built-in ones have fixed seeds so every
//! trial sends the same requests. The CLI turns a profile's [`ProfileSpec::args`] into bench
//! settings with the bench's own parser, so any bench option works and is checked the same way.

use serde_yaml_ng::Value;

use crate::error::{invalid, LabError};

/// The value of one bench option.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// A switch such as `--ignore-eos`.
    Flag,
    /// An option with one value, such as `--num-prompts 1000`.
    Value(String),
    /// A repeatable or multi-value option such as `--goodput ttft:500 tpot:50`.
    Values(Vec<String>),
}

/// A named set of bench options, in order, keyed by `snake_case` option name.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSpec {
    /// The profile's name, e.g. `throughput`.
    pub name: String,
    /// `(snake_case option name, value)` pairs, in order.
    pub options: Vec<(String, ArgValue)>,
    /// `shared_prefixes: true`: the profile draws its prompts from the lab's seed itself, so
    /// profiles that set it share prompts on purpose, and their prefix-cache hits are
    /// credited (see [`crate::seeds`]). Not a bench option.
    pub shared_prefixes: bool,
}

impl ProfileSpec {
    /// Set (or replace) one option.
    pub fn set(&mut self, key: &str, v: ArgValue) {
        match self.options.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = v,
            None => self.options.push((key.to_string(), v)),
        }
    }

    /// The value of one option, if set.
    pub fn get(&self, key: &str) -> Option<&ArgValue> {
        self.options.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Command-line arguments for `servelab bench`, e.g. `["--num-prompts", "1000"]`.
    pub fn args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &self.options {
            let flag = format!("--{}", k.replace('_', "-"));
            match v {
                ArgValue::Flag => out.push(flag),
                ArgValue::Value(s) => {
                    out.push(flag);
                    out.push(s.clone());
                }
                ArgValue::Values(vs) => {
                    out.push(flag);
                    out.extend(vs.iter().cloned());
                }
            }
        }
        out
    }
}

/// Bench options a profile may not set: the lab owns the target and the store.
const OWNED_BY_LAB: [(&str, &str); 9] = [
    ("base_url", "the target is the engine's base_url"),
    ("host", "the target is the engine's base_url"),
    ("port", "the target is the engine's base_url"),
    ("db", "give --db to servelab lab run"),
    ("label", "the lab labels runs by trial and profile"),
    ("tag", "the lab tags runs with the trial configuration"),
    ("no_store", "give --no-store to servelab lab run"),
    ("save_result", "results are kept in the experiment folder"),
    ("result_dir", "results are kept in the experiment folder"),
];

fn v(s: &str) -> ArgValue {
    ArgValue::Value(s.to_string())
}

/// The arrival options every built-in profile shares, as GPUStack's published profiles run:
/// 1,000 requests per second at constant spacing (`--burstiness inf`, not Poisson). The seed
/// is the lab's, derived per profile and run ([`crate::seeds::run_seed`]), so every engine
/// and every trial sees the same requests at the same offsets, and no two profiles share
/// prompts.
pub const BUILTIN_ARRIVALS: [(&str, &str); 2] = [("request_rate", "1000"), ("burstiness", "inf")];

/// A built-in profile by name: GPUStack's four (ShareGPT; random 1024:128, 32000:100 and
/// 1000:2000 with exact lengths), each with [`BUILTIN_ARRIVALS`].
pub fn builtin(name: &str) -> Option<ProfileSpec> {
    let random = |input: &str, output: &str, prompts: &str| {
        vec![
            ("dataset_name".to_string(), v("random")),
            ("random_input_len".to_string(), v(input)),
            ("random_output_len".to_string(), v(output)),
            ("ignore_eos".to_string(), ArgValue::Flag),
            ("num_prompts".to_string(), v(prompts)),
        ]
    };
    let mut options = match name {
        "sharegpt" => {
            vec![
                ("dataset_name".to_string(), v("sharegpt")),
                ("num_prompts".to_string(), v("1000")),
            ]
        }
        "throughput" => random("1024", "128", "1000"),
        "long-context" => random("32000", "100", "100"),
        "generation-heavy" => random("1000", "2000", "200"),
        _ => return None,
    };
    options.extend(BUILTIN_ARRIVALS.iter().map(|(k, val)| (k.to_string(), v(val))));
    Some(ProfileSpec { name: name.to_string(), options, shared_prefixes: false })
}

/// The names of the built-in profiles.
pub const BUILTIN_NAMES: [&str; 4] = ["sharegpt", "throughput", "long-context", "generation-heavy"];

fn unknown_builtin(field: String, name: &str) -> LabError {
    invalid(
        field,
        format!(
            "'{name}' is not a built-in profile ({}); give a map of bench options instead",
            BUILTIN_NAMES.join(", ")
        ),
    )
}

/// `profiles[i]`: a built-in name, or a map of bench options with a `name` and an optional
/// `base` (a built-in to start from).
pub fn from_yaml(i: usize, value: &Value) -> Result<ProfileSpec, LabError> {
    let at = |f: &str| {
        if f.is_empty() {
            format!("profiles[{i}]")
        } else {
            format!("profiles[{i}].{f}")
        }
    };
    let spec = match value {
        Value::String(name) => builtin(name).ok_or_else(|| unknown_builtin(at(""), name))?,
        Value::Mapping(m) => {
            let text = |key: &str| {
                m.get(key).map(|v| scalar(v).ok_or_else(|| invalid(at(key), "must be a string")))
            };
            let base = text("base").transpose()?;
            let name = text("name").transpose()?.or_else(|| base.clone());
            let name = name.ok_or_else(|| invalid(at("name"), "a profile map needs a name"))?;
            if name.trim().is_empty() || name.contains('/') {
                return Err(invalid(
                    at("name"),
                    format!("'{name}' must be a non-empty name without '/'"),
                ));
            }
            let mut spec = match &base {
                Some(b) => builtin(b).ok_or_else(|| unknown_builtin(at("base"), b))?,
                None => builtin(&name).unwrap_or_else(|| ProfileSpec {
                    name: name.clone(),
                    options: Vec::new(),
                    shared_prefixes: false,
                }),
            };
            spec.name = name;
            for (k, val) in m {
                let key =
                    scalar(k).ok_or_else(|| invalid(at(""), "option names must be strings"))?;
                if key == "name" || key == "base" {
                    continue;
                }
                let key = key.replace('-', "_");
                if key == "shared_prefixes" {
                    spec.shared_prefixes = match val {
                        Value::Bool(b) => *b,
                        _ => return Err(invalid(at(&key), "must be true or false")),
                    };
                    continue;
                }
                if let Some((_, why)) = OWNED_BY_LAB.iter().find(|(k, _)| *k == key) {
                    return Err(invalid(at(&key), format!("not allowed in a profile: {why}")));
                }
                match option_value(val).map_err(|m| invalid(at(&key), m))? {
                    Some(a) => spec.set(&key, a),
                    None => spec.options.retain(|(k, _)| *k != key),
                }
            }
            spec
        }
        _ => {
            return Err(invalid(
                at(""),
                "must be a built-in profile name or a map of bench options",
            ))
        }
    };
    let sharegpt = spec.get("dataset_name") == Some(&v("sharegpt"));
    if sharegpt && spec.get("dataset_path").is_none() {
        return Err(invalid(
            at("dataset_path"),
            format!(
                "profile '{}' reads ShareGPT conversations: give dataset_path: FILE (e.g. \
                 {{name: sharegpt, dataset_path: ShareGPT_V3_unfiltered_cleaned_split.json}})",
                spec.name
            ),
        ));
    }
    Ok(spec)
}

/// A YAML value as a bench option value; `None` for `false` (option off).
fn option_value(v: &Value) -> Result<Option<ArgValue>, String> {
    Ok(match v {
        Value::Bool(true) => Some(ArgValue::Flag),
        Value::Bool(false) | Value::Null => None,
        Value::String(_) | Value::Number(_) => scalar(v).map(ArgValue::Value),
        Value::Sequence(items) => {
            let parts: Option<Vec<String>> = items.iter().map(scalar).collect();
            Some(ArgValue::Values(parts.ok_or("a list must hold strings or numbers")?))
        }
        // `extra_body: {temperature: 0}` is passed as JSON.
        Value::Mapping(_) => Some(ArgValue::Value(
            serde_json::to_string(v).map_err(|e| format!("cannot be written as JSON: {e}"))?,
        )),
        Value::Tagged(_) => return Err("tagged values are not supported".to_string()),
    })
}

/// A YAML scalar as text (strings, numbers, booleans).
pub(crate) fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    #[test]
    fn builtins_have_fixed_seeds_and_exact_shapes() {
        let t = builtin("throughput").unwrap();
        assert_eq!(
            t.args(),
            [
                "--dataset-name",
                "random",
                "--random-input-len",
                "1024",
                "--random-output-len",
                "128",
                "--ignore-eos",
                "--num-prompts",
                "1000",
                "--request-rate",
                "1000",
                "--burstiness",
                "inf"
            ]
        );
        let l = builtin("long-context").unwrap();
        assert_eq!(l.get("random_input_len"), Some(&v("32000")));
        assert_eq!(l.get("num_prompts"), Some(&v("100")));
        let g = builtin("generation-heavy").unwrap();
        assert_eq!(g.get("random_output_len"), Some(&v("2000")));
        assert_eq!(g.get("num_prompts"), Some(&v("200")));
        // GPUStack's arrivals on every built-in: constant rate 1000; no seed of their own
        // (one seed for all made one profile's prompts prefixes of another's).
        for name in BUILTIN_NAMES {
            let p = builtin(name).unwrap();
            assert_eq!(p.get("request_rate"), Some(&v("1000")), "{name}");
            assert_eq!(p.get("burstiness"), Some(&v("inf")), "{name}");
            assert_eq!(p.get("seed"), None, "{name}");
            assert!(!p.shared_prefixes, "{name}");
        }
        assert!(builtin("fast").is_none());
    }

    #[test]
    fn a_map_is_any_bench_options() {
        let p = from_yaml(
            0,
            &yaml(
                "{name: tiny, num_prompts: 16, max-concurrency: 16, ignore_eos: true, \
                 goodput: ['ttft:500', 'tpot:50'], extra_body: {temperature: 0}}",
            ),
        )
        .unwrap();
        assert_eq!(p.name, "tiny");
        assert_eq!(
            p.args(),
            [
                "--num-prompts",
                "16",
                "--max-concurrency",
                "16",
                "--ignore-eos",
                "--goodput",
                "ttft:500",
                "tpot:50",
                "--extra-body",
                "{\"temperature\":0}"
            ]
        );
    }

    #[test]
    fn a_map_can_scale_down_a_builtin() {
        let p = from_yaml(
            1,
            &yaml("{name: small, base: throughput, num_prompts: 8, ignore_eos: false}"),
        )
        .unwrap();
        assert_eq!(p.name, "small");
        assert_eq!(p.get("num_prompts"), Some(&v("8")));
        assert_eq!(p.get("ignore_eos"), None);
        assert_eq!(p.get("random_input_len"), Some(&v("1024")));
        // Named like a built-in, with no base: starts from that built-in.
        let p = from_yaml(0, &yaml("{name: throughput, num_prompts: 4, shared_prefixes: true}"))
            .unwrap();
        assert!(p.shared_prefixes);
        assert!(!p.args().iter().any(|a| a.contains("shared")), "{:?}", p.args());
        assert_eq!(p.get("random_input_len"), Some(&v("1024")));
        assert_eq!(p.get("num_prompts"), Some(&v("4")));
        // The arrivals can be switched back to everything at once.
        let p = from_yaml(0, &yaml("{name: t, base: throughput, request_rate: inf}")).unwrap();
        assert_eq!(p.get("request_rate"), Some(&v("inf")));
    }

    #[test]
    fn errors_name_the_field() {
        let e = from_yaml(2, &yaml("fast")).unwrap_err().to_string();
        assert!(e.starts_with("profiles[2]: 'fast' is not a built-in profile (sharegpt,"), "{e}");
        let e = from_yaml(0, &yaml("sharegpt")).unwrap_err().to_string();
        assert!(
            e.starts_with("profiles[0].dataset_path: profile 'sharegpt' reads ShareGPT"),
            "{e}"
        );
        let ok = from_yaml(0, &yaml("{name: sharegpt, dataset_path: sg.json}")).unwrap();
        assert_eq!(ok.get("dataset_path"), Some(&v("sg.json")));
        let e = from_yaml(1, &yaml("{name: x, base_url: 'http://h'}")).unwrap_err().to_string();
        assert_eq!(
            e,
            "profiles[1].base_url: not allowed in a profile: the target is the engine's base_url"
        );
        let e = from_yaml(0, &yaml("{num_prompts: 3}")).unwrap_err().to_string();
        assert_eq!(e, "profiles[0].name: a profile map needs a name");
        let e = from_yaml(0, &yaml("{name: x, base: nope}")).unwrap_err().to_string();
        assert!(e.starts_with("profiles[0].base: 'nope' is not a built-in"), "{e}");
        let e = from_yaml(0, &yaml("[1, 2]")).unwrap_err().to_string();
        assert_eq!(e, "profiles[0]: must be a built-in profile name or a map of bench options");
    }
}
