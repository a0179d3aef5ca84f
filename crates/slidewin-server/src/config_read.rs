//! Reading the config's files: regular files only, bounded in bytes, and off the async workers
//! with a timeout, so that no file can stop the service from answering.
//!
//! A FIFO put where a config file was, or a hung network mount, blocks a read for as long as
//! it likes. So a file is opened without waiting (`O_NONBLOCK`, which a FIFO honours and a
//! regular file ignores) and refused unless it is a regular file once opened, after its links
//! are followed; and every load runs on a blocking thread ([`Reader::load`]), within
//! [`Config::READ_TIMEOUT`], one at a time. A read that outlasts the timeout is given up: the
//! config in force stays, and while that read has not returned, the next load is refused by name
//! rather than stuck behind it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use crate::config::{Config, ConfigFileError};

/// The files `paths` stand for, in order: a file as it is, a directory's `.yaml` and `.yml`
/// files (names starting with `.` skipped, as Kubernetes' `..data` is) in name order.
pub(crate) fn config_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ConfigFileError> {
    let mut files = Vec::new();
    for path in paths {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path)
            .map_err(|e| ConfigFileError::new(&shown, format!("cannot read it: {e}")))?;
        if !meta.is_dir() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|e| ConfigFileError::new(&shown, format!("cannot list it: {e}")))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| has_config_name(p))
            .collect();
        found.sort();
        files.extend(found);
    }
    if files.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(ConfigFileError::new(
            &shown.join(", "),
            "no config file (.yaml or .yml) found",
        ));
    }
    Ok(files)
}

/// A name a directory's config file has: `.yaml` or `.yml`, not hidden. (What it is, a file or
/// not, is looked at when it is opened: a FIFO so named is refused by name, not skipped.)
fn has_config_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|name| {
            !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"))
        })
}

/// The text of the regular file at `path`, at most [`Config::MAX_FILE_BYTES`].
pub(crate) fn read_file(path: &Path, shown: &str) -> Result<String, ConfigFileError> {
    use std::io::Read;
    let cannot = |e: std::io::Error| ConfigFileError::new(shown, format!("cannot read it: {e}"));
    let file = open_without_waiting(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(ConfigFileError::new(
            shown,
            format!(
                "not a regular file (it is {}): a config file must be one",
                file_kind(&meta)
            ),
        ));
    }
    let mut text = String::new();
    let read = file
        .take(Config::MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(cannot)?;
    if read as u64 > Config::MAX_FILE_BYTES {
        return Err(ConfigFileError::new(
            shown,
            format!("the file is larger than {} bytes", Config::MAX_FILE_BYTES),
        ));
    }
    Ok(text)
}

/// Opens `path` for reading without waiting for a writer, as opening a FIFO would.
#[cfg(unix)]
fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// What a file that is not a regular one is, in words.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Where a [`Reader`]'s load is.
const IDLE: u8 = 0;
const READING: u8 = 1;
/// The load outlasted its timeout: what it read is dropped when it returns.
const GIVEN_UP: u8 = 2;
/// The load read its files and is putting them in force: it will not be given up.
const APPLYING: u8 = 3;

/// How a [`Reader`] reads: [`Config::load`], or a test's stand-in.
type Read = Arc<dyn Fn(&[PathBuf]) -> Result<Config, String> + Send + Sync>;

/// Loads a config off the async workers: one load at a time, each given up after its timeout.
pub(crate) struct Reader {
    paths: Vec<PathBuf>,
    timeout: Duration,
    state: Arc<AtomicU8>,
    read: Read,
    /// Whether a domain may be spread over several files ([`Config::load_merging_domains`]).
    merge_domains: Arc<AtomicBool>,
}

impl Reader {
    pub(crate) fn new(paths: Vec<PathBuf>, timeout: Duration) -> Reader {
        let merge_domains = Arc::new(AtomicBool::new(false));
        let merging = Arc::clone(&merge_domains);
        Reader {
            paths,
            timeout,
            state: Arc::new(AtomicU8::new(IDLE)),
            read: Arc::new(move |paths| {
                let config = if merging.load(Ordering::Acquire) {
                    Config::load_merging_domains(paths)
                } else {
                    Config::load(paths)
                };
                config.map_err(|e| e.to_string())
            }),
            merge_domains,
        }
    }

    /// Lets a domain be spread over several files, in this load and every later one.
    pub(crate) fn set_merging_domains(&self, merge: bool) {
        self.merge_domains.store(merge, Ordering::Release);
    }

    pub(crate) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Reads the config on a blocking thread and hands it to `apply` there; within the
    /// timeout, or an error that says why, and `apply` is then never called.
    pub(crate) async fn load<T: Send + 'static>(
        &self,
        apply: impl FnOnce(Config) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        if self
            .state
            .compare_exchange(IDLE, READING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(format!(
                "an earlier read of the config has not returned after more than {:?} (a FIFO or \
                 a hung file system?); not read again until it does",
                self.timeout
            ));
        }
        let (paths, state, read) = (
            self.paths.clone(),
            Arc::clone(&self.state),
            Arc::clone(&self.read),
        );
        let task = tokio::task::spawn_blocking(move || {
            let config = read(&paths);
            // Given up meanwhile: what was read is dropped, and the next load may start.
            if state
                .compare_exchange(READING, APPLYING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                state.store(IDLE, Ordering::Release);
                return Err("given up".to_owned());
            }
            let applied = config.and_then(apply);
            state.store(IDLE, Ordering::Release);
            applied
        });
        tokio::pin!(task);
        let joined = match tokio::time::timeout(self.timeout, &mut task).await {
            Ok(joined) => joined,
            Err(_) => {
                let gave_up = self
                    .state
                    .compare_exchange(READING, GIVEN_UP, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                if gave_up {
                    return Err(format!(
                        "reading the config took longer than {:?} (a FIFO or a hung file \
                         system?); given up",
                        self.timeout
                    ));
                }
                // It has read everything and is applying it: that takes no I/O.
                task.await
            }
        };
        joined.unwrap_or_else(|e| Err(format!("the config's load failed: {e}")))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("slidewin-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fifo(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
        path
    }

    /// Issue 29: a FIFO in place of the config file blocked a runtime thread on SIGHUP.
    #[test]
    fn hostile_29_a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = scratch("fifo-config");
        let path = fifo(&dir, "ratelimit.yaml");
        let err = Config::load(std::slice::from_ref(&path)).unwrap_err();
        assert_eq!(err.file(), path.display().to_string());
        assert!(
            err.to_string()
                .contains("not a regular file (it is a FIFO)"),
            "{err}"
        );
        // In a directory too: named, not skipped.
        let err = Config::load(std::slice::from_ref(&dir)).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        // A link to it is followed, and refused the same way.
        let link = dir.join("link.yml");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = Config::load(&[link]).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_named_as_a_config_file_is_refused_by_name() {
        let dir = scratch("dir-config");
        std::fs::create_dir(dir.join("nested.yaml")).unwrap();
        let err = Config::load(std::slice::from_ref(&dir)).unwrap_err();
        assert!(err.to_string().contains("it is a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A read that never returns (a hung mount), released by the test through `release`.
    fn stuck_reader(timeout: Duration) -> (Reader, mpsc::Sender<()>) {
        let (release, released) = mpsc::channel::<()>();
        let released = std::sync::Mutex::new(released);
        let mut reader = Reader::new(Vec::new(), timeout);
        reader.read = Arc::new(move |_| {
            let _ = released.lock().unwrap().recv();
            Config::parse("domain: d\n", "late.yaml").map_err(|e| e.to_string())
        });
        (reader, release)
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_past_its_timeout_is_given_up_and_what_it_read_is_never_applied() {
        let timeout = Duration::from_secs(10);
        let (reader, release) = stuck_reader(timeout);
        let reader = Arc::new(reader);
        let applied = Arc::new(AtomicU8::new(0));
        let (first, mark) = (Arc::clone(&reader), Arc::clone(&applied));
        let load = tokio::spawn(async move {
            first
                .load(move |_| {
                    mark.store(1, Ordering::Release);
                    Ok(())
                })
                .await
        });
        tokio::task::yield_now().await;
        // The blocking thread holds paused time still: it is moved by hand.
        tokio::time::advance(timeout).await;
        let err = load.await.unwrap().unwrap_err();
        assert!(err.contains("took longer than 10s"), "{err}");
        // While the read has not returned, the next load is refused at once, by name.
        let err = reader.load(|_| Ok(())).await.unwrap_err();
        assert!(err.contains("has not returned"), "{err}");
        // It returns: what it read is dropped, and loads are taken again.
        release.send(()).unwrap();
        while reader.state.load(Ordering::Acquire) != IDLE {
            tokio::task::yield_now().await;
        }
        assert_eq!(applied.load(Ordering::Acquire), 0, "never applied");
        release.send(()).unwrap();
        assert_eq!(
            reader.load(|c| Ok(c.files().to_vec())).await,
            Ok(vec!["late.yaml".to_owned()])
        );
    }
}
