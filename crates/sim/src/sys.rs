//! The OS call that needs `unsafe`, in one small function.

/// Raise the soft RLIMIT_NOFILE to the hard limit so one process can hold thousands of
/// sockets. Returns the new soft limit.
#[allow(unsafe_code)]
pub fn raise_nofile_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit struct for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit struct read by the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every platform
    Ok(lim.rlim_cur as u64)
}
