//! The commits `rfs bisect` searches: `good`, then the first-parent path
//! from it to `bad` (as `git rev-list --first-parent good..bad`, oldest
//! first), resolved once to immutable ids.

use std::path::Path;

use git2::{Oid, Repository};

/// Why the range was refused (a usage error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RangeError {
    #[error("{0} is not inside a git repository")]
    NotARepo(String),
    #[error("`{rev}` does not name a commit: {message}")]
    BadRevision { rev: String, message: String },
    #[error("`{good}` is not an ancestor of `{bad}` on its first-parent history, so there is no range between them to bisect")]
    NotAnAncestor { good: String, bad: String },
    #[error("`{0}` and `{1}` are the same commit: there is nothing to bisect")]
    Same(String, String),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// The commits, `good` first and `bad` last.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub commits: Vec<Oid>,
}

/// Resolve `good` and `bad` in the repository holding `dir`.
pub(crate) fn resolve(dir: &Path, good: &str, bad: &str) -> Result<Range, RangeError> {
    let repo =
        Repository::discover(dir).map_err(|_| RangeError::NotARepo(dir.display().to_string()))?;
    let commit = |rev: &str| -> Result<Oid, RangeError> {
        repo.revparse_single(rev)
            .and_then(|o| o.peel_to_commit())
            .map(|c| c.id())
            .map_err(|e| RangeError::BadRevision {
                rev: rev.to_owned(),
                message: e.message().to_owned(),
            })
    };
    let (g, b) = (commit(good)?, commit(bad)?);
    if g == b {
        return Err(RangeError::Same(good.into(), bad.into()));
    }
    let mut path = vec![];
    let mut at = repo.find_commit(b)?;
    loop {
        if at.id() == g {
            break;
        }
        path.push(at.id());
        match at.parent(0) {
            Ok(p) => at = p,
            Err(_) => {
                return Err(RangeError::NotAnAncestor {
                    good: good.into(),
                    bad: bad.into(),
                })
            }
        }
    }
    path.push(g);
    path.reverse();
    Ok(Range { commits: path })
}

/// The one-line subject and header of `id`, as `git bisect` shows the
/// commit it found.
pub(crate) fn describe(dir: &Path, id: &str) -> String {
    let show = || -> Result<String, git2::Error> {
        let repo = Repository::discover(dir)?;
        let c = repo.find_commit(Oid::from_str(id)?)?;
        let a = c.author();
        let when = time::OffsetDateTime::from_unix_timestamp(a.when().seconds())
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc2822)
                    .ok()
            })
            .unwrap_or_default();
        let body: String = c
            .message()
            .unwrap_or("")
            .trim_end()
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect();
        Ok(format!(
            "commit {id}\nAuthor: {} <{}>\nDate:   {when}\n\n{body}",
            a.name().unwrap_or("?"),
            a.email().unwrap_or("?")
        ))
    };
    show().unwrap_or_else(|_| format!("commit {id}\n"))
}
