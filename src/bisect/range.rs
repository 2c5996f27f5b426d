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

/// `id` as the journal describes the commit found: subject, author,
/// date in the author's time zone, parents, and for a merge the base of
/// its parents (`None` when the repository cannot say).
pub(crate) fn found_commit(
    dir: &Path,
    id: &str,
) -> Option<rfs_evidence::events::BisectFoundCommit> {
    let repo = Repository::discover(dir).ok()?;
    let c = repo.find_commit(Oid::from_str(id).ok()?).ok()?;
    let a = c.author();
    let parents: Vec<Oid> = c.parent_ids().collect();
    let merge_base = match parents.as_slice() {
        [first, second, ..] => repo.merge_base(*first, *second).ok().map(|o| o.to_string()),
        _ => None,
    };
    Some(rfs_evidence::events::BisectFoundCommit {
        subject: c.summary().unwrap_or("").to_owned(),
        author: format!("{} <{}>", a.name().unwrap_or("?"), a.email().unwrap_or("?")),
        date: author_date(&a.when()),
        parents: parents.iter().map(|p| p.to_string()).collect(),
        merge_base,
    })
}

/// A commit time in its own time zone (as `git log` shows the author's
/// date), RFC 2822.
fn author_date(when: &git2::Time) -> String {
    let offset = time::UtcOffset::from_whole_seconds(when.offset_minutes() * 60)
        .unwrap_or(time::UtcOffset::UTC);
    time::OffsetDateTime::from_unix_timestamp(when.seconds())
        .ok()
        .and_then(|t| {
            t.to_offset(offset)
                .format(&time::format_description::well_known::Rfc2822)
                .ok()
        })
        .unwrap_or_default()
}

/// The header and message of `id`, as `git bisect` shows the commit it
/// found (the date in the author's time zone).
pub(crate) fn describe(dir: &Path, id: &str) -> String {
    let show = || -> Result<String, git2::Error> {
        let repo = Repository::discover(dir)?;
        let c = repo.find_commit(Oid::from_str(id)?)?;
        let a = c.author();
        let merge = if c.parent_count() > 1 {
            let ids: Vec<String> = c
                .parent_ids()
                .map(|p| p.to_string()[..12].to_owned())
                .collect();
            format!("Merge: {}\n", ids.join(" "))
        } else {
            String::new()
        };
        let body: String = c
            .message()
            .unwrap_or("")
            .trim_end()
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect();
        Ok(format!(
            "commit {id}\n{merge}Author: {} <{}>\nDate:   {}\n\n{body}",
            a.name().unwrap_or("?"),
            a.email().unwrap_or("?"),
            author_date(&a.when())
        ))
    };
    show().unwrap_or_else(|_| format!("commit {id}\n"))
}
