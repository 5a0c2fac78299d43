//! Reading a file no larger than a stated limit: an endless one (`/dev/zero`, a pipe that
//! never closes) is refused at the limit instead of filling memory.

/// Read at most `limit` bytes of `path`; more is an error naming the limit.
pub fn read_bounded(path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "larger than the {} MiB servelab reads (an endless file, like /dev/zero?)",
            limit >> 20
        )));
    }
    Ok(bytes)
}
