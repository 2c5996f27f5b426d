//! The REPL's meta-commands (`:help`, `:sandbox`, `:journal`, `:screen`,
//! `:save`, `:quit`): views of the live run that are not script.

use std::fmt::Write as _;
use std::path::Path;

use crate::runtime::Run;

/// A meta-command the REPL cannot carry out (reported; the session goes on).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetaError {
    #[error("unknown command `:{0}`; :help lists the commands")]
    Unknown(String),
    #[error(":{command} takes {wants}, not `{got}`")]
    BadArgument {
        command: &'static str,
        wants: &'static str,
        got: String,
    },
    #[error("no terminal session: start one with attach(\"cmd\")")]
    NoSession,
    #[error("no session {asked}; sessions: {known}")]
    NoSuchSession { asked: String, known: String },
    #[error(":save needs a file name")]
    NoFileName,
    #[error("{0} exists; `:save! {1}` overwrites it")]
    Exists(String, String),
    #[error("cannot {verb} {path}: {source}")]
    Io {
        verb: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Every meta-command with its one-line help.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    (":help", "this text"),
    (
        ":sandbox",
        "the sandbox: id, provider, labels, home; the source pin",
    ),
    (":journal", "[n] the last n journal facts (default 10)"),
    (
        ":screen",
        "[session] a terminal session's screen with row numbers and cursor (default: the latest)",
    ),
    (
        ":save",
        "FILE the inputs that succeeded, in order, as a script `rfs run` replays (:save! overwrites)",
    ),
    (
        ":quit",
        "end the session (also Ctrl-D); the sandbox is destroyed and verified gone",
    ),
];

/// The help text.
pub(crate) fn help() -> String {
    let mut s = String::from(
        "rfs repl — Rhai with sandbox(), sync_source(), step(), attach() and friends.\n",
    );
    let prims = crate::script::primitives::PRIMITIVES;
    for p in prims.iter().filter(|p| p.options.is_some()) {
        let _ = writeln!(s, "  {:<16} {}", format!("{}()", p.name), p.summary);
    }
    let others: Vec<&str> = prims
        .iter()
        .filter(|p| p.options.is_none())
        .map(|p| p.name)
        .collect();
    let _ = writeln!(s, "  also: {}", others.join(", "));
    for (name, what) in COMMANDS {
        let _ = writeln!(s, "  {name:<9} {what}");
    }
    s.push_str(
        "An open bracket, block or `string continues on the next line (Ctrl-C abandons it).\n\
         Tab completes; Ctrl-C interrupts a running step or wait and keeps the session.",
    );
    s
}

/// `:sandbox`.
pub(crate) fn sandbox(run: &Run) -> String {
    let st = run.state();
    let mut s = String::new();
    match &st.sandbox {
        Some(sb) => {
            let _ = writeln!(s, "sandbox   {}", sb.id);
            let _ = writeln!(s, "provider  {}", run.cfg.provider.name());
            let _ = writeln!(s, "home      {}", sb.home);
            let _ = writeln!(s, "state     {}", sb.state);
            s.push_str("labels\n");
            for (k, v) in &sb.labels {
                let _ = writeln!(s, "  {k} = {v}");
            }
        }
        None => {
            let _ = writeln!(
                s,
                "no sandbox yet on provider `{}` (provisioned on first use)",
                run.cfg.provider.name()
            );
        }
    }
    match &st.source {
        Some(b) => {
            let _ = writeln!(s, "source    commit {}", b.pin.commit);
            let _ = writeln!(s, "          tree {}", b.pin.tree_digest);
            let files = rfs_evidence::plural::count(b.pin.files, "file", "files");
            let _ = writeln!(s, "          {files} at {}", b.pin.workdir);
        }
        None => s.push_str("source    not synced (sync_source())\n"),
    }
    s.trim_end().to_owned()
}

/// `:journal [n]`: the last `n` facts, one a line.
pub(crate) fn journal(run: &Run, args: &str) -> Result<String, MetaError> {
    let n: usize = if args.is_empty() {
        10
    } else {
        args.parse().map_err(|_| MetaError::BadArgument {
            command: "journal",
            wants: "a number of facts",
            got: args.into(),
        })?
    };
    let path = run.cfg.out_dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| MetaError::Io {
        verb: "read",
        path: path.display().to_string(),
        source,
    })?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for l in &lines[lines.len().saturating_sub(n)..] {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        let ts = v["ts"].as_str().unwrap_or("");
        let time = ts.split('T').nth(1).unwrap_or(ts);
        let _ = write!(
            out,
            "#{:<4} {} {:<18}",
            v["seq"],
            time.get(..8).unwrap_or(time),
            v["kind"].as_str().unwrap_or("?")
        );
        if let Some(m) = v["payload"].as_object() {
            for (k, val) in m {
                if val.is_null() {
                    continue;
                }
                let shown = match val {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let shown = shown.replace('\n', "⏎");
                let shown = if shown.chars().count() > 60 {
                    format!("{}…", shown.chars().take(60).collect::<String>())
                } else {
                    shown
                };
                let _ = write!(out, " {k}={shown}");
            }
        }
        out.push('\n');
    }
    Ok(out.trim_end().to_owned())
}

/// `:screen [session]`.
pub(crate) fn screen(run: &Run, args: &str) -> Result<String, MetaError> {
    let sessions = run.state().sessions.clone();
    if sessions.is_empty() {
        return Err(MetaError::NoSession);
    }
    let s = if args.is_empty() {
        sessions.last().cloned()
    } else {
        let n: u32 = args.parse().map_err(|_| MetaError::BadArgument {
            command: "screen",
            wants: "a session number",
            got: args.into(),
        })?;
        sessions.iter().find(|s| s.index == n).cloned()
    };
    let s = s.ok_or_else(|| MetaError::NoSuchSession {
        asked: args.into(),
        known: sessions
            .iter()
            .map(|s| format!("{} (`{}`)", s.index, s.command))
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let live = if s.session.exit_status().is_some() {
        "exited"
    } else {
        "live"
    };
    let dump = s.session.screen().dump();
    Ok(format!(
        "session {} `{}` ({live})\n{}",
        s.index,
        s.command,
        redacted(run, dump.trim_end())
    ))
}

/// `text` as the REPL may show it: the run's secrets and every secret
/// this process knows (secret-named environment variables and `--var`s)
/// redacted, as `rfs mcp` shows screens and values. A screen draws what
/// the program prints, secrets included.
pub(crate) fn redacted(run: &Run, text: &str) -> String {
    let text = run.state().redactor.redact_str(text);
    String::from_utf8_lossy(&rfs_evidence::secrets::redact_known(text.as_bytes())).into_owned()
}

/// `:save FILE` / `:save! FILE`.
pub(crate) fn save(
    transcript: &super::transcript::Transcript,
    run: &Run,
    args: &str,
    overwrite: bool,
    cwd: &Path,
) -> Result<String, MetaError> {
    if args.is_empty() {
        return Err(MetaError::NoFileName);
    }
    let path = cwd.join(args);
    if path.exists() && !overwrite {
        return Err(MetaError::Exists(path.display().to_string(), args.into()));
    }
    let text = transcript.script(run);
    std::fs::write(&path, text).map_err(|source| MetaError::Io {
        verb: "write",
        path: path.display().to_string(),
        source,
    })?;
    let saved = format!(
        "saved {} to {}",
        rfs_evidence::plural::count(transcript.len(), "input", "inputs"),
        path.display()
    );
    Ok(match where_saved(&path) {
        Saved::InTree(root) => format!(
            "{saved}, inside the repository {}: rfs ships only what is committed, so commit it (`git add {args} && git commit`) and run `rfs run {args}`; to try it first, `rfs run --allow-dirty {args}` (its evidence is marked not reproducible)",
            root.display()
        ),
        Saved::Ignored(root) => format!(
            "{saved}, ignored by git in the repository {} (its working tree stays clean); run it with `rfs run {}`",
            root.display(),
            path.display()
        ),
        Saved::Outside => format!(
            "{saved} (outside any repository: no working tree changed); run it from here with `rfs run {}`",
            path.display()
        ),
    })
}

/// Where a saved file landed, as git sees it.
enum Saved {
    /// In a repository's working tree, not ignored: the tree is dirty now.
    InTree(std::path::PathBuf),
    /// In a working tree but ignored by git: the tree stays clean.
    Ignored(std::path::PathBuf),
    /// In no repository's working tree.
    Outside,
}

/// Where `file` (just written) lies: the repository is the one holding
/// the file's folder, wherever the REPL was started (saving into another
/// repository makes that one dirty).
fn where_saved(file: &Path) -> Saved {
    let Some(dir) = file.parent().and_then(|d| d.canonicalize().ok()) else {
        return Saved::Outside;
    };
    let Ok(repo) = git2::Repository::discover(&dir) else {
        return Saved::Outside;
    };
    let Some(root) = repo.workdir().and_then(|w| w.canonicalize().ok()) else {
        return Saved::Outside;
    };
    let Some(rel) = file
        .file_name()
        .and_then(|n| dir.strip_prefix(&root).ok().map(|d| d.join(n)))
    else {
        return Saved::Outside;
    };
    // Inside `.git` itself: not part of the working tree.
    if rel
        .components()
        .next()
        .is_some_and(|c| c.as_os_str() == ".git")
    {
        return Saved::Outside;
    }
    if repo.is_path_ignored(&rel).unwrap_or(false) {
        Saved::Ignored(root)
    } else {
        Saved::InTree(root)
    }
}
