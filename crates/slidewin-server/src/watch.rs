//! Reloading the config when its files change or on SIGHUP.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::endpoints::Endpoints;
use crate::error::Error;
use slidewin_store::Backend;

/// Reloads `service`'s config when a file under its paths changes (the directories around
/// them are watched, so that Kubernetes' swap of a `ConfigMap`'s `..data` link is seen) and on
/// SIGHUP, until the returned guard is dropped.
///
/// # Errors
///
/// The file watcher could not start.
pub fn watch_config<B: Backend>(service: &Endpoints<B>) -> Result<ConfigWatch, Error> {
    use notify::{RecursiveMode, Watcher};

    let (tx, mut rx) = mpsc::channel::<()>(1);
    let on_event = tx.clone();
    let named: Vec<std::ffi::OsString> = service
        .paths()
        .iter()
        .filter(|p| !p.is_dir())
        .filter_map(|p| p.file_name().map(ToOwned::to_owned))
        .collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        // Only the config's own files count: a log or an editor's swap file written beside them
        // must not reload (a log of the reload would reload again, without end).
        if !event.kind.is_access() && event.paths.iter().any(|p| is_config_path(p, &named)) {
            // A full channel means a reload is already due.
            let _ = on_event.try_send(());
        }
    })
    .map_err(|e| Error::Io {
        what: "cannot watch the config".to_owned(),
        source: notify_io(e),
    })?;
    for dir in watched_dirs(service.paths()) {
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| Error::Io {
                what: format!("cannot watch {}", dir.display()),
                source: notify_io(e),
            })?;
    }
    let reloader = service.clone();
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Editors and ConfigMaps write in several steps: let them settle.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while rx.try_recv().is_ok() {}
            let _ = reloader.reload().await;
        }
    });
    // SIGHUP is registered before this returns, so that none finds the default (which ends
    // the process).
    #[cfg(unix)]
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(Error::io("cannot listen for SIGHUP"))?;
    let hup = tokio::spawn(async move {
        #[cfg(unix)]
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            let _ = tx.send(()).await;
        }
        #[cfg(not(unix))]
        drop(tx);
    });
    Ok(ConfigWatch {
        _watcher: Box::new(watcher),
        tasks: vec![task, hup],
    })
}

/// Stops watching when dropped.
pub struct ConfigWatch {
    _watcher: Box<dyn notify::Watcher + Send>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A path whose change may change the config: a file named in the config's paths, a `.yaml`
/// or `.yml` file, or Kubernetes' `..data` link and its `..<timestamp>` directories.
fn is_config_path(path: &Path, named: &[std::ffi::OsString]) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    if named.iter().any(|n| n == name) {
        return true;
    }
    let name = name.to_string_lossy();
    name.starts_with("..") || name.ends_with(".yaml") || name.ends_with(".yml")
}

fn watched_dirs(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = paths
        .iter()
        .map(|p| {
            if p.is_dir() {
                p.clone()
            } else {
                p.parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf)
            }
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// A file watcher's error as the system's, where it was one.
fn notify_io(e: notify::Error) -> std::io::Error {
    match e.kind {
        notify::ErrorKind::Io(io) => io,
        _ => std::io::Error::other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_configs_own_files_reload() {
        let named = vec![std::ffi::OsString::from("limits.conf")];
        for path in [
            "/c/ratelimit.yaml",
            "/c/x.yml",
            "/c/..data",
            "/c/..2026_12_02",
            "/c/limits.conf",
        ] {
            assert!(is_config_path(Path::new(path), &named), "{path}");
        }
        for path in [
            "/c/serve.log",
            "/c/.ratelimit.yaml.swp",
            "/c/notes.txt",
            "/",
        ] {
            assert!(!is_config_path(Path::new(path), &named), "{path}");
        }
    }
}
