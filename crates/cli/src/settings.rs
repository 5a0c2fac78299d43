//! Second stage of argument parsing: raw CLI values → validated settings.
//!
//! Every error names the flag and the bad value, and says what is expected.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};
use servelab_client::Api;
use servelab_load::Arrivals;
use servelab_metrics::Slo;
use servelab_workload::DatasetSpec;

use crate::cli::{Backend, BenchArgs, ContinuousUsage, DatasetName};

#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct SettingsError {
    pub flag: &'static str,
    pub message: String,
}

fn bad(flag: &'static str, message: impl Into<String>) -> SettingsError {
    SettingsError { flag, message: message.into() }
}

/// Where to send requests.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSpec {
    Url(String),
    /// No target given: start the built-in simulator in-process.
    Simulator,
}

#[derive(Debug, Clone)]
pub struct BenchSettings {
    pub target: TargetSpec,
    pub api: Api,
    pub backend_label: &'static str,
    pub endpoint: String,
    pub model: Option<String>,
    pub headers: Vec<String>,
    pub api_key: Option<String>,
    pub extra_body: Map<String, Value>,
    pub ignore_eos: bool,
    pub continuous_usage: ContinuousUsage,
    pub ready_timeout: Duration,
    pub request_timeout: Duration,
    /// `None`: no stall detection.
    pub stall_timeout: Option<Duration>,
    /// Between scrapes of `/metrics`; `None`: no scraping.
    pub server_metrics_interval: Option<Duration>,
    pub tokenizer: Option<String>,
    pub dataset: DatasetSpec,
    pub dataset_label: String,
    pub num_prompts: usize,
    pub seed: u64,
    pub request_rate: Option<f64>,
    pub burstiness: f64,
    pub arrivals: Arrivals,
    pub max_concurrency: Option<usize>,
    pub duration: Option<Duration>,
    pub num_warmups: usize,
    pub drain_timeout: Duration,
    pub goodput: Option<Slo>,
    pub percentiles: Vec<f64>,
    pub save_result: bool,
    pub save_detailed: bool,
    pub result_dir: PathBuf,
    pub result_filename: Option<String>,
    pub progress: bool,
    /// Where and how the run is recorded in the results store (`--db`, `--label`, `--tag`).
    pub store: crate::store_cmd::StoreSettings,
}

impl BenchSettings {
    pub fn from_args(a: BenchArgs, api_key: Option<String>) -> Result<Self, SettingsError> {
        let target = match (&a.base_url, &a.host, a.port) {
            (Some(url), None, None) => TargetSpec::Url(url.clone()),
            (Some(_), _, _) => {
                return Err(bad("--base-url", "give either --base-url or --host/--port, not both"))
            }
            (None, None, None) => TargetSpec::Simulator,
            (None, host, port) => TargetSpec::Url(format!(
                "http://{}:{}",
                host.as_deref().unwrap_or("127.0.0.1"),
                port.unwrap_or(8000)
            )),
        };
        let (api, backend_label) = match a.backend {
            Backend::Openai => (Api::Completions, "openai"),
            Backend::OpenaiChat => (Api::Chat, "openai-chat"),
        };
        let endpoint = a.endpoint.clone().unwrap_or_else(|| api.default_endpoint().to_string());
        let extra_body = match &a.extra_body {
            None => Map::new(),
            Some(s) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(m)) => m,
                Ok(_) => {
                    return Err(bad(
                        "--extra-body",
                        "must be a JSON object, e.g. '{\"temperature\":0}'",
                    ))
                }
                Err(e) => return Err(bad("--extra-body", format!("invalid JSON: {e}"))),
            },
        };
        let request_rate = parse_rate(&a.request_rate)?;
        let burstiness = parse_positive_or_inf("--burstiness", &a.burstiness)?;
        let arrivals = Arrivals::new(request_rate, burstiness)
            .map_err(|e| bad("--request-rate", e.to_string()))?;
        if a.num_prompts == 0 {
            return Err(bad("--num-prompts", "must be at least 1"));
        }
        if a.max_concurrency == Some(0) {
            return Err(bad("--max-concurrency", "must be at least 1"));
        }
        let duration = match a.duration {
            None => None,
            Some(d) if d > 0.0 && d.is_finite() => Some(Duration::from_secs_f64(d)),
            Some(d) => {
                return Err(bad(
                    "--duration",
                    format!("must be a positive number of seconds (got {d})"),
                ))
            }
        };
        let (dataset, dataset_label) = dataset_spec(&a)?;
        Ok(Self {
            target,
            api,
            backend_label,
            endpoint,
            model: a.model.clone(),
            headers: a.headers.clone(),
            api_key,
            extra_body,
            ignore_eos: a.ignore_eos,
            continuous_usage: a.continuous_usage,
            ready_timeout: secs("--ready-timeout", a.ready_timeout)?,
            request_timeout: secs("--request-timeout", a.request_timeout)?,
            stall_timeout: Some(secs("--stall-timeout", a.stall_timeout)?).filter(|d| !d.is_zero()),
            server_metrics_interval: Some(secs(
                "--server-metrics-interval",
                a.server_metrics_interval,
            )?)
            .filter(|d| !d.is_zero()),
            tokenizer: a.tokenizer.clone(),
            dataset,
            dataset_label,
            num_prompts: a.num_prompts,
            seed: a.seed,
            request_rate,
            burstiness,
            arrivals,
            max_concurrency: a.max_concurrency,
            duration,
            num_warmups: a.num_warmups,
            drain_timeout: secs("--drain-timeout", a.drain_timeout)?,
            goodput: parse_goodput(&a.goodput)?,
            percentiles: parse_percentiles(&a.metric_percentiles)?,
            save_result: a.save_result,
            save_detailed: a.save_detailed,
            result_dir: a.result_dir.clone(),
            result_filename: a.result_filename.clone(),
            progress: !a.no_progress,
            store: crate::store_cmd::StoreSettings::from_args(&a).map_err(|m| bad("--tag", m))?,
        })
    }
}

fn secs(flag: &'static str, v: f64) -> Result<Duration, SettingsError> {
    if v.is_finite() && v >= 0.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(bad(flag, format!("must be a non-negative number of seconds (got {v})")))
    }
}

fn dataset_spec(a: &BenchArgs) -> Result<(DatasetSpec, String), SettingsError> {
    let path = |name: &str| {
        a.dataset_path.clone().ok_or_else(|| {
            bad("--dataset-path", format!("--dataset-name {name} needs --dataset-path FILE"))
        })
    };
    Ok(match a.dataset_name {
        DatasetName::Random => {
            if a.random_input_len == 0 {
                return Err(bad("--random-input-len", "must be at least 1"));
            }
            if !(0.0..1.0).contains(&a.random_range_ratio) {
                return Err(bad("--random-range-ratio", "must be in [0, 1)"));
            }
            (
                DatasetSpec::Random {
                    input_len: a.random_input_len,
                    output_len: a.random_output_len,
                    range_ratio: a.random_range_ratio,
                    prefix_len: a.random_prefix_len,
                },
                format!("random({}:{})", a.random_input_len, a.random_output_len),
            )
        }
        DatasetName::Sharegpt => {
            let p = path("sharegpt")?;
            let label = format!("sharegpt({})", p.display());
            (DatasetSpec::ShareGpt { path: p, output_len: a.sharegpt_output_len }, label)
        }
        DatasetName::Jsonl => {
            let p = path("jsonl")?;
            let label = format!("jsonl({})", p.display());
            (DatasetSpec::Jsonl { path: p }, label)
        }
        DatasetName::Prefix => (
            DatasetSpec::Prefix {
                num_prefixes: a.prefix_num_prefixes.max(1),
                prefix_len: a.prefix_len,
                suffix_len: a.prefix_suffix_len,
                output_len: a.prefix_output_len,
            },
            format!("prefix({}x{}+{})", a.prefix_num_prefixes, a.prefix_len, a.prefix_suffix_len),
        ),
    })
}

/// `inf` or a positive number of requests per second.
pub fn parse_rate(s: &str) -> Result<Option<f64>, SettingsError> {
    let v = parse_positive_or_inf("--request-rate", s)?;
    Ok(if v.is_infinite() { None } else { Some(v) })
}

fn parse_positive_or_inf(flag: &'static str, s: &str) -> Result<f64, SettingsError> {
    let t = s.trim().to_ascii_lowercase();
    if t == "inf" || t == "infinity" {
        return Ok(f64::INFINITY);
    }
    match t.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(bad(flag, format!("expected a positive number or 'inf' (got '{s}')"))),
    }
}

/// `ttft:500 tpot:50 e2el:10000` (milliseconds), vLLM's `--goodput` syntax.
pub fn parse_goodput(items: &[String]) -> Result<Option<Slo>, SettingsError> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut slo = Slo::default();
    for item in items.iter().flat_map(|s| s.split([',', ' '])).filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once(':').ok_or_else(|| {
            bad("--goodput", format!("'{item}' is not METRIC:MS (e.g. ttft:500)"))
        })?;
        let ms: f64 =
            v.parse().ok().filter(|x: &f64| *x > 0.0 && x.is_finite()).ok_or_else(|| {
                bad("--goodput", format!("'{v}' in '{item}' is not a positive number of ms"))
            })?;
        match k {
            "ttft" => slo.ttft_ms = Some(ms),
            "tpot" => slo.tpot_ms = Some(ms),
            "e2el" => slo.e2el_ms = Some(ms),
            _ => {
                return Err(bad(
                    "--goodput",
                    format!("unknown metric '{k}': use ttft, tpot or e2el"),
                ))
            }
        }
    }
    Ok(Some(slo))
}

/// `50,90,95,99` → percentiles in (0, 100].
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, SettingsError> {
    s.split(',')
        .map(|p| {
            p.trim().parse::<f64>().ok().filter(|v| *v > 0.0 && *v <= 100.0).ok_or_else(|| {
                bad("--metric-percentiles", format!("'{p}' is not a percentile in (0, 100]"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_burstiness() {
        assert_eq!(parse_rate("inf").unwrap(), None);
        assert_eq!(parse_rate("2.5").unwrap(), Some(2.5));
        let e = parse_rate("0").unwrap_err().to_string();
        assert_eq!(e, "--request-rate: expected a positive number or 'inf' (got '0')");
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn goodput_syntax() {
        let slo = parse_goodput(&["ttft:500".into(), "tpot:50".into()]).unwrap().unwrap();
        assert_eq!((slo.ttft_ms, slo.tpot_ms, slo.e2el_ms), (Some(500.0), Some(50.0), None));
        assert_eq!(parse_goodput(&[]).unwrap(), None);
        let e = parse_goodput(&["itl:5".into()]).unwrap_err().to_string();
        assert_eq!(e, "--goodput: unknown metric 'itl': use ttft, tpot or e2el");
        assert!(parse_goodput(&["ttft".into()]).is_err());
        assert!(parse_goodput(&["ttft:-1".into()]).is_err());
    }

    #[test]
    fn percentiles() {
        assert_eq!(parse_percentiles("50, 99.9").unwrap(), vec![50.0, 99.9]);
        assert!(parse_percentiles("0").is_err());
        assert!(parse_percentiles("101").is_err());
    }
}
