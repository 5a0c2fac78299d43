//! Seeded hostile inputs for the property tests of every parser of user files (included by
//! the test crates with `#[path]`; only `rand`, which the workspace builds anyway).
//!
//! `SERVELAB_PROPERTY_SCALE` multiplies the case counts; `SERVELAB_PROPERTY_SEED` changes
//! the seed. A failure names its seed and case, so it replays exactly.

/// The seeded generator: `rand`'s small RNG, the same sequence for a seed on every run.
pub struct Rng(rand::rngs::SmallRng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(rand::SeedableRng::seed_from_u64(seed))
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        rand::Rng::random_range(&mut self.0, 0..n)
    }
}

/// `(cases, seed)`: `base` cases times `SERVELAB_PROPERTY_SCALE`, and the seed.
pub fn cases(base: usize) -> (usize, u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let scale = env("SERVELAB_PROPERTY_SCALE").unwrap_or(1).max(1) as usize;
    (base * scale, env("SERVELAB_PROPERTY_SEED").unwrap_or(0x5EED))
}

/// Bytes that matter to JSON, CSV and YAML parsers, and numbers that matter to loaders.
const ALPHABET: &[u8] = b"{}[]\":,\n\r\t -+.eE0123456789aAzZ#'|>&*!\\/\x00\xff\xc3";
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-1e308",
    "NaN",
    "Infinity",
    "18446744073709551615",
    "4294967296",
    "99999999999",
    "1.5",
    "\"12\"",
    "null",
    "true",
    "[]",
    "{}",
];

/// Case `i` of hostile input derived from `seed`: every 10th is random bytes, the rest are
/// `seed` with a few random edits (byte flips, structural bytes, cut or doubled spans, a
/// number swapped for an extreme one).
pub fn mutate(rng: &mut Rng, seed: &[u8], i: usize) -> Vec<u8> {
    if i % 10 == 0 {
        let n = rng.below(512);
        return (0..n).map(|_| ALPHABET[rng.below(ALPHABET.len())]).collect();
    }
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            b.push(ALPHABET[rng.below(ALPHABET.len())]);
            continue;
        }
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = ALPHABET[rng.below(ALPHABET.len())],
            2 => {
                let end = (at + rng.below(64)).min(b.len());
                b.drain(at..end);
            }
            3 => {
                let end = (at + rng.below(64)).min(b.len());
                let span = b[at..end].to_vec();
                b.splice(at..at, span);
            }
            4 => b.truncate(at),
            _ => {
                // Replace the number starting at or after `at` with an extreme one.
                if let Some(start) = b[at..].iter().position(u8::is_ascii_digit).map(|p| at + p) {
                    let len = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
                    let n = NUMBERS[rng.below(NUMBERS.len())].as_bytes().to_vec();
                    b.splice(start..start + len, n);
                }
            }
        }
    }
    b
}

/// Runs `accept` on `cases(base)` hostile texts derived from `seeds` in turn and prints the
/// target's line for `scripts/fuzz.sh`. A panic fails with the seed and the case's input.
#[allow(dead_code)] // not every including test crate parses text
pub fn hostile_texts(target: &str, seeds: &[Vec<u8>], base: usize, accept: impl Fn(&str) -> bool) {
    let (n, seed) = cases(base);
    let mut rng = Rng::new(seed);
    let mut accepted = 0;
    for i in 0..n {
        let bytes = mutate(&mut rng, &seeds[i % seeds.len()], i);
        let text = String::from_utf8_lossy(&bytes);
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| accept(&text)))
            .unwrap_or_else(|_| {
                panic!("{target}: panic on case {i} (seed {seed}); input:\n{text}")
            });
        accepted += usize::from(ok);
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "{target}: {n} executions, 0 crashes ({accepted} accepted, {} refused)",
            n - accepted
        );
    }
}
