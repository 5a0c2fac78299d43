//! GPU telemetry read while a run goes on: where it comes from ([`GpuSource`]) and what one
//! reading holds ([`GpuScrape`], one [`GpuReading`] per GPU). The figures a run reports from
//! them (energy, watts, cost) are computed in `servelab-metrics`.
//!
//! Units are those of NVIDIA's DCGM exporter (`etc/default-counters.csv`): power in W, energy
//! in mJ since the driver loaded (a counter), utilisation in %, frame-buffer memory in MiB,
//! clocks in MHz. NVML's readings are converted to them.

use serde::{Deserialize, Serialize};

/// Where a run reads its GPUs' telemetry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSource {
    /// A DCGM exporter's Prometheus endpoint, e.g. `http://gpu-node:9400/metrics`.
    Dcgm(String),
    /// NVIDIA's management library on this machine (`libnvidia-ml`, loaded at run time).
    Nvml,
}

impl GpuSource {
    /// `nvml`, or the exporter's URL.
    pub fn label(&self) -> &str {
        match self {
            GpuSource::Dcgm(url) => url,
            GpuSource::Nvml => "nvml",
        }
    }
}

/// One GPU in one scrape. A figure the source does not give is `None`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuReading {
    /// The GPU's index on its host (DCGM's `gpu` label).
    pub gpu: String,
    /// Its UUID (`GPU-…`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Its model name (`NVIDIA H100 80GB HBM3`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The host it is on, when known (several exporters may be scraped as one run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Power draw, W (`DCGM_FI_DEV_POWER_USAGE`).
    pub power_w: Option<f64>,
    /// Energy since the driver loaded, mJ (`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, a counter).
    pub energy_mj: Option<f64>,
    /// Utilisation, % (`DCGM_FI_DEV_GPU_UTIL`).
    pub util_pct: Option<f64>,
    /// Frame-buffer memory used, MiB (`DCGM_FI_DEV_FB_USED`).
    pub fb_used_mib: Option<f64>,
    /// Frame-buffer memory free, MiB (`DCGM_FI_DEV_FB_FREE`).
    pub fb_free_mib: Option<f64>,
    /// SM clock, MHz (`DCGM_FI_DEV_SM_CLOCK`).
    pub sm_clock_mhz: Option<f64>,
    /// Memory clock, MHz (`DCGM_FI_DEV_MEM_CLOCK`).
    pub mem_clock_mhz: Option<f64>,
}

impl GpuReading {
    /// Who the GPU is across scrapes: its host and UUID, else its host and index.
    pub fn id(&self) -> String {
        let who = self.uuid.as_deref().unwrap_or(&self.gpu);
        match &self.host {
            Some(h) => format!("{h}/{who}"),
            None => who.to_string(),
        }
    }
}

/// One scrape of the GPUs' telemetry, taken while a run went on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuScrape {
    /// Milliseconds since the run origin; negative for scrapes taken before it.
    pub t_ms: f64,
    /// One reading per GPU; empty when the scrape failed.
    pub gpus: Vec<GpuReading>,
    /// Why the scrape failed (no answer, an HTTP status, no GPU series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
