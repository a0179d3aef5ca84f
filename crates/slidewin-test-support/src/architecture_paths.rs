//! Every repository path that `ARCHITECTURE.md` names exists.
//!
//! `ARCHITECTURE.md` is the map a newcomer reads first, and a map that names files that are
//! gone (or were never there) sends them looking for nothing. Files move often (large modules
//! are split, crates are extracted), and nobody rereads the map each time. So this test reads
//! it, takes every backticked token that looks like a path in this repository, and fails,
//! listing all that are missing, when one does not exist: whoever moves a file fixes the map in
//! the same commit.
//!
//! A token looks like a path when it contains a `/` and either starts with one of the
//! repository's top-level directories (`crates/`, `scripts/`, `docs/`, `examples/`, `.ci/`) or
//! ends in a file extension we keep (`.rs`, `.md`, `.toml`, `.yaml`, `.sh`). Tokens with
//! whitespace (commands) and fenced code blocks are not paths. Paths are relative to the
//! workspace root.

use std::path::Path;

const PREFIXES: [&str; 5] = ["crates/", "scripts/", "docs/", "examples/", ".ci/"];
const EXTENSIONS: [&str; 5] = [".rs", ".md", ".toml", ".yaml", ".sh"];

/// The backticked tokens of `text` that look like repository paths, in order, with the line
/// each is on.
fn paths(text: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans: the pieces between a line's odd and even backticks.
        for token in line.split('`').skip(1).step_by(2) {
            if looks_like_path(token) {
                found.push((index + 1, token));
            }
        }
    }
    found
}

fn looks_like_path(token: &str) -> bool {
    !token.is_empty()
        && token.contains('/')
        && !token.contains(char::is_whitespace)
        && (PREFIXES.iter().any(|p| token.starts_with(p))
            || EXTENSIONS.iter().any(|e| token.ends_with(e)))
}

#[test]
fn every_path_named_in_architecture_md_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let map = root.join("ARCHITECTURE.md");
    let text =
        std::fs::read_to_string(&map).unwrap_or_else(|e| panic!("reading {}: {e}", map.display()));
    let named = paths(&text);
    assert!(
        !named.is_empty(),
        "ARCHITECTURE.md names no path: is the extraction broken?"
    );
    let missing: Vec<String> = named
        .iter()
        .filter(|(_, path)| !root.join(path).exists())
        .map(|(line, path)| format!("  ARCHITECTURE.md:{line}: `{path}`"))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names {} path(s) that do not exist (relative to the workspace root); \
         fix the map in the same commit as the move:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn architecture_paths_are_told_from_other_tokens() {
    let text = "See `crates/slidewin/src/lib.rs`, `scripts/test` and `tests/x.rs`, \
                not `100/minute`, `POST /json`, `(now - span, now]` or `Cargo.toml`.\n\
                ```sh\n`crates/in/a/fence.rs`\n```\n`.ci/run`";
    let found: Vec<&str> = paths(text).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        found,
        [
            "crates/slidewin/src/lib.rs",
            "scripts/test",
            "tests/x.rs",
            ".ci/run"
        ]
    );
}
