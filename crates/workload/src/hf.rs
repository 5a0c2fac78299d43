//! Hugging Face datasets, offline first: `--dataset-name hf --hf-name ORG/NAME`.
//!
//! The dataset is looked for, in order, (1) as a local directory or file named `ORG/NAME` (or
//! any path), (2) in the Hugging Face hub cache (`{cache}/datasets--ORG--NAME/snapshots/{rev}/`,
//! the revision `refs/main` names, else the last one), (3) on the Hub, when the network is
//! allowed: the file list from `{endpoint}/api/datasets/ORG/NAME`, then each selected data file
//! from `{endpoint}/datasets/ORG/NAME/resolve/{sha}/{file}` into the cache layout above, where
//! Python tools find it too.
//!
//! Data files are JSON (an array of objects, or JSON Lines) and JSONL. Parquet files are
//! recognised but not read (see `docs/datasets.md` for why); the error says how to convert.
//! Rows map to prompts by their fields: ShareGPT-style `conversations`, chat `messages`,
//! `instruction`/`input`/`output`, `prompt`/`response` (or `completion`), `question`/`answer`.

use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::error::{read_text, serde_message, DatasetError};
use crate::hub::HubConfig;
use crate::prompt::{ChatMessage, Prompt, PromptBody};
use crate::session::sharegpt_role as role;
use crate::synth::item_rng;
use crate::tokenizer::Tokenizer;

/// A Hugging Face dataset to read.
#[derive(Debug, Clone, PartialEq)]
pub struct HfDatasetSpec {
    /// `ORG/NAME` on the Hub, or a local directory or file.
    pub name: String,
    /// The split (`train`, `test`, ...): files whose path has a folder of that name or whose
    /// name starts with it. Default: `train` when such files exist, else every data file.
    pub split: Option<String>,
    /// The subset (configuration): files whose path has a folder of that name.
    pub subset: Option<String>,
    /// Fixes every prompt's output length instead of the reference answer's.
    pub output_len: Option<u64>,
}

/// Files never taken for data.
const NOT_DATA: [&str; 4] =
    ["dataset_infos.json", "dataset_info.json", "state.json", "dataset_dict.json"];
/// Largest file downloaded.
const MAX_FILE_BYTES: u64 = 4 << 30;

fn hub_error(message: String) -> DatasetError {
    DatasetError::Hub(message)
}

/// The data files of the dataset, found locally or downloaded (see the module docs).
pub fn resolve_hf_dataset(
    spec: &HfDatasetSpec,
    config: Option<&HubConfig>,
) -> Result<Vec<PathBuf>, DatasetError> {
    let local = Path::new(&spec.name);
    if local.is_file() {
        return Ok(vec![local.to_path_buf()]);
    }
    if local.is_dir() {
        return select_in(local, spec);
    }
    if !crate::hub::is_model_name(&spec.name) {
        return Err(hub_error(format!(
            "--hf-name {}: no such local file or directory, and not a Hugging Face dataset id \
             of the form ORG/NAME",
            spec.name
        )));
    }
    let Some(config) = config else {
        return Err(hub_error(format!(
            "--hf-name {}: not a local directory, and no Hugging Face cache directory is known \
             (set HF_HUB_CACHE, HF_HOME or HOME), so it cannot be looked up",
            spec.name
        )));
    };
    let dir = dataset_dir(&config.cache_dir, &spec.name);
    if let Some(snapshot) = cached_snapshot(&dir) {
        return select_in(&snapshot, spec);
    }
    if config.offline {
        return Err(hub_error(format!(
            "--hf-name {}: not a local directory and not in the Hugging Face cache ({} does not \
             exist), and HF_HUB_OFFLINE forbids downloading; download it with `huggingface-cli \
             download --repo-type dataset {}` or pass a local directory",
            spec.name,
            dir.display(),
            spec.name
        )));
    }
    download(config, spec, &dir)
}

/// `datasets--ORG--NAME` under the hub cache.
pub fn dataset_dir(cache_dir: &Path, name: &str) -> PathBuf {
    cache_dir.join(format!("datasets--{}", name.replace('/', "--")))
}

/// The snapshot `refs/main` names, else the last one in name order.
fn cached_snapshot(dir: &Path) -> Option<PathBuf> {
    if let Ok(rev) = std::fs::read_to_string(dir.join("refs/main")) {
        let snap = dir.join("snapshots").join(rev.trim());
        if !rev.trim().is_empty() && snap.is_dir() {
            return Some(snap);
        }
    }
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    snaps.sort();
    snaps.pop()
}

/// Every file under `root`, as `/`-separated relative paths, sorted.
fn list_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

fn select_in(root: &Path, spec: &HfDatasetSpec) -> Result<Vec<PathBuf>, DatasetError> {
    let files = select(&list_files(root), spec).map_err(|why| {
        hub_error(format!("--hf-name {}: in {}: {why}", spec.name, root.display()))
    })?;
    Ok(files.into_iter().map(|f| root.join(f)).collect())
}

fn is_data(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    !name.starts_with('.')
        && !NOT_DATA.contains(&name)
        && [".json", ".jsonl", ".parquet"].iter().any(|e| name.ends_with(e))
}

fn in_split(path: &str, split: &str) -> bool {
    let mut parts = path.split('/').rev();
    let name = parts.next().unwrap_or_default();
    let stem_match = name
        .strip_prefix(split)
        .is_some_and(|rest| rest.starts_with(['-', '_', '.']) || rest.is_empty());
    stem_match || parts.any(|dir| dir == split)
}

/// The data files of `files` (relative paths) that the split and subset select.
pub(crate) fn select(files: &[String], spec: &HfDatasetSpec) -> Result<Vec<String>, String> {
    let data: Vec<&String> = files.iter().filter(|f| is_data(f)).collect();
    if data.is_empty() {
        return Err(format!(
            "no .json, .jsonl or .parquet data file (files: {})",
            shown(files.iter())
        ));
    }
    let data: Vec<&String> = match &spec.subset {
        Some(subset) => {
            let kept: Vec<&String> = data
                .iter()
                .copied()
                .filter(|f| f.split('/').rev().skip(1).any(|d| d == subset))
                .collect();
            if kept.is_empty() {
                return Err(format!(
                    "no data file in a folder named \"{subset}\" (--hf-subset); data files: {}",
                    shown(data.iter().copied())
                ));
            }
            kept
        }
        None => data,
    };
    let split = spec.split.as_deref().unwrap_or("train");
    let in_it: Vec<&String> = data.iter().copied().filter(|f| in_split(f, split)).collect();
    let chosen = match (in_it.is_empty(), &spec.split) {
        (false, _) => in_it,
        (true, None) => data,
        (true, Some(_)) => {
            return Err(format!(
                "no data file of split \"{split}\" (--hf-split: a folder of that name or a file \
                 name starting with it); data files: {}",
                shown(data.iter().copied())
            ))
        }
    };
    let readable: Vec<String> =
        chosen.iter().filter(|f| !f.ends_with(".parquet")).map(|f| f.to_string()).collect();
    if readable.is_empty() {
        return Err(format!(
            "the selected data files are Parquet ({}), which servelab does not read; convert \
             them to JSON Lines (e.g. `python -c \"import pandas as p; \
             p.read_parquet('F.parquet').to_json('F.jsonl', orient='records', lines=True)\"`) \
             and pass the folder with --hf-name",
            shown(chosen.iter().copied())
        ));
    }
    Ok(readable)
}

fn shown<'a>(files: impl Iterator<Item = &'a String>) -> String {
    let files: Vec<&String> = files.collect();
    let mut s = files.iter().take(8).map(|f| f.as_str()).collect::<Vec<_>>().join(", ");
    if files.len() > 8 {
        s.push_str(&format!(", ... ({} in all)", files.len()));
    }
    if s.is_empty() {
        s.push_str("none");
    }
    s
}

/// Fetch the file list, then the selected files, into the cache.
fn download(
    config: &HubConfig,
    spec: &HfDatasetSpec,
    dir: &Path,
) -> Result<Vec<PathBuf>, DatasetError> {
    let name = &spec.name;
    let fail = |why: String| {
        hub_error(format!(
            "--hf-name {name}: not a local directory, not in the Hugging Face cache ({}), and \
             the download failed: {why}; download it with `huggingface-cli download \
             --repo-type dataset {name}` or pass a local directory",
            dir.display()
        ))
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(config.connect_timeout))
        .timeout_global(Some(config.total_timeout))
        .build()
        .into();
    let get = |url: &str| {
        let mut request = agent.get(url);
        if let Some(token) = &config.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        request.call().map_err(|e| match e {
            ureq::Error::StatusCode(401 | 403) => {
                format!("{url} refused access (gated or private dataset? set HF_TOKEN)")
            }
            ureq::Error::StatusCode(404) => format!("{url} was not found"),
            ureq::Error::StatusCode(code) => format!("{url} answered HTTP {code}"),
            other => format!("cannot reach {}: {other}", config.endpoint),
        })
    };
    let info_url = format!("{}/api/datasets/{name}", config.endpoint);
    let info: Value = get(&info_url)
        .and_then(|mut r| {
            let bytes = r
                .body_mut()
                .with_config()
                .limit(64 << 20)
                .read_to_vec()
                .map_err(|e| format!("download from {info_url} failed: {e}"))?;
            serde_json::from_slice(&bytes)
                .map_err(|e| format!("{info_url} did not return JSON: {e}"))
        })
        .map_err(fail)?;
    let sha = info["sha"]
        .as_str()
        .filter(|s| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("main")
        .to_string();
    let files: Vec<String> = info["siblings"]
        .as_array()
        .map(|s| s.iter().filter_map(|f| f["rfilename"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let safe = |f: &str| !f.split('/').any(|p| p.is_empty() || p == "." || p == "..");
    let files: Vec<String> = files.into_iter().filter(|f| safe(f)).collect();
    let chosen = select(&files, spec).map_err(|why| fail(format!("on the Hub: {why}")))?;
    let snapshot = dir.join("snapshots").join(&sha);
    for file in &chosen {
        let url = format!("{}/datasets/{name}/resolve/{sha}/{file}", config.endpoint);
        let body = get(&url)
            .and_then(|mut r| {
                r.body_mut()
                    .with_config()
                    .limit(MAX_FILE_BYTES)
                    .read_to_vec()
                    .map_err(|e| format!("download from {url} failed: {e}"))
            })
            .map_err(fail)?;
        let target = snapshot.join(file);
        store(&target, &body)
            .map_err(|e| fail(format!("cannot write {}: {e}", target.display())))?;
    }
    std::fs::create_dir_all(dir.join("refs"))
        .and_then(|()| std::fs::write(dir.join("refs/main"), &sha))
        .map_err(|e| fail(format!("cannot write to the cache: {e}")))?;
    Ok(chosen.iter().map(|f| snapshot.join(f)).collect())
}

/// Write through a temporary name, so a half-written file is never found in the cache.
fn store(target: &Path, body: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let partial = target.with_extension(format!("{}.partial", std::process::id()));
    std::fs::write(&partial, body)?;
    std::fs::rename(&partial, target)
}

/// One row's prompt, and its reference answer if any.
#[derive(Debug)]
struct Row {
    body: PromptBody,
    reference: Option<String>,
}

fn text_of(v: &Value) -> Option<&str> {
    v.as_str()
}

/// Map one row (see the module docs); `Err` says what the row lacks.
fn map_row(obj: &Map<String, Value>) -> Result<Option<Row>, String> {
    let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
    if let Some(conv) = get("conversations").or_else(|| get("messages")) {
        let Value::Array(items) = conv else {
            return Err("\"conversations\"/\"messages\" must be an array of messages".into());
        };
        let mut messages = Vec::new();
        let mut reference = None;
        for (i, m) in items.iter().enumerate() {
            let r = m.get("from").or_else(|| m.get("role")).and_then(Value::as_str);
            let c = m.get("value").or_else(|| m.get("content")).and_then(text_of);
            let (Some(r), Some(c)) = (r, c) else {
                return Err(format!(
                    "message {i} needs string \"from\"/\"role\" and \"value\"/\"content\""
                ));
            };
            match role(r) {
                crate::session::Role::Assistant if messages.is_empty() => continue,
                crate::session::Role::Assistant => {
                    reference = Some(c.to_string());
                    break;
                }
                crate::session::Role::System => messages.push(ChatMessage::new("system", c)),
                crate::session::Role::User => messages.push(ChatMessage::new("user", c)),
                crate::session::Role::Other => break,
            }
        }
        if !messages.iter().any(|m| m.role == "user") {
            return Ok(None);
        }
        return Ok(Some(Row { body: PromptBody::Chat(messages), reference }));
    }
    let pair = |q: &str, answers: &[&str]| -> Option<Row> {
        let prompt = get(q)?.as_str()?;
        let reference = answers.iter().find_map(|a| get(a).and_then(Value::as_str));
        Some(Row {
            body: PromptBody::Text(prompt.to_string()),
            reference: reference.map(str::to_string),
        })
    };
    if let Some(instruction) = get("instruction").and_then(Value::as_str) {
        let input = get("input").and_then(Value::as_str).unwrap_or("");
        let prompt = if input.is_empty() {
            instruction.to_string()
        } else {
            format!("{instruction}\n\n{input}")
        };
        let reference = get("output").or_else(|| get("response")).and_then(Value::as_str);
        return Ok(Some(Row {
            body: PromptBody::Text(prompt),
            reference: reference.map(str::to_string),
        }));
    }
    if let Some(row) = pair("prompt", &["response", "completion", "output", "answer"])
        .or_else(|| pair("question", &["answer", "response"]))
    {
        return Ok(Some(row));
    }
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    Err(format!(
        "has none of the known layouts (string fields: conversations, messages, \
         instruction/input/output, prompt/response, question/answer); its fields are: {}",
        keys.join(", ")
    ))
}

/// Rows of one JSON (array) or JSON Lines file.
fn read_rows(path: &Path) -> Result<Vec<Row>, DatasetError> {
    let text = read_text(path)?;
    let mut rows = Vec::new();
    let mut push = |where_: String, v: Value| -> Result<(), DatasetError> {
        let Value::Object(obj) = v else {
            return Err(DatasetError::Content {
                path: path.into(),
                problem: format!("{where_}: expected a JSON object"),
            });
        };
        match map_row(&obj) {
            Ok(Some(row)) => rows.push(row),
            Ok(None) => {}
            Err(problem) => {
                return Err(DatasetError::Content {
                    path: path.into(),
                    problem: format!("{where_} {problem}"),
                })
            }
        }
        Ok(())
    };
    if text.trim_start().starts_with('[') {
        let items: Vec<Value> = serde_json::from_str(&text).map_err(|e| DatasetError::Json {
            path: path.into(),
            line: e.line(),
            column: e.column(),
            message: serde_message(&e),
        })?;
        for (i, v) in items.into_iter().enumerate() {
            push(format!("row {i}"), v)?;
        }
    } else {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).map_err(|e| DatasetError::Json {
                path: path.into(),
                line: i + 1,
                column: e.column(),
                message: serde_message(&e),
            })?;
            push(format!("line {}", i + 1), v)?;
        }
    }
    Ok(rows)
}

/// `num` prompts from a Hugging Face dataset: rows shuffled with the seed, repeated in order if
/// too few. Only the rows used are tokenized.
pub fn load_hf(
    spec: &HfDatasetSpec,
    config: Option<&HubConfig>,
    num: usize,
    tok: &Tokenizer,
    seed: u64,
) -> Result<Vec<Prompt>, DatasetError> {
    let files = resolve_hf_dataset(spec, config)?;
    let mut rows = Vec::new();
    for f in &files {
        rows.extend(read_rows(f)?);
    }
    if rows.is_empty() {
        return Err(hub_error(format!(
            "--hf-name {}: no row with a user prompt in {}",
            spec.name,
            files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    rows.shuffle(&mut item_rng(seed, 0));
    rows.truncate(num);
    let prompts: Vec<Prompt> = rows
        .into_par_iter()
        .map(|row| {
            let output_tokens = spec
                .output_len
                .or_else(|| row.reference.as_deref().map(|r| (tok.count(r) as u64).max(1)));
            let mut p = Prompt { body: row.body, prompt_tokens: 0, output_tokens };
            p.prompt_tokens = tok.count(&p.text()) as u64;
            p
        })
        .collect();
    Ok(crate::cycle(prompts, num))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(split: Option<&str>, subset: Option<&str>) -> HfDatasetSpec {
        HfDatasetSpec {
            name: "o/n".into(),
            split: split.map(Into::into),
            subset: subset.map(Into::into),
            output_len: None,
        }
    }

    #[test]
    fn split_and_subset_select_files() {
        let files: Vec<String> = [
            "README.md",
            "dataset_infos.json",
            "data/train-00000-of-00001.jsonl",
            "data/test-00000-of-00001.jsonl",
            "en/train.json",
            "fr/train/part.jsonl",
            "big/train-0.parquet",
        ]
        .map(String::from)
        .to_vec();
        let pick = |split, subset| select(&files, &spec(split, subset));
        assert_eq!(
            pick(None, None).unwrap(),
            ["data/train-00000-of-00001.jsonl", "en/train.json", "fr/train/part.jsonl"]
        );
        assert_eq!(pick(Some("test"), None).unwrap(), ["data/test-00000-of-00001.jsonl"]);
        assert_eq!(pick(None, Some("fr")).unwrap(), ["fr/train/part.jsonl"]);
        let err = pick(Some("validation"), None).unwrap_err();
        assert!(err.starts_with("no data file of split \"validation\""), "{err}");
        let err = pick(None, Some("big")).unwrap_err();
        assert!(err.contains("Parquet"), "{err}");
        assert!(select(&["README.md".into()], &spec(None, None)).is_err());
    }

    #[test]
    fn rows_map_from_common_layouts() {
        let row = |j: &str| map_row(serde_json::from_str::<Value>(j).unwrap().as_object().unwrap());
        let r = row(r#"{"instruction":"Add","input":"1 2","output":"3"}"#).unwrap().unwrap();
        assert_eq!(r.body, PromptBody::Text("Add\n\n1 2".into()));
        assert_eq!(r.reference.as_deref(), Some("3"));
        let r = row(r#"{"question":"q?","answer":"a"}"#).unwrap().unwrap();
        assert_eq!((r.body, r.reference.as_deref()), (PromptBody::Text("q?".into()), Some("a")));
        let r = row(r#"{"conversations":[{"from":"gpt","value":"x"},{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.body, PromptBody::Chat(vec![ChatMessage::new("user", "hi")]));
        assert_eq!(r.reference.as_deref(), Some("yo"));
        let err = row(r#"{"text":"x","label":1}"#).unwrap_err();
        assert!(err.ends_with("its fields are: label, text"), "{err}");
    }
}
