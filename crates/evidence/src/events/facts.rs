//! The records an [`super::Event`]'s fields are made of: streams, digests,
//! pins, bundles, environments, transfers.

use serde::{Deserialize, Serialize};

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A file rfs wrote into the output directory and closed, with its digest
/// (so `rfs verify` can check it was not changed after the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// Relative to the output directory, `/`-separated.
    pub path: String,
    /// sha256 (hex) of the file's bytes when rfs closed it.
    pub sha256: String,
    pub bytes: u64,
}

/// A symlink `collect()` found: recorded, never followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactLink {
    /// Where it would be in the bundle (`artifacts/...`); nothing is
    /// written there.
    pub path: String,
    /// What it points at, as the sandbox had it (redacted).
    pub target: String,
}

/// Output a step, a spawned process or a service printed past the run's
/// bound on the logs it keeps on this machine (`--max-log-bytes`, else
/// `RFS_MAX_LOG_BYTES`, else 256 MiB): its logs end at the bound, the
/// rest was read and dropped (the command kept running), neither logged
/// nor shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputCut {
    /// The run's bound, in bytes, over all its logs together.
    pub bound_bytes: u64,
    /// Who set it (`rfs's default`, `--max-log-bytes flag`, ...).
    pub set_by: String,
    /// Bytes of this command's output (redacted) not kept.
    pub bytes_dropped: u64,
}

impl OutputCut {
    /// `output cut at the run's log bound of 8 MiB (--max-log-bytes flag): 291.5 MiB dropped`.
    pub fn describe(&self) -> String {
        format!(
            "output cut at the run's log bound of {} ({}): {} dropped",
            super::sandbox_facts::show_bytes(self.bound_bytes),
            self.set_by,
            super::sandbox_facts::show_used(self.bytes_dropped)
        )
    }
}

/// The last lines a step's attempt printed on each stream: redacted as
/// its logs are, at most [`OutputTail::LINES`] lines and
/// [`OutputTail::BYTES`] bytes each, so a reader of the evidence sees the
/// line that matters without the log files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTail {
    pub stdout: String,
    pub stderr: String,
}

impl OutputTail {
    /// Lines kept of each stream.
    pub const LINES: usize = 15;
    /// Bytes kept of each stream.
    pub const BYTES: usize = 2048;

    /// The tails of `stdout` and `stderr` (`None` when both are empty).
    pub fn of(stdout: &str, stderr: &str) -> Option<OutputTail> {
        let t = OutputTail {
            stdout: tail(stdout),
            stderr: tail(stderr),
        };
        (!t.stdout.is_empty() || !t.stderr.is_empty()).then_some(t)
    }
}

/// The last [`OutputTail::LINES`] lines of `text`, at most
/// [`OutputTail::BYTES`] bytes (cut at a character boundary), without
/// the final line end.
fn tail(text: &str) -> String {
    let text = text.trim_end_matches('\n');
    let start = text
        .rmatch_indices('\n')
        .nth(OutputTail::LINES - 1)
        .map_or(0, |(i, _)| i + 1);
    let mut from = start.max(text.len().saturating_sub(OutputTail::BYTES));
    while !text.is_char_boundary(from) {
        from += 1;
    }
    text[from..].to_owned()
}

/// `--allow-dirty` shipped the working tree: the pinned commit is a
/// snapshot (in no branch) of these uncommitted paths on top of
/// `base_commit`. Evidence with it is not reproducible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingTreeShipped {
    pub base_commit: String,
    pub uncommitted_paths: Vec<String>,
}

impl WorkingTreeShipped {
    /// The one sentence every view says.
    pub fn describe(&self) -> String {
        format!(
            "NOT REPRODUCIBLE: --allow-dirty shipped the working tree, {} uncommitted path(s) on top of commit {}; commit them for evidence others can re-run",
            self.uncommitted_paths.len(),
            self.base_commit
        )
    }
}

/// How the proof went at one commit of `rfs bisect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BisectResult {
    Passed,
    Failed,
    /// Not testable there: refused, a step exited 125 (as `git bisect
    /// run`'s convention), or `--skip`.
    Skipped,
}

impl BisectResult {
    pub fn as_str(self) -> &'static str {
        match self {
            BisectResult::Passed => "passed",
            BisectResult::Failed => "failed",
            BisectResult::Skipped => "skipped",
        }
    }
}

/// The commit `rfs bisect` found, as the repository describes it (its
/// text is the repository's, shown escaped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BisectFoundCommit {
    pub subject: String,
    /// `Name <email>`.
    pub author: String,
    /// The author's date in the author's own time zone (RFC 2822).
    pub date: String,
    pub parents: Vec<String>,
    /// For a merge: where its first parent and the merged history met
    /// (the good end of the range to bisect inside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_base: Option<String>,
}

/// One commit's result, as the search held it at its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BisectTested {
    pub commit: String,
    pub result: BisectResult,
}

/// A submodule shipped at its pinned commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmodulePin {
    pub path: String,
    pub commit: String,
}

/// A file copied into the bundle (`bundle/…`) with its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundledFile {
    /// Relative to the output directory, `/`-separated.
    pub path: String,
    pub sha256: String,
    /// The `import` path that named it (absent for the script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
}

/// The script and the modules it imports, copied into the output directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleManifest {
    pub script: BundledFile,
    pub modules: Vec<BundledFile>,
}

/// The key that signs the journal (`journal.sig`): never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signer {
    /// `ssh-ed25519`.
    pub algorithm: String,
    /// `SHA256:…`, as `ssh-keygen -l` shows it.
    pub fingerprint: String,
}

/// What a replay replays (`rfs replay`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayOf {
    pub run_id: String,
    /// The original output directory, as given to `rfs replay`.
    pub out_dir: String,
    /// Hash of the original journal's last line.
    pub journal_head: String,
    /// sha256 of the original journal's bytes.
    pub journal_sha256: String,
    /// The commit the original run pinned (bound by the replay).
    pub commit: String,
    /// The environment the original's sandbox was placed in (absent when
    /// its journal has none): the replay's must be the same image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// `--allow-other-image`: the person let the replay run on a
    /// different image than the original's (said when it does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_other_image: bool,
    /// The images the original's services ran, by service name: the
    /// replay's service of that name must run the same image.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub services: std::collections::BTreeMap<String, ImagePin>,
}

/// What a sandbox's environment is, by content (`placement`): what
/// `rfs replay` compares and the attestation lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// The docker image the sandbox was created from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImagePin>,
    /// The host a `local` step sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFingerprint>,
}

impl Environment {
    /// One line for EVIDENCE.md (`None` when there is nothing to say).
    pub fn describe(&self) -> Option<String> {
        let mut parts = vec![];
        if let Some(i) = &self.image {
            let mut p = format!("image {}", i.id);
            if !i.repo_digests.is_empty() {
                p.push_str(&format!(" ({})", i.repo_digests.join(", ")));
            }
            parts.push(p);
        }
        if let Some(h) = &self.host {
            let mut p = format!("host kernel {}", h.kernel);
            if let Some(os) = &h.os {
                p.push_str(&format!(", {os}"));
            }
            if let Some(d) = &h.packages_sha256 {
                p.push_str(&format!(", packages sha256 {}", &d[..d.len().min(12)]));
            }
            parts.push(p);
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A docker image by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePin {
    /// The image id (`sha256:…`, the digest of its configuration).
    pub id: String,
    /// Its repository digests (`name@sha256:…`), where the daemon knows
    /// any (an image pulled from or pushed to a registry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repo_digests: Vec<String>,
}

/// The host environment a `local` step sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFingerprint {
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// `ID VERSION_ID` of `/etc/os-release`, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// sha256 of `dpkg-query -W`'s output (every installed package and
    /// version), where the host has dpkg.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages_sha256: Option<String>,
}

/// How a sync's archive reached the sandbox (`source.verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transfer {
    /// Streamed into the verifier while it was built.
    Stream,
    /// Uploaded as a file, then verified.
    File,
}

/// Whether a sync's archive was compressed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
    None,
}

/// What verified a sync inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verifier {
    /// rfs's own executable.
    Native,
    /// The shell script with POSIX tools.
    Posix,
}

/// Which digest of the archive the two sides compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DigestKind {
    /// SHA-256 of the whole stream (the POSIX script's `sha256sum`).
    #[serde(rename = "sha256")]
    Sha256,
    /// The stream with each entry's content replaced by its SHA-256
    /// (rfs's native verifier).
    #[serde(rename = "tar-entries-sha256")]
    Entries,
}

impl DigestKind {
    /// The name journaled in `source.verify`'s `archive_digest`.
    pub fn name(self) -> &'static str {
        match self {
            DigestKind::Sha256 => "sha256",
            DigestKind::Entries => "tar-entries-sha256",
        }
    }
}

/// The counts of a JUnit report `collect(path, #{ junit: true })` read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JunitCounts {
    pub tests: u64,
    pub failures: u64,
    pub errors: u64,
    pub skipped: u64,
}

#[cfg(test)]
mod tests {
    use super::OutputTail;

    #[test]
    fn a_tail_keeps_the_last_lines_within_its_bounds() {
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let t = OutputTail::of(&text, "").unwrap();
        assert_eq!(t.stdout.lines().count(), OutputTail::LINES);
        assert!(t.stdout.starts_with("line 26\n") && t.stdout.ends_with("line 40"));
        let long = "é".repeat(OutputTail::BYTES);
        let t = OutputTail::of("", &long).unwrap();
        assert!(t.stderr.len() <= OutputTail::BYTES && t.stderr.chars().all(|c| c == 'é'));
        assert_eq!(OutputTail::of("", ""), None);
    }
}
