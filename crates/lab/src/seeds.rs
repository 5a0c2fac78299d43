//! Which prompts each run sends, so that a prefix cache gets no credit it did not earn.
//!
//! Two profiles drawing random prompts from one seed share them: a 1,000-token prompt is an
//! exact prefix of the 1,024-token prompt drawn from the same seed. A trial runs its profiles
//! one after another on one engine, so with one seed everywhere the second profile is served
//! from the first one's cache, and an option that turns the cache on looks faster for it.
//! So every run of every profile gets a seed of its own, derived from the lab's seed, the
//! profile's name and the run number: the same in every trial (trials stay comparable), and
//! different between profiles and between repeats. A profile that sets `seed` keeps it (run
//! *k* adds *k*); one with `shared_prefixes: true` draws from the lab's seed itself, so such
//! profiles share prompts on purpose.

use crate::error::{invalid, LabError};
use crate::profile::{ArgValue, ProfileSpec};

/// The lab's seed when the experiment file gives none.
pub const DEFAULT_LAB_SEED: u64 = 42;

/// Above this prefix-cache hit rate, a profile that does not reuse prefixes by design was
/// served from prompts it should not have seen: a gain there is not credited. Random prompts
/// drawn from distinct seeds share no 16-token block, so an honest run sits near 0.
pub const REUSE_BAR: f64 = 0.05;

/// FNV-1a, 64 bits: stable across Rust releases, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's finaliser: spreads nearby inputs over the whole range.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed a profile sets itself, if any.
fn own_seed(p: &ProfileSpec) -> Option<u64> {
    match p.get("seed") {
        Some(ArgValue::Value(s)) => s.parse().ok(),
        _ => None,
    }
}

/// The seed of run `repeat` (from 0) of profile `p` in a lab seeded with `lab_seed`.
pub fn run_seed(lab_seed: u64, p: &ProfileSpec, repeat: u32) -> u64 {
    if let Some(s) = own_seed(p) {
        return s.wrapping_add(u64::from(repeat));
    }
    if p.shared_prefixes {
        return lab_seed.wrapping_add(u64::from(repeat));
    }
    let h = fnv1a(p.name.as_bytes(), 0xcbf2_9ce4_8422_2325 ^ mix(lab_seed));
    // 53 bits: result files and the store write the seed as a JSON number, which a reader
    // that holds numbers as doubles (JavaScript, jq) keeps exactly only up to 2^53.
    mix(h ^ mix(u64::from(repeat).wrapping_add(1))) & ((1 << 53) - 1)
}

/// Whether a profile's own workload reuses prefixes within one run (shared-prefix datasets,
/// multi-turn sessions resending their history, traces with equal hash ids, chat requests
/// whose template puts one system prompt before every message), or it asks to share prompts
/// with other profiles: its prefix-cache hits are earned.
pub fn reuses_prefixes(p: &ProfileSpec) -> bool {
    let value = |k: &str| match p.get(k) {
        Some(ArgValue::Value(v)) => Some(v.as_str()),
        _ => None,
    };
    p.shared_prefixes
        || value("backend").is_some_and(|b| b.ends_with("-chat"))
        || matches!(value("dataset_name"), Some("prefix" | "sessions" | "mooncake" | "random-mm"))
        || value("random_prefix_len").is_some_and(|v| v.parse::<u64>().is_ok_and(|n| n > 0))
}

/// Whether a bench of profile `p` warms up with prompts of its own (drawn from a seed derived
/// from the run's, `servelab_workload`'s `WARMUP_SEED`): the datasets drawn from a seed. A
/// JSONL or Hugging Face file, sessions and traces warm up with the run's own first prompts.
fn warms_up_on_its_own_prompts(p: &ProfileSpec) -> bool {
    match p.get("dataset_name") {
        None => true,
        Some(ArgValue::Value(v)) => {
            matches!(v.as_str(), "random" | "prefix" | "random-mm" | "sharegpt")
        }
        Some(_) => false,
    }
}

/// Refuse what would make profiles or repeats share prompts without asking: two profiles
/// whose own seeds meet within `repeats` runs, and warm-ups that resend the run's own first
/// prompts (datasets not drawn from a seed), which a prefix cache would then serve.
pub fn check(profiles: &[ProfileSpec], repeats: u32) -> Result<(), LabError> {
    let runs = u64::from(repeats.max(1));
    for (i, p) in profiles.iter().enumerate() {
        let warm = match p.get("num_warmups") {
            Some(ArgValue::Value(v)) => v.parse::<u64>().map_or(true, |n| n > 0),
            _ => false,
        };
        if warm && !p.shared_prefixes && !warms_up_on_its_own_prompts(p) {
            return Err(invalid(
                format!("profiles[{i}].num_warmups"),
                "with this dataset a bench's warm-ups resend the run's own first prompts \
                 (only random, prefix, random-mm and sharegpt draw warm-up prompts of their \
                 own), which a prefix cache then serves, so the lab would credit the cache \
                 with them: leave num_warmups out (each trial starts on a fresh engine, and \
                 the report says which runs came after others), or set shared_prefixes: true \
                 to measure that on purpose",
            ));
        }
        let Some(s) = own_seed(p) else { continue };
        if p.shared_prefixes {
            continue;
        }
        for (j, q) in profiles[..i].iter().enumerate() {
            let Some(t) = own_seed(q).filter(|_| !q.shared_prefixes) else { continue };
            if s.abs_diff(t) < runs {
                return Err(invalid(
                    format!("profiles[{i}].seed"),
                    format!(
                        "profile '{}' (seed {s}) and profiles[{j}] '{}' (seed {t}) would \
                         draw the same prompts within {runs} run(s) each (run k uses seed + \
                         k), and a prefix cache would serve one from the other: leave seed \
                         out (the lab derives one per profile), or set shared_prefixes: true \
                         on both",
                        p.name, q.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str, options: &[(&str, &str)], shared: bool) -> ProfileSpec {
        ProfileSpec {
            name: name.to_string(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), ArgValue::Value(v.to_string())))
                .collect(),
            shared_prefixes: shared,
        }
    }

    #[test]
    fn derived_seeds_are_fixed_and_differ_by_profile_and_run() {
        let t = profile("throughput", &[], false);
        let g = profile("generation-heavy", &[], false);
        // Exact values: a change here changes every lab's prompts.
        assert_eq!(run_seed(42, &t, 0), 0x000a_74be_28b0_a953);
        assert_eq!(run_seed(42, &t, 1), 0x0000_6744_4a61_bfd7);
        assert_eq!(run_seed(42, &g, 0), 0x001e_3b8e_4c16_3971);
        let mut all: Vec<u64> = (0..4)
            .flat_map(|k| [run_seed(42, &t, k), run_seed(42, &g, k), run_seed(7, &t, k)])
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12, "every profile, run and lab seed draws its own prompts");
        assert!(all.iter().all(|s| *s < 1 << 53), "exact as a JSON number read as a double");
    }

    #[test]
    fn own_and_shared_seeds_are_kept() {
        assert_eq!(run_seed(42, &profile("a", &[("seed", "1")], false), 2), 3);
        assert_eq!(run_seed(42, &profile("a", &[], true), 0), 42);
        assert_eq!(run_seed(42, &profile("b", &[], true), 1), 43);
    }

    #[test]
    fn reuse_by_design() {
        assert!(!reuses_prefixes(&profile("a", &[("dataset_name", "random")], false)));
        assert!(reuses_prefixes(&profile("a", &[("dataset_name", "prefix")], false)));
        assert!(reuses_prefixes(&profile("a", &[("dataset_name", "sessions")], false)));
        assert!(reuses_prefixes(&profile("a", &[("random_prefix_len", "64")], false)));
        assert!(!reuses_prefixes(&profile("a", &[("random_prefix_len", "0")], false)));
        assert!(reuses_prefixes(&profile("a", &[], true)));
        assert!(reuses_prefixes(&profile("a", &[("backend", "openai-chat")], false)));
        assert!(!reuses_prefixes(&profile("a", &[("backend", "vllm")], false)));
    }

    #[test]
    fn colliding_own_seeds_and_warmups_are_refused() {
        let a = profile("a", &[("seed", "1")], false);
        let b = profile("b", &[("seed", "2")], false);
        assert!(check(&[a.clone(), b.clone()], 1).is_ok());
        let e = check(&[a.clone(), b.clone()], 2).unwrap_err().to_string();
        assert!(e.starts_with("profiles[1].seed: profile 'b' (seed 2) and profiles[0] 'a'"), "{e}");
        let same = profile("c", &[("seed", "1")], false);
        assert!(check(&[a.clone(), same], 1).is_err());
        let shared = profile("c", &[("seed", "1")], true);
        assert!(check(&[a, shared], 1).is_ok());
        // Warm-ups of a dataset drawn from a seed use prompts of their own (issue 25): allowed.
        assert!(check(&[profile("w", &[("num_warmups", "4")], false)], 1).is_ok());
        for d in ["random", "prefix", "random-mm", "sharegpt"] {
            let warm = profile("w", &[("num_warmups", "4"), ("dataset_name", d)], false);
            assert!(check(&[warm], 1).is_ok(), "{d}");
        }
        // A file's lines, sessions and traces: the warm-ups resend the first ones.
        for d in ["jsonl", "sessions", "mooncake", "hf"] {
            let warm = profile("w", &[("num_warmups", "4"), ("dataset_name", d)], false);
            let e = check(&[warm], 1).unwrap_err().to_string();
            assert!(e.starts_with("profiles[0].num_warmups: with this dataset"), "{d}: {e}");
            let shared = profile("w", &[("num_warmups", "4"), ("dataset_name", d)], true);
            assert!(check(&[shared], 1).is_ok(), "{d}");
        }
        let none = profile("w", &[("num_warmups", "0"), ("dataset_name", "jsonl")], false);
        assert!(check(&[none], 1).is_ok());
    }
}
