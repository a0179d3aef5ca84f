//! Headless Chromium for the dashboard's browser tests: the DOM after the page's scripts ran,
//! and screenshots.
//!
//! Each call runs Chromium as a child process with a fresh profile and a virtual-time budget
//! (the page's timers run that far ahead; Chromium then dumps the DOM or the screenshot and
//! exits), kills it and its helpers if it takes more than [`TIMEOUT`], and panics naming what
//! failed. `scripts/test` installs Debian's `chromium`; `CHROMIUM` names another binary.
//!
//! Virtual time stops while a fetch is pending, and an open event stream is a fetch that never
//! ends: load the dashboard as `/?updates=N`, which closes its stream after N snapshots (N a
//! second, in real time), or the budget never runs out and the run times out.
//!
//! Use it from an integration test with `mod support { pub(crate) mod browser; }`, or from
//! `tests/support/mod.rs` with `pub(crate) mod browser;`.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long one Chromium run may take before it is killed.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(60);

/// The window a screenshot shows.
pub(crate) const WINDOW_SIZE: (u32, u32) = (1280, 900);

/// The Chromium binary: `$CHROMIUM`, or `/usr/bin/chromium`, or `chromium` on the `PATH`.
/// Panics, saying how to get it, if there is none.
pub(crate) fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM").filter(|value| !value.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "CHROMIUM is {}, which is not a file: set it to a Chromium or Chrome binary, or unset \
             it and run scripts/test, which installs Debian's chromium package",
            path.display()
        );
        return path;
    }
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|dirs| {
            std::env::split_paths(&dirs)
                .map(|dir| dir.join("chromium"))
                .collect()
        })
        .unwrap_or_default();
    std::iter::once(PathBuf::from("/usr/bin/chromium"))
        .chain(on_path)
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the dashboard's browser tests need Chromium, and there is none at \
                 /usr/bin/chromium or on the PATH: run scripts/test, which installs Debian's \
                 chromium package, or set CHROMIUM to a Chromium or Chrome binary"
            )
        })
}

/// The DOM of `url` as HTML, after its scripts ran for `virtual_time_budget_ms` of virtual time.
pub(crate) fn dump_dom(url: &str, virtual_time_budget_ms: u64) -> String {
    let run = run_chromium(
        "dump the DOM of",
        url,
        virtual_time_budget_ms,
        &["--dump-dom".to_string()],
    );
    let dom = String::from_utf8(run.stdout).unwrap_or_else(|error| {
        panic!("Chromium's DOM of {url} is not UTF-8: {error}");
    });
    assert!(
        dom.contains("<html"),
        "Chromium dumped no DOM of {url}; its stderr ends:\n{}",
        tail(&run.stderr)
    );
    dom
}

/// A PNG of `url` in a [`WINDOW_SIZE`] window at `out`, after its scripts ran for `budget_ms` of
/// virtual time. Replaces a file already at `out`.
pub(crate) fn screenshot(url: &str, out: &Path, budget_ms: u64) {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
    }
    match std::fs::remove_file(out) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => panic!("cannot replace {}: {error}", out.display()),
    }
    let (width, height) = WINDOW_SIZE;
    let run = run_chromium(
        "take a screenshot of",
        url,
        budget_ms,
        &[
            format!("--screenshot={}", out.display()),
            format!("--window-size={width},{height}"),
            "--hide-scrollbars".to_string(),
        ],
    );
    assert!(
        out.is_file(),
        "Chromium exited but wrote no screenshot of {url} to {}; its stderr ends:\n{}",
        out.display(),
        tail(&run.stderr)
    );
}

/// The workspace's target directory: `$CARGO_TARGET_DIR` (relative to the workspace), or
/// `target/` at the workspace's root.
pub(crate) fn target_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match std::env::var_os("CARGO_TARGET_DIR").filter(|value| !value.is_empty()) {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

/// What a finished Chromium run left.
struct Run {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs Chromium on `url` with the common flags and `extra`; panics, naming `what` and `url`,
/// if it cannot start, fails, or outlives [`TIMEOUT`] (then it and its helpers are killed).
fn run_chromium(what: &str, url: &str, budget_ms: u64, extra: &[String]) -> Run {
    let binary = chromium();
    let profile = Profile::new();
    let mut command = Command::new(&binary);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .args(extra)
        .arg(url)
        // A zone an hour off UTC: a time shown without its zone, or in the wrong one, shows.
        .env("TZ", "Europe/Paris")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout kills its helper processes too.
        .process_group(0);
    let mut child = command.spawn().unwrap_or_else(|error| {
        panic!(
            "cannot start Chromium ({}) to {what} {url}: {error}",
            binary.display()
        )
    });
    let pid = child.id();

    // Three things end a run: Chromium exits, and each of its two pipes closes.
    let (done, finished) = mpsc::channel::<()>();
    let stdout = read_all(&mut child.stdout.take(), done.clone());
    let stderr = read_all(&mut child.stderr.take(), done.clone());
    let status = wait(child, done);

    let deadline = Instant::now() + TIMEOUT;
    let mut timed_out = false;
    for _ in 0..3 {
        let left = deadline.saturating_duration_since(Instant::now());
        if finished.recv_timeout(left).is_err() {
            timed_out = true;
            // The group is ours: Chromium's pid names it while Chromium or a helper lives.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
            break;
        }
    }
    let status = status.join().expect("the waiting thread");
    let stdout = stdout.join().expect("the stdout thread");
    let stderr = stderr.join().expect("the stderr thread");
    assert!(
        !timed_out,
        "Chromium did not {what} {url} within {} s and was killed (a page that keeps a fetch \
         open, such as the dashboard's event stream, stops virtual time: load it as \
         /?updates=N); its stderr ends:\n{}",
        TIMEOUT.as_secs(),
        tail(&stderr)
    );
    match status {
        Ok(status) if status.success() => Run { stdout, stderr },
        Ok(status) => panic!(
            "Chromium failed to {what} {url} ({status}); its stderr ends:\n{}",
            tail(&stderr)
        ),
        Err(error) => panic!("cannot wait for Chromium to {what} {url}: {error}"),
    }
}

/// Reads a pipe to its end on a thread; says so on `done`.
fn read_all<R: Read + Send + 'static>(
    pipe: &mut Option<R>,
    done: mpsc::Sender<()>,
) -> thread::JoinHandle<Vec<u8>> {
    let mut pipe = pipe.take().expect("a piped stream");
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = done.send(());
        bytes
    })
}

/// Waits for the child on a thread; says so on `done`.
fn wait(
    mut child: Child,
    done: mpsc::Sender<()>,
) -> thread::JoinHandle<std::io::Result<ExitStatus>> {
    thread::spawn(move || {
        let status = child.wait();
        let _ = done.send(());
        status
    })
}

/// The last lines of Chromium's stderr, for a failure's message.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(20);
    lines[start..].join("\n")
}

/// A fresh, empty profile directory, removed when dropped.
struct Profile(PathBuf);

impl Profile {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "slidewin-chromium-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // `create_dir`, not `create_dir_all`: fresh means nobody made it before.
        std::fs::create_dir(&dir)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
        Self(dir)
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The text of the element carrying both `data-rule="{rule}"` and `data-total="{total}"`.
#[allow(dead_code)] // each test binary uses part of the harness
pub(crate) fn total_in(dom: &str, rule: &str, total: &str) -> Option<String> {
    let rule_attr = format!("data-rule=\"{rule}\"");
    let total_attr = format!("data-total=\"{total}\"");
    dom.match_indices('<').find_map(|(start, _)| {
        let tag_end = start + dom[start..].find('>')?;
        let tag = &dom[start..tag_end];
        if !(tag.contains(&rule_attr) && tag.contains(&total_attr)) {
            return None;
        }
        let text_end = tag_end + dom[tag_end..].find('<')?;
        Some(dom[tag_end + 1..text_end].to_string())
    })
}
