//! Files in and out of the sandbox: `collect(path)` copies a file or
//! folder of the synced root into the bundle's `artifacts/`, and
//! `put(local, path)` ships a file of the repository's working tree into
//! the synced root, copied into `bundle/put/` first. Both journal every
//! file's sha256 (`artifact.collected`, `artifact.put`) and `rfs verify`
//! checks them.
//!
//! Paths in the sandbox are relative to the synced root: absolute paths,
//! `..` and links are refused before anything runs. `collect` reads the
//! files back through the provider's own `exec` (`tar -c` in the sandbox,
//! which never follows a link, base64 on the way), bounded in size.

use std::io::Read as _;
use std::path::{Component, Path};

use sha2::Digest as _;

pub(super) use super::artifact_archive::Entry;
use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::{ArtifactLink, Event, FileDigest};
use rfs_sandbox::provider::{BoundedCollect, Collect, ExecRequest};

/// The most a run collects and puts, in bytes of file contents.
pub(crate) const MAX_RUN_BYTES: u64 = 256 << 20;
pub(crate) use rfs_evidence::out_dir::{ARTIFACTS_DIR as DIR, PUT_DIR};
/// The most rfs reads of an artifact helper's stderr (its refusal or
/// failure text), and of `put()`'s stdout.
const HELPER_STDERR: usize = 64 * 1024;

/// The most rfs reads of `collect()`'s stdout for an archive of at most
/// `cut` bytes: its base64 (4 characters for 3 bytes, a line break every
/// 76 characters) and a little slack.
fn collect_stdout_bound(cut: u64) -> usize {
    let encoded = cut.div_ceil(3) * 4;
    usize::try_from(encoded + encoded / 76 + 4096).unwrap_or(usize::MAX)
}

/// How long reading back or shipping one artifact may take.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);
/// Exit status of the sandbox script when it refuses (a link on the way,
/// nothing there).
const EXIT_REFUSED: i32 = 3;
/// Exit status of `collect()`'s sandbox script when nothing is at the
/// path (sysexits' `EX_NOINPUT`): the step before did not write it.
const EXIT_MISSING: i32 = 66;

/// What a run collected and put so far.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Bytes of file contents collected and put.
    pub bytes: u64,
    /// Paths collected (relative to the synced root).
    pub collected: Vec<String>,
    /// Paths put (relative to the synced root).
    pub put: Vec<String>,
}

/// What `collect()` returns to the script.
#[derive(Debug, Clone)]
pub(crate) struct Collected {
    pub files: usize,
    pub bytes: u64,
    /// Where it is in the bundle (empty when absent).
    pub path: String,
    /// Nothing was there (`optional: true`).
    pub absent: bool,
}

/// How `collect()` was asked: its bound, and what the file is.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CollectOptions {
    /// `max_bytes`: may only lower [`MAX_RUN_BYTES`].
    pub max_bytes: Option<i64>,
    /// `junit: true`: the file is a JUnit report.
    pub junit: bool,
    /// `optional: true`: nothing there is recorded as absent and the run
    /// goes on (else it is the failure of the step that ran last).
    pub optional: bool,
}

/// `path` (relative to the synced root) as normal components: refused
/// when empty, absolute, holding `..`, a NUL or a line break.
pub(crate) fn sandbox_path(path: &str) -> std::result::Result<Vec<String>, String> {
    rfs_evidence::validate::path("its path", path).map_err(|e| e.to_string())?;
    if path.starts_with('/') {
        return Err(format!(
            "{path:?} is absolute; a path in the sandbox is relative to the synced source root"
        ));
    }
    let mut parts = vec![];
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err(format!("{path:?} escapes the synced source root (`..`)")),
            c => parts.push(c.to_owned()),
        }
    }
    if parts.is_empty() {
        return Err(format!(
            "{path:?} is the synced root itself; name a file or folder in it"
        ));
    }
    Ok(parts)
}

/// The sandbox script that writes `$2` (under the synced root `$1`) as a
/// tar stream, base64, at most `$3` bytes of it; every later argument is
/// a folder on the way, refused if it is a link.
const COLLECT_SH: &str = r#"
root="$1"; p="$2"; max="$3"; shift 3
cd "$root" || { echo "the synced root $root is gone" >&2; exit 3; }
for d in "$@"; do
  if [ -L "$d" ]; then echo "$d is a symlink: collect() follows no link on the way" >&2; exit 3; fi
done
if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo "$p does not exist in the sandbox" >&2; exit 66; fi
{ tar -cf - "./$p" || echo "rfs-collect: tar failed" >&2; } | head -c "$max" | base64
"#;

/// The sandbox script that moves the uploaded file `$2` to `$3` under the
/// synced root `$1`, making its folders; every later argument is a folder
/// on the way, refused if it is a link.
const PUT_SH: &str = r#"
root="$1"; src="$2"; p="$3"; shift 3
cd "$root" || { rm -f "$src"; echo "the synced root $root is gone" >&2; exit 3; }
for d in "$@"; do
  if [ -L "$d" ]; then rm -f "$src"; echo "$d is a symlink: put() follows no link on the way" >&2; exit 3; fi
  if [ -e "$d" ] && [ ! -d "$d" ]; then rm -f "$src"; echo "$d is a file, not a folder" >&2; exit 3; fi
done
if [ -d "$p" ] && [ ! -L "$p" ]; then rm -f "$src"; echo "$p is a folder in the sandbox" >&2; exit 3; fi
if [ $# -gt 0 ]; then mkdir -p "./$(dirname "./$p")" || { rm -f "$src"; exit 4; }; fi
mv -f "$src" "./$p" || { rm -f "$src"; exit 4; }
"#;

/// The folders on the way to `parts` (`a`, `a/b` for `a/b/c`).
fn ancestors(parts: &[String]) -> Vec<String> {
    (1..parts.len()).map(|n| parts[..n].join("/")).collect()
}

impl Run {
    /// The refusal of `what` before anything ran.
    fn refuse_early(&self, what: &str, why: impl std::fmt::Display) -> Error {
        let m = self.state().redactor.redact_str(&why.to_string());
        self.refuse(format!("{what} refused before anything ran: {m}"))
    }

    /// The sandbox and the synced root (bound with the defaults first, as
    /// a step would).
    fn artifact_place(&self, what: &str) -> Result<super::step_wrapper::Placement> {
        self.place_command(what, Some("."), &[])
    }

    /// The bytes still allowed this run, at most `max` (a script's
    /// `max_bytes`, which may only narrow [`MAX_RUN_BYTES`]).
    fn artifact_room(&self, what: &str, max: Option<i64>) -> Result<u64> {
        let left = MAX_RUN_BYTES.saturating_sub(self.state().artifacts.bytes);
        match max {
            None => Ok(left),
            Some(m) if m <= 0 => Err(self.refuse_early(what, "max_bytes must be > 0")),
            Some(m) if m as u64 > MAX_RUN_BYTES => Err(self.refuse_early(
                what,
                format!(
                    "max_bytes {m} is above the run's bound of {MAX_RUN_BYTES} bytes; a script may only lower it"
                ),
            )),
            Some(m) => Ok(left.min(m as u64)),
        }
    }

    /// Run `sh -c script` in the sandbox with `args`; its output, or the
    /// refusal its stderr says; `None` when `missing_ok` and the script
    /// said nothing is there ([`EXIT_MISSING`]). At most `max_stdout` bytes of its stdout
    /// and [`HELPER_STDERR`] of its stderr are read (a step may have
    /// replaced the sandbox's `sh`, `tar` or `base64` with a program that
    /// writes without end): past either, the command is killed and `what`
    /// refused, naming the bound.
    fn artifact_exec(
        &self,
        what: &str,
        pl: &super::step_wrapper::Placement,
        script: &str,
        args: Vec<String>,
        max_stdout: usize,
        missing_ok: bool,
    ) -> Result<Option<Collect>> {
        let (id, home) = (pl.sandbox_id.as_str(), pl.home.as_str());
        let mut argv = vec!["/bin/sh".into(), "-c".into(), script.into(), "rfs".into()];
        argv.extend(args);
        let stop = self.cancel_token().child_token();
        let req = ExecRequest {
            argv,
            cwd: home.to_owned(),
            env: vec![("LC_ALL".into(), "C".into())],
            timeout: Some(DEADLINE),
            cancel: stop.clone(),
        };
        let mut bounded = BoundedCollect::new(max_stdout, HELPER_STDERR, stop);
        let p = self.cfg.provider.clone();
        let ran = self.block_on_watched(id, p.exec(id, &req, &mut bounded));
        // Past the bound the command was killed: that, not how the kill
        // went, is what happened.
        if let Some(e) = bounded.error(&format!("its helper (`sh -c` in sandbox {id})")) {
            return Err(self.refuse(format!("{what} refused: {e}; nothing was kept")));
        }
        let o = ran
            .map_err(|how| {
                self.sandbox_lost(id, what, &how, format!("{what}: sandbox {id} {how}"))
            })?
            .map_err(|e| Error::StepFailed {
                name: what.into(),
                reason: format!("the provider could not run it in sandbox {id}: {e}"),
            })?;
        let out = bounded.out;
        if o.cancelled {
            return Err(Error::Interrupted);
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if missing_ok && o.exit == Some(EXIT_MISSING) {
            return Ok(None);
        }
        if o.exit == Some(EXIT_REFUSED) {
            let m = self.state().redactor.redact_str(&stderr);
            return Err(self.refuse(format!("{what} refused: {m}")));
        }
        if !o.success() {
            let m = self.state().redactor.redact_str(&stderr);
            return Err(Error::StepFailed {
                name: what.into(),
                reason: format!("it did not end well in sandbox {id} ({o:?}): {m}"),
            });
        }
        Ok(Some(out))
    }

    /// `collect(path)`: copy a file or folder of the synced root into the
    /// bundle's `artifacts/`, journaled.
    pub(crate) fn collect(&self, path: &str, o: CollectOptions) -> Result<Collected> {
        self.check_cancelled()?;
        let CollectOptions {
            max_bytes,
            junit,
            optional,
        } = o;
        let what = match junit {
            true => format!("collect({path:?}, #{{ junit: true }})"),
            false => format!("collect({path:?})"),
        };
        let parts = sandbox_path(path).map_err(|m| self.refuse_early(&what, m))?;
        let rel = parts.join("/");
        let overlap = self.state().artifacts.collected.iter().find_map(|c| {
            let nested =
                rel == *c || rel.starts_with(&format!("{c}/")) || c.starts_with(&format!("{rel}/"));
            nested.then(|| c.clone())
        });
        if let Some(c) = overlap {
            return Err(self.refuse_early(&what, format!("{c:?} was already collected")));
        }
        let room = self.artifact_room(&what, max_bytes)?;
        let pl = self.artifact_place(&what)?;
        // The archive may hold headers besides the contents: room for them.
        let cut = room + room / 8 + (1 << 20);
        let mut args = vec![pl.remote_dir.clone(), rel.clone(), cut.to_string()];
        args.extend(ancestors(&parts));
        let out = self.artifact_exec(
            &what,
            &pl,
            COLLECT_SH,
            args,
            collect_stdout_bound(cut),
            true,
        )?;
        let Some(out) = out else {
            return self.absent(&what, &rel, optional);
        };
        let text: Vec<u8> = out
            .stdout
            .into_iter()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        use base64::Engine as _;
        let tar = base64::engine::general_purpose::STANDARD
            .decode(&text)
            .map_err(|e| Error::Internal(format!("{what}: the sandbox sent no base64: {e}")))?;
        if tar.len() as u64 >= cut {
            // Cut at the bound (a 100 GB sparse file): over the bound,
            // whatever tar said of the pipe closed under it.
            return Err(self.over_bound(&what, room));
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("rfs-collect: tar failed") {
            let m = self.state().redactor.redact_str(stderr.trim());
            return Err(Error::StepFailed {
                name: what.clone(),
                reason: format!("tar failed in sandbox {}: {m}", pl.sandbox_id),
            });
        }
        let entries = self.read_archive(&what, &tar, &parts)?;
        let total: u64 = entries
            .iter()
            .map(|e| match e {
                Entry::File { bytes, .. } => bytes.len() as u64,
                _ => 0,
            })
            .sum();
        if total > room {
            return Err(self.over_bound(&what, room));
        }
        let junit = match junit {
            true => Some(self.junit_report(&what, &entries)?),
            false => None,
        };
        self.keep_collected(&what, &rel, entries, total, junit)
    }

    fn over_bound(&self, what: &str, room: u64) -> Error {
        self.refuse(format!(
            "{what} refused: it holds more than {room} bytes, the most it may (a run collects and puts at most {MAX_RUN_BYTES} bytes, {} already used; a script's max_bytes may lower it); nothing was kept",
            self.state().artifacts.bytes
        ))
    }

    /// Write the files into `artifacts/` (never through a link, never
    /// over a file) and journal them; what was written is removed again
    /// if anything fails.
    fn keep_collected(
        &self,
        what: &str,
        rel: &str,
        entries: Vec<Entry>,
        total: u64,
        junit: Option<rfs_evidence::events::JunitCounts>,
    ) -> Result<Collected> {
        let out = &self.cfg.out_dir;
        let redactor = self.state().redactor.clone();
        let (mut files, mut dirs, mut links, mut skipped, mut redacted) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut made: Vec<std::path::PathBuf> = vec![];
        let mut write = |files: &mut Vec<FileDigest>| -> std::io::Result<()> {
            let ensure = |bundle_rel: &str, made: &mut Vec<std::path::PathBuf>| {
                let mut dir = out.clone();
                for c in Path::new(bundle_rel).components() {
                    dir.push(c);
                    if std::fs::symlink_metadata(&dir).is_err() {
                        rfs_evidence::out_dir::create_dir(&dir)?;
                        made.push(dir.clone());
                    } else {
                        rfs_evidence::out_dir::ensure_dir(&dir)?;
                    }
                }
                Ok::<_, std::io::Error>(())
            };
            for e in &entries {
                match e {
                    Entry::File { rel, bytes } => {
                        let bundle_rel = format!("{DIR}/{rel}");
                        if let Some(parent) = Path::new(&bundle_rel).parent() {
                            ensure(&parent.to_string_lossy(), &mut made)?;
                        }
                        let kept = redactor.redact(bytes);
                        if kept != *bytes {
                            redacted.push(bundle_rel.clone());
                        }
                        let p = out.join(&bundle_rel);
                        rfs_evidence::out_dir::write_new(&p, &kept)?;
                        made.push(p);
                        files.push(FileDigest {
                            path: bundle_rel,
                            sha256: hex::encode(sha2::Sha256::digest(&kept)),
                            bytes: kept.len() as u64,
                        });
                    }
                    Entry::Dir(rel) => {
                        ensure(&format!("{DIR}/{rel}"), &mut made)?;
                        dirs.push(format!("{DIR}/{rel}"));
                    }
                    Entry::Link { rel, target } => links.push(ArtifactLink {
                        path: format!("{DIR}/{rel}"),
                        target: target.clone(),
                    }),
                    Entry::Skipped(rel) => skipped.push(format!("{DIR}/{rel}")),
                }
            }
            Ok(())
        };
        if let Err(e) = write(&mut files) {
            for p in made.iter().rev() {
                let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir(p));
            }
            return Err(self.refuse(format!(
                "{what} refused: cannot write it into the bundle: {e}"
            )));
        }
        let n = files.len();
        self.record(Event::ArtifactCollected {
            path: rel.to_owned(),
            files,
            dirs,
            links,
            skipped,
            redacted,
            bytes: total,
            junit,
        })?;
        let mut st = self.state();
        st.artifacts.bytes += total;
        st.artifacts.collected.push(rel.to_owned());
        Ok(Collected {
            files: n,
            bytes: total,
            path: format!("{DIR}/{rel}"),
            absent: false,
        })
    }

    /// `put(local, path)`: ship the file `local` (of the repository's
    /// working tree) to `path` under the synced root, kept in
    /// `bundle/put/` and journaled.
    pub(crate) fn put(&self, local: &str, path: &str) -> Result<FileDigest> {
        self.check_cancelled()?;
        let what = format!("put({local:?}, {path:?})");
        rfs_evidence::validate::path("its local path", local)
            .map_err(|e| self.refuse_early(&what, e))?;
        let parts = sandbox_path(path).map_err(|m| self.refuse_early(&what, m))?;
        self.refuse_secret_in("put()'s destination", path)?;
        let rel = parts.join("/");
        if self.state().artifacts.put.contains(&rel) {
            return Err(self.refuse_early(&what, format!("{rel:?} was already put")));
        }
        let bytes = self.read_put(&what, local)?;
        let room = self.artifact_room(&what, None)?;
        if bytes.len() as u64 > room {
            return Err(self.over_bound(&what, room));
        }
        let pl = self.artifact_place(&what)?;
        let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
        // The bundle's copy (what a replay ships), when the run has one.
        let bundled = if self.cfg.bundle.is_some() {
            let bundle_rel = format!("{PUT_DIR}/{rel}");
            let mut dir = self.cfg.out_dir.clone();
            let written = Path::new(&bundle_rel)
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
                .try_for_each(|c| {
                    dir.push(c);
                    rfs_evidence::out_dir::ensure_dir(&dir)
                })
                .and_then(|_| {
                    rfs_evidence::out_dir::write_new(&self.cfg.out_dir.join(&bundle_rel), &bytes)
                });
            written.map_err(|e| {
                self.refuse_early(&what, format!("cannot keep it in the bundle: {e}"))
            })?;
            Some(bundle_rel)
        } else {
            None
        };
        // Shipped from a scratch copy of its own: a provider may link the
        // file it uploads, and the sandbox must never reach the bundle.
        let scratch = self.cfg.scratch_dir.join(format!(
            "put-{}-{}",
            self.cfg.run_id,
            uuid::Uuid::new_v4().simple()
        ));
        rfs_evidence::out_dir::write_new(&scratch, &bytes).map_err(Error::internal)?;
        let upload = format!(
            "{}/.rfs-put-{}",
            pl.home.trim_end_matches('/'),
            uuid::Uuid::new_v4().simple()
        );
        let p = self.cfg.provider.clone();
        let sent = self
            .block_on_watched(&pl.sandbox_id, p.upload(&pl.sandbox_id, &scratch, &upload))
            .map_err(|how| {
                self.sandbox_lost(
                    &pl.sandbox_id,
                    &what,
                    &how,
                    format!("{what}: sandbox {how}"),
                )
            });
        let _ = std::fs::remove_file(&scratch);
        sent?.map_err(|e| Error::StepFailed {
            name: what.clone(),
            reason: format!("the provider could not upload it: {e}"),
        })?;
        let mut args = vec![pl.remote_dir.clone(), upload, rel.clone()];
        args.extend(ancestors(&parts));
        self.artifact_exec(&what, &pl, PUT_SH, args, HELPER_STDERR, false)?;
        let shown_local = self.state().redactor.redact_str(local);
        self.record(Event::ArtifactPut {
            local: shown_local,
            path: rel.clone(),
            sha256: sha256.clone(),
            bytes: bytes.len() as u64,
            bundled: bundled.clone(),
        })?;
        let mut st = self.state();
        st.artifacts.bytes += bytes.len() as u64;
        st.artifacts.put.push(rel);
        Ok(FileDigest {
            path: bundled.unwrap_or_default(),
            sha256,
            bytes: bytes.len() as u64,
        })
    }

    /// The bytes of `local`, which must be a regular file of the working
    /// tree rfs was started in (not in `.git`, not ignored by git), unless
    /// the person allowed it with `--allow-put`.
    fn read_put(&self, what: &str, local: &str) -> Result<Vec<u8>> {
        let abs = self.cfg.invocation_dir.join(local);
        let real = abs
            .canonicalize()
            .map_err(|e| self.refuse_early(what, format!("cannot read {local:?}: {e}")))?;
        let allowed = self
            .cfg
            .allowed_repos
            .puts()
            .iter()
            .any(|a| real.starts_with(a));
        if !allowed {
            let flag = format!("pass --allow-put {local} to allow it");
            let root = rfs_sandbox::source::allowed_repos::work_tree_of(&self.cfg.invocation_dir)
                .ok_or_else(|| {
                    self.refuse_early(
                        what,
                        format!("rfs was not started in a git working tree, so a script may put no file; {flag}"),
                    )
                })?;
            let inside = real
                .strip_prefix(&root)
                .ok()
                .filter(|r| r.components().next() != Some(Component::Normal(".git".as_ref())));
            let Some(inside) = inside else {
                return Err(self.refuse_early(
                    what,
                    format!(
                        "{local:?} is outside the working tree {} (or in its .git); a script may put only files of the repository rfs was started in; {flag}",
                        root.display()
                    ),
                ));
            };
            let ignored = git2::Repository::open(&root)
                .ok()
                .and_then(|r| r.is_path_ignored(inside).ok())
                .unwrap_or(true);
            if ignored {
                return Err(self.refuse_early(
                    what,
                    format!(
                        "{local:?} is ignored by git (where secrets such as .env live); a script may not put it; {flag}"
                    ),
                ));
            }
        }
        let meta = std::fs::metadata(&real)
            .map_err(|e| self.refuse_early(what, format!("cannot read {local:?}: {e}")))?;
        if !meta.is_file() {
            return Err(self.refuse_early(what, format!("{local:?} is not a regular file")));
        }
        if meta.len() > MAX_RUN_BYTES {
            return Err(self.over_bound(what, MAX_RUN_BYTES));
        }
        let mut bytes = vec![];
        std::fs::File::open(&real)
            .and_then(|f| f.take(MAX_RUN_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| self.refuse_early(what, format!("cannot read {local:?}: {e}")))?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_path_is_relative_and_stays_in_the_root() {
        assert_eq!(sandbox_path("./a//b/").unwrap(), vec!["a", "b"]);
        assert!(sandbox_path("/etc/passwd").is_err());
        assert!(sandbox_path("a/../../b").is_err());
        assert!(sandbox_path("a/..").is_err());
        assert!(sandbox_path(".").is_err());
        assert!(sandbox_path("").is_err());
        assert!(sandbox_path("a\nb").is_err());
        assert_eq!(
            ancestors(&["a".into(), "b".into(), "c".into()]),
            vec!["a", "a/b"]
        );
    }
}
