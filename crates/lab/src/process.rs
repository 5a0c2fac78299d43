//! Engine processes: each launch is its own process group (so `sh -c`, `docker run` or a
//! server with worker processes is stopped as a whole), its output goes to a log file, and
//! a guard kills the group on every exit path: a normal stop (SIGTERM, then SIGKILL after a
//! grace period), an error, an interrupt, or a panic (the guard's `Drop`).

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// A running engine; dropping it kills its whole process group.
#[derive(Debug)]
pub struct Engine {
    child: Child,
    pgid: i32,
    /// Set once the group has been stopped and the leader reaped.
    stopped: bool,
}

/// The two libc calls this module needs.
enum Sys {
    /// `killpg(pgid, sig)`.
    KillGroup(i32, i32),
    /// `atexit(handler)`.
    AtExit(extern "C" fn()),
}

/// The one place with `unsafe`: plain libc calls with integer or function-pointer arguments.
#[allow(unsafe_code)]
fn sys(call: Sys) -> i32 {
    match call {
        // SAFETY: killpg takes two integers and reads no memory of ours; callers pass only
        // groups we created with process_group(0) (checked > 1 by signal_group).
        Sys::KillGroup(pgid, sig) => unsafe { libc::killpg(pgid, sig) },
        // SAFETY: registers a function with no captured state; it runs at exit and only
        // calls try_lock and killpg.
        Sys::AtExit(f) => unsafe { libc::atexit(f) },
    }
}

/// Send `sig` to every process of group `pgid`. `Err` with ESRCH means the group is empty.
fn signal_group(pgid: i32, sig: i32) -> std::io::Result<()> {
    if pgid <= 1 {
        // Never signal group 0 (our own) or 1 (init's): only groups we created.
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    if sys(Sys::KillGroup(pgid, sig)) == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
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
        sys(Sys::AtExit(kill_live_groups));
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

impl Engine {
    /// Start `sh -c COMMAND` in a new process group, stdout and stderr appended to `log`.
    pub fn spawn(command: &str, env: &[(String, String)], log: &Path) -> std::io::Result<Engine> {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()?;
        let pgid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
        register(pgid);
        Ok(Engine { child, pgid, stopped: false })
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
        self.stopped = true;
    }
}

impl Drop for Engine {
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
        let e = Engine::spawn(&cmd, &[], &log).unwrap();
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
        let e = Engine::spawn(&cmd, &[("X".into(), "1".into())], &dir.path().join("l")).unwrap();
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
