//! The one place that spawns children. Each child gets its own process group,
//! a wall-clock limit, and on the limit (or on Ctrl-C) SIGTERM to the whole
//! group, a grace period, then SIGKILL — so no worker or rank is left behind.
//! A long-lived helper ([`Server`]) is held open instead, and dies with
//! tuneloop.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// Grace between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(3);

/// A command as plain data.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    /// Variables of tuneloop's own environment the child must not inherit.
    pub env_remove: Vec<String>,
    /// Bytes for stdin; `None` gives /dev/null.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// A stdout line starting with this means the work is done: the child
    /// then gets [`DONE_GRACE`] to exit before its group is ended (a process
    /// stuck in teardown must not cost the whole timeout).
    pub done_marker: Option<String>,
    /// With `done_marker`: the marker is the child's last word (tuneloop's
    /// harness prints its result, then only exits), so the group is ended
    /// at the marker and its teardown is not waited for. A process with
    /// torch mapped, and each of its workers, takes 10-70 ms to unmap at
    /// exit: time the next run need not wait for, as nothing is left to
    /// read. The ending is then the signal that ended it.
    pub end_at_done: bool,
}

/// How long a child may take to exit after printing its `done_marker`.
pub const DONE_GRACE: Duration = Duration::from_secs(10);

impl Spec {
    /// The argv as one line that can be pasted into a shell.
    pub fn shell_line(&self) -> String {
        let mut v = vec![self.program.clone()];
        v.extend(self.args.iter().cloned());
        shell_words::join(v)
    }
}

#[derive(Clone, Debug)]
pub enum Ending {
    Exited(i32),
    Signalled(i32),
    TimedOut,
    Interrupted,
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub ending: Ending,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
}

impl Outcome {
    pub fn success(&self) -> bool {
        matches!(self.ending, Ending::Exited(0))
    }
    pub fn code(&self) -> Option<i32> {
        match self.ending {
            Ending::Exited(c) => Some(c),
            _ => None,
        }
    }
}

/// Set by the SIGINT/SIGTERM handler; every running child is then ended.
#[derive(Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst)
    }
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    /// Installs SIGINT and SIGTERM handlers that raise this flag.
    pub fn install(&self) {
        let flag = self.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
            }
            flag.raise();
        });
    }
}

/// Runs `spec` to its end, feeding each stdout line to `on_line` as it arrives.
pub async fn run(
    spec: &Spec,
    interrupt: &Interrupt,
    mut on_line: impl FnMut(&str),
) -> std::io::Result<Outcome> {
    let started = Instant::now();
    let mut cmd = Command::new(&spec.program);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .envs(&spec.env)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // If tuneloop itself dies (even by SIGKILL), the child's leader dies with
    // it; DataLoader workers and torchrun ranks watch their parent and follow.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id().map(|p| p as i32);

    if let Some(bytes) = spec.stdin.clone() {
        if let Some(mut sin) = child.stdin.take() {
            tokio::spawn(async move {
                // A child that exits without reading gives EPIPE: not our error.
                let _ = sin.write_all(&bytes).await;
                let _ = sin.shutdown().await;
            });
        }
    }
    let mut stderr = child.stderr.take().expect("piped");
    // Read into a shared buffer: a run ended at its done marker takes what
    // has come without waiting for the end of the pipe (its workers, dying,
    // hold it open a while).
    let err_buf = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut err_task = tokio::spawn({
        let err_buf = err_buf.clone();
        async move {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                err_buf.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        }
    });
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut stdout = String::new();
    let mut deadline = tokio::time::Instant::now() + spec.timeout;
    let mut forced: Option<Ending> = None;
    let mut stdout_open = true;
    let mut ended_at_done = false;
    // One timer for the whole run: a sleep made afresh in each pass of the
    // loop would never fire while the child prints faster than it.
    let mut poll = tokio::time::interval(Duration::from_millis(100));
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let status = loop {
        tokio::select! {
            line = lines.next_line(), if stdout_open => match line {
                Ok(Some(l)) => {
                    let done = spec.done_marker.as_deref().is_some_and(|m| l.starts_with(m));
                    on_line(&l);
                    stdout.push_str(&l);
                    stdout.push('\n');
                    if done && spec.end_at_done {
                        ended_at_done = true;
                        stdout_open = false;
                        kill_group(pgid, libc::SIGKILL);
                    } else if done {
                        deadline = deadline.min(tokio::time::Instant::now() + DONE_GRACE);
                    }
                }
                _ => stdout_open = false,
            },
            st = child.wait() => break st?,
            _ = tokio::time::sleep_until(deadline), if forced.is_none() => {
                forced = Some(Ending::TimedOut);
                terminate_group(pgid, &mut child).await;
            },
            _ = poll.tick(), if forced.is_none() => {
                if interrupt.is_raised() {
                    forced = Some(Ending::Interrupted);
                    terminate_group(pgid, &mut child).await;
                }
            },
        }
    };
    // The leader is gone; its group may not be (workers, ranks): end it too.
    kill_group(pgid, libc::SIGKILL);
    // Drain what is left of stdout and stderr, bounded so an orphan holding
    // a pipe cannot hang us; after the done marker, only what has come (what
    // the child wrote before its marker is in the pipe already).
    let drain = if ended_at_done {
        Duration::from_millis(10)
    } else {
        Duration::from_secs(2)
    };
    if !ended_at_done {
        let _ = tokio::time::timeout(drain, async {
            while let Ok(Some(l)) = lines.next_line().await {
                on_line(&l);
                stdout.push_str(&l);
                stdout.push('\n');
            }
        })
        .await;
    }
    let _ = tokio::time::timeout(drain, &mut err_task).await;
    if ended_at_done {
        err_task.abort();
    }
    let stderr = String::from_utf8_lossy(&err_buf.lock().unwrap()).into_owned();
    use std::os::unix::process::ExitStatusExt;
    let ending = forced.unwrap_or_else(|| match status.code() {
        Some(c) => Ending::Exited(c),
        None => Ending::Signalled(status.signal().unwrap_or(0)),
    });
    Ok(Outcome {
        ending,
        stdout,
        stderr,
        duration: started.elapsed(),
    })
}

/// A long-lived helper child (the fork server, `bench::fork`): its own
/// process group, dead with tuneloop (PDEATHSIG, and its stdin, a pipe from
/// tuneloop, closes), killed when dropped. stderr goes to `log`.
#[derive(Debug)]
pub struct Server {
    child: tokio::process::Child,
    // Held open: the server ends when it reads end-of-file here.
    _stdin: tokio::process::ChildStdin,
    // Held, never read after the ready line: a server that printed more would
    // otherwise die of a broken pipe.
    _stdout: BufReader<tokio::process::ChildStdout>,
}

impl Server {
    /// Spawns `spec` and waits, up to `spec.timeout`, for a stdout line
    /// starting with `ready`. An error says why it never got there.
    pub async fn start(spec: &Spec, ready: &str, log: &std::path::Path) -> std::io::Result<Server> {
        let mut cmd = Command::new(&spec.program);
        for k in &spec.env_remove {
            cmd.env_remove(k);
        }
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .envs(&spec.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(log)?))
            .process_group(0)
            .kill_on_drop(true);
        #[cfg(target_os = "linux")]
        // SAFETY: prctl is async-signal-safe and touches only the child's own state.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let wait_ready = async {
            let mut line = String::new();
            loop {
                line.clear();
                if stdout.read_line(&mut line).await? == 0 {
                    return Err(std::io::Error::other(format!(
                        "it ended before it was ready (see {})",
                        log.display()
                    )));
                }
                if line.starts_with(ready) {
                    return Ok(());
                }
            }
        };
        match tokio::time::timeout(spec.timeout, wait_ready).await {
            Ok(Ok(())) => Ok(Server {
                child,
                _stdin: stdin,
                _stdout: stdout,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::other(format!(
                "not ready within {} s",
                spec.timeout.as_secs()
            ))),
        }
    }

    /// Whether the server is still there to be asked.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    /// Ends the server and reaps it before going on: nothing of tuneloop's
    /// is left running (or left a zombie) once the bencher that held it is
    /// gone. A SIGKILL'd process that serves no run ends at once.
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let pid = pid as i32;
            kill_group(Some(pid), libc::SIGKILL);
            let mut status = 0;
            // SAFETY: waits for this process's own child, which is ours to reap.
            unsafe {
                libc::waitpid(pid, &mut status, 0);
            }
        }
    }
}

async fn terminate_group(pgid: Option<i32>, child: &mut tokio::process::Child) {
    kill_group(pgid, libc::SIGTERM);
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        kill_group(pgid, libc::SIGKILL);
    }
}

fn kill_group(pgid: Option<i32>, sig: i32) {
    if let Some(p) = pgid {
        if p > 0 {
            // SAFETY: killpg only sends a signal; a gone group gives ESRCH, ignored.
            unsafe {
                libc::killpg(p, sig);
            }
        }
    }
}

/// Runs a short command to its end, synchronously (git plumbing): stdin
/// bytes in, output captured. No timeout: only for commands that cannot hang.
pub fn run_quick(spec: &Spec) -> std::io::Result<Outcome> {
    use std::io::Write as _;
    let started = Instant::now();
    let mut cmd = std::process::Command::new(&spec.program);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    let mut child = cmd
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .envs(&spec.env)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(bytes), Some(mut sin)) = (&spec.stdin, child.stdin.take()) {
        sin.write_all(bytes)?;
    }
    let out = child.wait_with_output()?;
    Ok(Outcome {
        ending: Ending::Exited(out.status.code().unwrap_or(-1)),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        duration: started.elapsed(),
    })
}

/// Whether a process with this pid is alive (for stale lock files).
pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 checks existence and permission only.
    unsafe { libc::kill(pid as i32, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Spec {
        Spec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            timeout,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn removed_variables_do_not_reach_the_child() {
        // `env` prints the environment it got; HOME and PATH are set in the test's.
        let spec = Spec {
            program: "/usr/bin/env".into(),
            cwd: std::env::temp_dir(),
            timeout: Duration::from_secs(5),
            env_remove: vec!["HOME".into()],
            ..Default::default()
        };
        let names = |out: &str| -> Vec<String> {
            out.lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
                .collect()
        };
        for out in [
            run(&spec, &Interrupt::new(), |_| {}).await.unwrap().stdout,
            run_quick(&spec).unwrap().stdout,
        ] {
            let got = names(&out);
            assert!(!got.contains(&"HOME".to_string()), "{out}");
            assert!(got.contains(&"PATH".to_string()), "{out}");
        }
    }

    #[tokio::test]
    async fn exit_code_and_output_are_captured() {
        let out = run(
            &sh("echo hi; echo err >&2; exit 7", Duration::from_secs(5)),
            &Interrupt::new(),
            |_| {},
        )
        .await
        .unwrap();
        assert_eq!(out.code(), Some(7));
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "err\n");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let marker = std::env::temp_dir().join(format!("tl-orphan-{}", std::process::id()));
        // The child starts a grandchild that would write the marker after 2 s.
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let out = run(
            &sh(&script, Duration::from_millis(300)),
            &Interrupt::new(),
            |_| {},
        )
        .await
        .unwrap();
        assert!(matches!(out.ending, Ending::TimedOut));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "a grandchild outlived the timeout");
    }

    #[tokio::test]
    async fn interrupt_ends_the_child() {
        let intr = Interrupt::new();
        let i2 = intr.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            i2.raise();
        });
        let out = run(&sh("sleep 30", Duration::from_secs(60)), &intr, |_| {})
            .await
            .unwrap();
        assert!(matches!(out.ending, Ending::Interrupted));
        assert!(out.duration < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn interrupt_ends_a_child_that_prints_without_pause() {
        let intr = Interrupt::new();
        let i2 = intr.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            i2.raise();
        });
        let script = "while :; do echo tick; sleep 0.01; done";
        let out = run(&sh(script, Duration::from_secs(60)), &intr, |_| {})
            .await
            .unwrap();
        assert!(
            matches!(out.ending, Ending::Interrupted),
            "{:?}",
            out.ending
        );
        assert!(out.duration < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_child_stuck_after_its_done_marker_is_ended_early() {
        let mut s = sh("echo 'RESULT {}'; sleep 60", Duration::from_secs(120));
        s.done_marker = Some("RESULT ".into());
        let out = run(&s, &Interrupt::new(), |_| {}).await.unwrap();
        assert!(matches!(out.ending, Ending::TimedOut));
        assert!(
            out.duration < DONE_GRACE + Duration::from_secs(8),
            "{:?}",
            out.duration
        );
        assert_eq!(out.stdout, "RESULT {}\n");
    }

    #[tokio::test]
    async fn a_run_ended_at_its_done_marker_waits_for_no_teardown() {
        // A process of another session holds stdout and stderr open past the
        // marker, as a forked harness's dying workers do.
        let script = "echo before >&2; setsid sleep 30 & echo \"holder $!\"; \
                      echo 'RESULT {}'; sleep 30";
        let mut s = sh(script, Duration::from_secs(60));
        s.done_marker = Some("RESULT ".into());
        s.end_at_done = true;
        let out = run(&s, &Interrupt::new(), |_| {}).await.unwrap();
        let holder: i32 = out.stdout.lines().next().unwrap()[7..].parse().unwrap();
        unsafe { libc::kill(holder, libc::SIGKILL) };
        assert!(
            out.duration < Duration::from_secs(2),
            "waited {:?}",
            out.duration
        );
        assert!(out.stdout.ends_with("RESULT {}\n"), "{}", out.stdout);
        assert_eq!(out.stderr, "before\n");
        assert!(
            matches!(out.ending, Ending::Signalled(9)),
            "{:?}",
            out.ending
        );
    }

    #[tokio::test]
    async fn stdin_is_delivered() {
        let mut s = sh("cat", Duration::from_secs(5));
        s.stdin = Some(b"table\n".to_vec());
        let out = run(&s, &Interrupt::new(), |_| {}).await.unwrap();
        assert_eq!(out.stdout, "table\n");
    }
}
