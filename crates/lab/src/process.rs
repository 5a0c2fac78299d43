//! Engine processes: each launch is its own process group (so `sh -c`, `docker run` or a
//! server with worker processes is stopped as a whole), its output goes to a log file, and
//! a guard kills the group on every exit path: a normal stop (SIGTERM, then SIGKILL after a
//! grace period), an error, an interrupt, or a panic (the guard's `Drop`).
//!
//! A lab killed with SIGKILL runs none of that, so each group also has a watchdog: a process
//! forked before the engine's shell execs, outside the group, blocked reading a pipe whose
//! only write end the lab holds. The kernel closes it when the lab dies, however it dies;
//! the watchdog then SIGKILLs the group. A lab that stops the engine itself writes a byte
//! first, and the watchdog leaves quietly. (`PR_SET_PDEATHSIG` would reach only the shell,
//! not the engine it starts, and fires when the spawning *thread* exits, which a tokio
//! blocking thread does after 10 s idle.)

use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// A running engine; dropping it kills its whole process group.
#[derive(Debug)]
pub struct EngineProcess {
    child: Child,
    pgid: i32,
    /// Set once the group has been stopped and the leader reaped.
    stopped: bool,
    /// The write end of the watchdog's pipe (see the module's docs); `None` once released.
    watchdog: Option<OwnedFd>,
}

/// The libc calls this module needs.
enum Sys {
    /// `killpg(pgid, sig)`.
    KillGroup(i32, i32),
    /// `atexit(handler)`.
    AtExit(extern "C" fn()),
    /// `pipe2(fds, O_CLOEXEC)`: (read end, write end).
    Pipe,
}

/// The one place with `unsafe` besides [`watchdog_hook`]: plain libc calls with integer or
/// function-pointer arguments.
#[allow(unsafe_code)]
fn sys(call: Sys) -> std::io::Result<i32> {
    let ret = match call {
        // SAFETY: killpg takes two integers and reads no memory of ours; callers pass only
        // groups we created with process_group(0) (checked > 1 by signal_group).
        Sys::KillGroup(pgid, sig) => unsafe { libc::killpg(pgid, sig) },
        // SAFETY: registers a function with no captured state; it runs at exit and only
        // calls try_lock and killpg.
        Sys::AtExit(f) => unsafe { libc::atexit(f) },
        Sys::Pipe => {
            let mut fds = [-1; 2];
            // SAFETY: pipe2 writes two ints into the array we pass, which outlives the call.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            return Ok(fds[0] << 16 | fds[1]);
        }
    };
    if ret == 0 {
        Ok(0)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A pipe whose ends close on exec: (read end, write end).
#[allow(unsafe_code)]
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let both = sys(Sys::Pipe)?;
    let (r, w) = (both >> 16, both & 0xffff);
    // SAFETY: pipe2 just returned these two descriptors, open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) })
}

/// Runs in the engine's shell between fork and exec (after `process_group(0)` made it a
/// group leader): forks the watchdog, which leaves the group, closes every descriptor but
/// the pipe's read end (it must not hold the lab's sockets or files, nor the write end), and
/// waits. A byte read: the lab stopped the engine itself, nothing to do. End of file: the
/// lab is gone, SIGKILL the group. Only async-signal-safe calls (fork, setpgid, close, read,
/// killpg, _exit): the lab is multithreaded, so nothing may allocate or lock here.
#[allow(unsafe_code)]
fn watchdog_hook(read_end: i32) -> std::io::Result<()> {
    // SAFETY: every call below is async-signal-safe and touches only integers and a
    // one-byte stack buffer; the forked watchdog never returns (it ends in _exit).
    unsafe {
        let group = libc::getpgrp();
        match libc::fork() {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                libc::setpgid(0, 0);
                // close_range(2) (Linux 5.9): everything below and above the read end.
                let below = if read_end > 0 {
                    libc::syscall(libc::SYS_close_range, 0u32, (read_end - 1) as u32, 0u32)
                } else {
                    0
                };
                let above =
                    libc::syscall(libc::SYS_close_range, (read_end + 1) as u32, u32::MAX, 0u32);
                if below != 0 || above != 0 {
                    for fd in (0..65_536).filter(|&fd| fd != read_end) {
                        libc::close(fd);
                    }
                }
                let mut byte = 0u8;
                loop {
                    let n = libc::read(read_end, (&raw mut byte).cast(), 1);
                    if n == 0 && group > 1 {
                        libc::killpg(group, libc::SIGKILL);
                    }
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        libc::_exit(0);
                    }
                }
            }
            _ => Ok(()),
        }
    }
}

/// Send `sig` to every process of group `pgid`. `Err` with ESRCH means the group is empty.
fn signal_group(pgid: i32, sig: i32) -> std::io::Result<()> {
    if pgid <= 1 {
        // Never signal group 0 (our own) or 1 (init's): only groups we created.
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    sys(Sys::KillGroup(pgid, sig)).map(|_| ())
}

/// Groups of engines not yet stopped. `std::process::exit` (a second Ctrl-C) runs no
/// destructors, but it does run atexit handlers: the handler kills these groups.
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

extern "C" fn kill_live_groups() {
    // try_lock: never wait at exit on a thread that was stopped holding the lock.
    if let Ok(groups) = LIVE.try_lock() {
        for &g in groups.iter() {
            let _ = signal_group(g, libc::SIGKILL);
        }
    }
}

fn register(pgid: i32) {
    AT_EXIT.call_once(|| {
        let _ = sys(Sys::AtExit(kill_live_groups));
    });
    if let Ok(mut g) = LIVE.lock() {
        g.push(pgid);
    }
}

fn unregister(pgid: i32) {
    if let Ok(mut g) = LIVE.lock() {
        g.retain(|&x| x != pgid);
    }
}

/// Whether any live (non-zombie) process is left in group `pgid`. An engine's children
/// that outlive its shell are reparented to init, which may reap them late; a zombie holds
/// no port and no GPU memory, so it does not count. Without /proc, ask the kernel.
fn group_alive(pgid: i32) -> bool {
    match live_members(pgid) {
        Some(n) => n > 0,
        None => match signal_group(pgid, 0) {
            Ok(()) => true,
            // EPERM: something is there that we may not signal; treat it as alive.
            Err(e) => e.raw_os_error() != Some(libc::ESRCH),
        },
    }
}

/// Non-zombie processes of group `pgid`, from /proc (`None` when /proc is unreadable).
fn live_members(pgid: i32) -> Option<usize> {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        if let Some((state, pgrp)) = stat_state_pgrp(&stat) {
            if pgrp == pgid && state != 'Z' && state != 'X' {
                n += 1;
            }
        }
    }
    Some(n)
}

/// State and process group from a `/proc/PID/stat` line (`pid (comm) S ppid pgrp ...`; the
/// command name may hold spaces and parentheses, so parse after the last `)`).
fn stat_state_pgrp(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    Some((state, f.next()?.parse().ok()?))
}

/// Replace `{port}` and `{servelab}` in a template.
pub fn render(template: &str, port: u16, servelab: &str) -> String {
    template.replace("{port}", &port.to_string()).replace("{servelab}", servelab)
}

/// A port that was free a moment ago (bound on 127.0.0.1 and released).
pub fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// How a process ended, in words: `exit code 3` or `signal 9`.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => status.to_string(),
    }
}

impl EngineProcess {
    /// Start `sh -c COMMAND` in a new process group, stdout and stderr appended to `log`.
    pub fn spawn(
        command: &str,
        env: &[(String, String)],
        log: &Path,
    ) -> std::io::Result<EngineProcess> {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let (read_end, write_end) = pipe()?;
        let r = read_end.as_raw_fd();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(command)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        #[allow(unsafe_code)]
        // SAFETY: the hook makes only async-signal-safe calls (see watchdog_hook).
        unsafe {
            cmd.pre_exec(move || watchdog_hook(r));
        }
        let spawned = cmd.spawn();
        // The watchdog has its copy; ours would keep the pipe open after the lab dies.
        drop(read_end);
        let mut watchdog = Some(write_end);
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                // A watchdog may have been forked before exec failed: let it go quietly.
                release(&mut watchdog);
                return Err(e);
            }
        };
        let pgid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
        register(pgid);
        Ok(EngineProcess { child, pgid, stopped: false, watchdog })
    }

    /// The leader's exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group; wait up to `grace` for every process of it to exit; then
    /// SIGKILL whatever is left. Returns the leader's status.
    pub async fn stop(mut self, grace: Duration) -> Option<ExitStatus> {
        let _ = signal_group(self.pgid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        let mut status = None;
        loop {
            // Reap the leader as soon as it exits: a zombie still counts as a group member.
            if status.is_none() {
                status = self.exited();
            }
            if status.is_some() && !group_alive(self.pgid) {
                break;
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.kill_now();
        status.or_else(|| self.child.try_wait().ok().flatten())
    }

    /// SIGKILL the group and reap the leader (blocking for at most a moment: SIGKILL cannot
    /// be caught).
    fn kill_now(&mut self) {
        if self.stopped {
            return;
        }
        let _ = signal_group(self.pgid, libc::SIGKILL);
        let _ = self.child.wait();
        // Members that outlive the leader (already killed above) are reparented and reaped
        // by init; signal once more in case one was mid-fork.
        let _ = signal_group(self.pgid, libc::SIGKILL);
        unregister(self.pgid);
        release(&mut self.watchdog);
        self.stopped = true;
    }
}

/// Tell the watchdog the lab stopped the engine itself (a byte), then close the pipe.
fn release(watchdog: &mut Option<OwnedFd>) {
    if let Some(fd) = watchdog.take() {
        let mut f = std::fs::File::from(fd);
        let _ = std::io::Write::write_all(&mut f, b"x");
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// The last `lines` lines of a log file (at most its last 64 KiB), for failure reports.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: i32) -> bool {
        // A reaped or reparented-and-reaped pid has no /proc entry; a zombie says Z.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(s) => !s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')),
            Err(_) => false,
        }
    }

    fn read_pid(path: &Path) -> i32 {
        for _ in 0..200 {
            if let Ok(s) = std::fs::read_to_string(path) {
                if let Ok(p) = s.trim().parse() {
                    return p;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no pid in {}", path.display());
    }

    #[test]
    fn stat_lines_give_state_and_group() {
        assert_eq!(stat_state_pgrp("12 (sh) S 1 12 12 0 -1"), Some(('S', 12)));
        assert_eq!(stat_state_pgrp("13 (a) b (c)) Z 12 7 7 0"), Some(('Z', 7)));
        assert_eq!(stat_state_pgrp("garbage"), None);
        assert_eq!(live_members(i32::MAX), Some(0));
    }

    #[test]
    fn templates_and_statuses() {
        assert_eq!(
            render("{servelab} x --port {port} {port}", 80, "/bin/s"),
            "/bin/s x --port 80 80"
        );
        assert_eq!(describe(ExitStatus::from_raw(3 << 8)), "exit code 3");
        assert_eq!(describe(ExitStatus::from_raw(9)), "signal 9");
        assert!(free_port().unwrap() > 0);
    }

    #[tokio::test]
    async fn stop_ends_the_whole_group_including_a_term_ignoring_child() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // The grandchild ignores SIGTERM: only the SIGKILL after the grace ends it.
        let cmd = format!(
            "echo started; sh -c 'trap \"\" TERM; echo $$ > {}; while true; do sleep 0.05; done' & wait",
            pidfile.display()
        );
        let log = dir.path().join("engine.log");
        let e = EngineProcess::spawn(&cmd, &[], &log).unwrap();
        let pid = read_pid(&pidfile);
        assert!(alive(pid));
        let t0 = Instant::now();
        e.stop(Duration::from_millis(300)).await;
        assert!(t0.elapsed() >= Duration::from_millis(250), "{:?}", t0.elapsed());
        for _ in 0..100 {
            if !alive(pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid), "grandchild {pid} survived");
        assert_eq!(log_tail(&log, 5), "started");
    }

    #[test]
    fn dropping_the_guard_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let e =
            EngineProcess::spawn(&cmd, &[("X".into(), "1".into())], &dir.path().join("l")).unwrap();
        let pid = read_pid(&pidfile);
        assert!(alive(pid));
        drop(e);
        for _ in 0..100 {
            if !alive(pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(pid), "sleep {pid} survived the guard");
    }

    /// The lab dying (its end of the pipe closed without the byte, as the kernel closes it
    /// for a SIGKILLed lab) takes the whole group down: the shell and what it started.
    #[test]
    fn the_watchdog_kills_the_group_when_the_lab_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let mut e = EngineProcess::spawn(&cmd, &[], &dir.path().join("l")).unwrap();
        let pid = read_pid(&pidfile);
        let shell = e.pgid;
        let w = watchdog_of(shell).expect("every engine has a watchdog");
        assert!(alive(pid) && alive(shell) && alive(w));
        // What the kernel does for a dead lab: close the write end, no byte.
        drop(e.watchdog.take());
        let t0 = Instant::now();
        while (alive(pid) || e.exited().is_none()) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(pid), "sleep {pid} outlived the lab's pipe");
        assert_eq!(e.exited().map(describe).as_deref(), Some("signal 9"));
        assert!(gone_within(w, Duration::from_secs(5)), "watchdog {w} lingers");
        unregister(e.pgid);
        e.stopped = true;
    }

    /// The watchdog of group `pgid`: a child of its leader in a group of its own.
    fn watchdog_of(pgid: i32) -> Option<i32> {
        for _ in 0..200 {
            for d in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(pid) = d.file_name().to_string_lossy().parse::<i32>() else { continue };
                let Ok(stat) = std::fs::read_to_string(d.path().join("stat")) else { continue };
                let rest = &stat[stat.rfind(')').map_or(0, |i| i + 1)..];
                let f: Vec<&str> = rest.split_whitespace().take(3).collect();
                if f.get(1) == Some(&pgid.to_string().as_str())
                    && f.get(2) == Some(&pid.to_string().as_str())
                {
                    return Some(pid);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn gone_within(pid: i32, limit: Duration) -> bool {
        let t0 = Instant::now();
        while alive(pid) && t0.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(10));
        }
        !alive(pid)
    }

    /// A normal stop tells the watchdog to leave: it must not linger.
    #[test]
    fn a_stopped_engine_leaves_no_watchdog() {
        let dir = tempfile::tempdir().unwrap();
        let e = EngineProcess::spawn("sleep 30", &[], &dir.path().join("l")).unwrap();
        let w = watchdog_of(e.pgid).expect("every engine has a watchdog");
        assert!(alive(w));
        drop(e);
        assert!(gone_within(w, Duration::from_secs(5)), "watchdog {w} lingers");
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        std::fs::write(&p, "a\nb\nc\nd\n").unwrap();
        assert_eq!(log_tail(&p, 2), "c\nd");
        assert_eq!(log_tail(&p, 10), "a\nb\nc\nd");
        assert_eq!(log_tail(&dir.path().join("none"), 2), "");
    }
}
