//! Reads the GPUs' telemetry while a run goes on (`--gpu-metrics`): from a DCGM exporter's
//! Prometheus endpoint, or from NVIDIA's management library on this machine, so a run can
//! say what its tokens cost in joules and dollars.
//!
//! Like the engine's `/metrics` scraper ([`crate::scrape`]) it runs on its own task at a low
//! frequency (a reading a second by default), each reading bounded by a timeout and parsed
//! off the measuring path; the measuring loop never waits for it.
//!
//! DCGM's names and units are those of its `etc/default-counters.csv`: power in W, energy
//! since the driver loaded in mJ (a counter), utilisation in %, frame-buffer memory in MiB,
//! clocks in MHz. Its labels: `gpu` (the index), `UUID`, `modelName`, and `hostname`
//! (`Hostname` before dcgm-exporter 4.5).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use servelab_records::{GpuReading, GpuScrape, GpuSource};

use crate::http::{self, Target};
use crate::periodic::{ms_since, Periodic};
use crate::prom;

/// How long one reading may take before it counts as failed.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The DCGM exporter's field names servelab reads.
pub mod names {
    /// Power draw, W (gauge).
    pub const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
    /// Energy since the driver loaded, mJ (counter).
    pub const ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
    /// Utilisation, % (gauge).
    pub const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
    /// Frame-buffer memory used, MiB (gauge).
    pub const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
    /// Frame-buffer memory free, MiB (gauge).
    pub const FB_FREE: &str = "DCGM_FI_DEV_FB_FREE";
    /// SM clock, MHz (gauge).
    pub const SM_CLOCK: &str = "DCGM_FI_DEV_SM_CLOCK";
    /// Memory clock, MHz (gauge).
    pub const MEM_CLOCK: &str = "DCGM_FI_DEV_MEM_CLOCK";
}

/// Why the GPUs' telemetry cannot be read; each names `--gpu-metrics` and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuError {
    /// The exporter URL does not parse.
    #[error("--gpu-metrics '{0}': expected a DCGM exporter's URL such as http://HOST:9400/metrics, or nvml")]
    Url(String),
    /// The exporter did not answer with GPU series.
    #[error(
        "--gpu-metrics {url}: {message}; check that dcgm-exporter runs there (its default \
         port is 9400), or leave --gpu-metrics out"
    )]
    Unreachable {
        /// The exporter's URL.
        url: String,
        /// What happened.
        message: String,
    },
    /// NVIDIA's management library did not load or answer.
    #[error(
        "--gpu-metrics nvml: NVIDIA's management library cannot be used here ({0}); on a \
         machine without NVIDIA's driver, read a DCGM exporter instead \
         (--gpu-metrics http://HOST:9400/metrics)"
    )]
    Nvml(String),
}

/// The GPUs of one DCGM exporter answer, in host and index order. Series without a `gpu`
/// label are left out; of repeated series of one GPU (MIG instances repeat the device's),
/// the first is kept. Non-finite values are dropped.
pub fn dcgm_readings(text: &str) -> Vec<GpuReading> {
    let mut gpus: BTreeMap<(String, u64, String), GpuReading> = BTreeMap::new();
    for s in prom::parse(text) {
        let field: fn(&mut GpuReading) -> &mut Option<f64> = match s.name.as_str() {
            names::POWER => |g| &mut g.power_w,
            names::ENERGY => |g| &mut g.energy_mj,
            names::UTIL => |g| &mut g.util_pct,
            names::FB_USED => |g| &mut g.fb_used_mib,
            names::FB_FREE => |g| &mut g.fb_free_mib,
            names::SM_CLOCK => |g| &mut g.sm_clock_mhz,
            names::MEM_CLOCK => |g| &mut g.mem_clock_mhz,
            _ => continue,
        };
        let label = |keys: &[&str]| {
            keys.iter().find_map(|k| s.labels.iter().find(|(n, _)| n == k)).map(|(_, v)| v.clone())
        };
        let Some(gpu) = label(&["gpu"]) else { continue };
        if !s.value.is_finite() {
            continue;
        }
        let host = label(&["hostname", "Hostname"]);
        let key = (host.clone().unwrap_or_default(), gpu.parse().unwrap_or(u64::MAX), gpu.clone());
        let g = gpus.entry(key).or_insert_with(|| GpuReading {
            gpu,
            uuid: label(&["UUID", "uuid", "gpu_uuid"]),
            model: label(&["modelName", "model_name"]),
            host,
            ..GpuReading::default()
        });
        field(g).get_or_insert(s.value);
    }
    gpus.into_values().collect()
}

/// `http://host:port/path` split into the base URL and the path (`/metrics` when none).
fn split_url(url: &str) -> Option<(&str, &str)> {
    let after = url.find("://")? + 3;
    match url[after..].find('/') {
        Some(i) if url.len() > after + i + 1 => Some((&url[..after + i], &url[after + i..])),
        Some(i) => Some((&url[..after + i], "/metrics")),
        None => Some((url, "/metrics")),
    }
}

/// Where readings come from, opened once.
#[derive(Clone)]
enum Reader {
    /// The exporter, its metrics path as the target's path.
    Dcgm(Target),
    #[cfg(feature = "nvml")]
    Nvml(std::sync::Arc<nvml_wrapper::Nvml>),
}

impl Reader {
    async fn open(source: &GpuSource) -> Result<Reader, GpuError> {
        match source {
            GpuSource::Dcgm(url) => {
                let (base, path) =
                    split_url(url).ok_or_else(|| GpuError::Url(http::redact_url(url)))?;
                let target = Target::resolve(base, path).await.map_err(|e| {
                    GpuError::Unreachable { url: http::redact_url(url), message: e.to_string() }
                })?;
                Ok(Reader::Dcgm(target))
            }
            GpuSource::Nvml => open_nvml().await,
        }
    }

    async fn read(&self) -> Result<Vec<GpuReading>, String> {
        match self {
            Reader::Dcgm(target) => read_dcgm(target).await,
            #[cfg(feature = "nvml")]
            Reader::Nvml(nvml) => {
                let nvml = nvml.clone();
                tokio::task::spawn_blocking(move || nvml_readings(&nvml))
                    .await
                    .map_err(|e| format!("reading NVML: {e}"))?
            }
        }
    }
}

async fn read_dcgm(target: &Target) -> Result<Vec<GpuReading>, String> {
    let path = &target.path;
    let gpus = http::get_parsed(target, path, READ_TIMEOUT, dcgm_readings).await?;
    if gpus.is_empty() {
        return Err(format!("GET {path} has no DCGM_FI_DEV_* series with a gpu label"));
    }
    Ok(gpus)
}

#[cfg(feature = "nvml")]
async fn open_nvml() -> Result<Reader, GpuError> {
    // Loading the library and initialising it can take a while on a busy driver.
    let nvml = tokio::task::spawn_blocking(nvml_wrapper::Nvml::init)
        .await
        .map_err(|e| GpuError::Nvml(e.to_string()))?
        .map_err(|e| GpuError::Nvml(e.to_string()))?;
    Ok(Reader::Nvml(std::sync::Arc::new(nvml)))
}

#[cfg(not(feature = "nvml"))]
async fn open_nvml() -> Result<Reader, GpuError> {
    Err(GpuError::Nvml("this servelab was built without its `nvml` feature".into()))
}

/// Every GPU NVML sees, in DCGM's units.
#[cfg(feature = "nvml")]
fn nvml_readings(nvml: &nvml_wrapper::Nvml) -> Result<Vec<GpuReading>, String> {
    use nvml_wrapper::enum_wrappers::device::Clock;
    let count = nvml.device_count().map_err(|e| format!("NVML device count: {e}"))?;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(|e| format!("NVML device {i}: {e}"))?;
        let memory = d.memory_info().ok();
        out.push(GpuReading {
            gpu: i.to_string(),
            uuid: d.uuid().ok(),
            model: d.name().ok(),
            host: None,
            power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1e3),
            energy_mj: d.total_energy_consumption().ok().map(|mj| mj as f64),
            util_pct: d.utilization_rates().ok().map(|u| f64::from(u.gpu)),
            fb_used_mib: memory.as_ref().map(|m| mib(m.used)),
            fb_free_mib: memory.as_ref().map(|m| mib(m.free)),
            sm_clock_mhz: d.clock_info(Clock::SM).ok().map(f64::from),
            mem_clock_mhz: d.clock_info(Clock::Memory).ok().map(f64::from),
        });
    }
    Ok(out)
}

/// A running GPU telemetry reader; [`GpuScraper::finish`] takes the last reading and returns
/// them all.
pub struct GpuScraper {
    periodic: Periodic<Result<Vec<GpuReading>, String>>,
}

impl std::fmt::Debug for GpuScraper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuScraper").finish_non_exhaustive()
    }
}

impl GpuScraper {
    /// Open `source` and read it once; if that gives GPUs, keep reading every `every` until
    /// [`GpuScraper::finish`]. An error when the first reading fails: the user asked for the
    /// telemetry, and a run without it would not say so until its end.
    pub async fn start(source: &GpuSource, every: Duration) -> Result<GpuScraper, GpuError> {
        let reader = Reader::open(source).await?;
        let first = reader.read().await.map_err(|message| match source {
            GpuSource::Nvml => GpuError::Nvml(message),
            GpuSource::Dcgm(url) => GpuError::Unreachable { url: http::redact_url(url), message },
        })?;
        let periodic = Periodic::spawn((Instant::now(), Ok(first)), every, None, move || {
            let reader = reader.clone();
            async move { reader.read().await }
        });
        Ok(GpuScraper { periodic })
    }

    /// Take one last reading, stop, and return every reading with its time relative to
    /// `origin` (the run's), in order.
    pub async fn finish(self, origin: Instant) -> Vec<GpuScrape> {
        let taken = self.periodic.finish().await;
        taken
            .into_iter()
            .map(|(at, got)| {
                let t_ms = ms_since(at, origin);
                match got {
                    Ok(gpus) => GpuScrape { t_ms, gpus, error: None },
                    Err(e) => GpuScrape { t_ms, gpus: Vec::new(), error: Some(e) },
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two GPUs as dcgm-exporter 4.x writes them, with a MIG instance repeating GPU 1's
    /// power, a series of another field, and a NaN.
    const TEXT: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-b",pci_bus_id="00000000:1A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",hostname="node-a",DCGM_FI_DRIVER_VERSION="570.124.06"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="node-a",DCGM_FI_DRIVER_VERSION="570.124.06"} 1755
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="node-a"} 412.375000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",pci_bus_id="00000000:1A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",hostname="node-a"} 98.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",pci_bus_id="00000000:1A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="2",hostname="node-a"} 98.5
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",hostname="node-a"} 8123456789
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",hostname="node-a"} NaN
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",hostname="node-a"} 54
DCGM_FI_DEV_FB_USED{UUID="GPU-x"} 7
"#;

    #[test]
    fn reads_each_gpu_once_in_index_order() {
        let g = dcgm_readings(TEXT);
        assert_eq!(g.len(), 2);
        assert_eq!(
            g[0],
            GpuReading {
                gpu: "0".into(),
                uuid: Some("GPU-a".into()),
                model: Some("NVIDIA H100 80GB HBM3".into()),
                host: Some("node-a".into()),
                power_w: Some(412.375),
                energy_mj: Some(8_123_456_789.0),
                sm_clock_mhz: Some(1755.0),
                ..GpuReading::default()
            }
        );
        assert_eq!((g[1].gpu.as_str(), g[1].power_w, g[1].energy_mj), ("1", Some(98.5), None));
        assert_eq!(g[1].id(), "node-a/GPU-b");
        assert!(dcgm_readings("vllm:num_requests_running 3\n").is_empty());
    }

    #[test]
    fn older_exporters_write_hostname_capitalised() {
        let g =
            dcgm_readings("DCGM_FI_DEV_POWER_USAGE{gpu=\"3\",UUID=\"GPU-c\",Hostname=\"h\"} 70\n");
        assert_eq!((g[0].host.as_deref(), g[0].power_w), (Some("h"), Some(70.0)));
    }

    #[test]
    fn splits_the_exporter_url() {
        assert_eq!(split_url("http://h:9400/metrics"), Some(("http://h:9400", "/metrics")));
        assert_eq!(split_url("http://h:9400"), Some(("http://h:9400", "/metrics")));
        assert_eq!(split_url("http://h:9400/"), Some(("http://h:9400", "/metrics")));
        assert_eq!(split_url("http://h/dcgm/metrics"), Some(("http://h", "/dcgm/metrics")));
        assert_eq!(split_url("h:9400"), None);
    }
}
