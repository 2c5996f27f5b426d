//! `EVIDENCE.md`: the human-readable summary of a run, rewritten as the run
//! goes so an interrupted run still leaves one. It records the journal head
//! so `rfs journal verify` can detect a truncated journal.

use std::fmt::Write as _;
use std::path::Path;

/// One step as the evidence lists it.
#[derive(Debug, Clone, Default)]
pub struct StepRecord {
    pub name: String,
    pub exit: Option<i32>,
    pub outcome: String,
    pub duration_ms: u128,
    pub attempts: u32,
    pub cwd: String,
    pub log: String,
}

/// Everything EVIDENCE.md shows.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub run_id: String,
    pub script: String,
    pub provider: String,
    pub provider_reason: String,
    pub sandbox_id: Option<String>,
    pub labels: Vec<(String, String)>,
    pub commit: Option<String>,
    pub tree_digest: Option<String>,
    pub archive_sha256: Option<String>,
    pub files: Option<usize>,
    pub workdir: Option<String>,
    pub steps: Vec<StepRecord>,
    pub recordings: Vec<String>,
    pub cleanup: Option<String>,
    pub outcome: Option<String>,
    pub journal_lines: u64,
    pub journal_head: String,
}

const HEAD_PREFIX: &str = "- journal head: ";

impl Evidence {
    pub fn render(&self) -> String {
        let mut s = String::new();
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".into());
        let _ = writeln!(s, "# rfs run {}\n", self.run_id);
        let _ = writeln!(s, "- script: `{}`", self.script);
        let _ = writeln!(
            s,
            "- provider: `{}` (chosen by {})",
            self.provider, self.provider_reason
        );
        let _ = writeln!(s, "- sandbox id: `{}`", opt(&self.sandbox_id));
        let _ = writeln!(s, "- source commit: `{}`", opt(&self.commit));
        let _ = writeln!(s, "- tree digest: `{}`", opt(&self.tree_digest));
        let _ = writeln!(s, "- archive sha256: `{}`", opt(&self.archive_sha256));
        if let Some(f) = self.files {
            let _ = writeln!(s, "- files synced and verified: {f}");
        }
        let _ = writeln!(s, "- source workdir: `{}`", opt(&self.workdir));
        let _ = writeln!(
            s,
            "- outcome: {}",
            self.outcome.as_deref().unwrap_or("running")
        );
        if !self.labels.is_empty() {
            let _ = writeln!(s, "\n## Sandbox labels\n");
            for (k, v) in &self.labels {
                let _ = writeln!(s, "- `{k}` = `{v}`");
            }
        }
        let _ = writeln!(s, "\n## Steps\n");
        if self.steps.is_empty() {
            let _ = writeln!(s, "(no steps ran)");
        } else {
            let _ = writeln!(
                s,
                "| # | step | outcome | exit | attempts | duration | cwd | log |\n|---|---|---|---|---|---|---|---|"
            );
            for (i, st) in self.steps.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} ms | `{}` | {} |",
                    i + 1,
                    st.name.replace('|', "\\|"),
                    st.outcome,
                    st.exit.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                    st.attempts,
                    st.duration_ms,
                    st.cwd,
                    st.log
                );
            }
        }
        if !self.recordings.is_empty() {
            let _ = writeln!(s, "\n## Terminal recordings\n");
            for r in &self.recordings {
                let _ = writeln!(s, "- {r}");
            }
        }
        let _ = writeln!(s, "\n## Cleanup\n");
        let _ = writeln!(
            s,
            "{}",
            self.cleanup.as_deref().unwrap_or("(not yet cleaned up)")
        );
        let _ = writeln!(s, "\n## Journal\n");
        let _ = writeln!(
            s,
            "- journal: `journal.jsonl` ({} lines)",
            self.journal_lines
        );
        let _ = writeln!(s, "{HEAD_PREFIX}`{}`", self.journal_head);
        let _ = writeln!(s, "- re-verify with: `rfs journal verify journal.jsonl`");
        s
    }

    /// Write atomically (temp file + rename) into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(".EVIDENCE.md.tmp");
        std::fs::write(&tmp, self.render())?;
        std::fs::rename(tmp, dir.join("EVIDENCE.md"))
    }
}

/// The (line count, head) recorded in an EVIDENCE.md text.
pub fn recorded_head(evidence: &str) -> Option<(u64, String)> {
    let head = evidence
        .lines()
        .find_map(|l| l.strip_prefix(HEAD_PREFIX))?
        .trim_matches('`')
        .to_owned();
    let lines = evidence
        .lines()
        .find_map(|l| l.strip_prefix("- journal: `journal.jsonl` ("))?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    Some((lines, head))
}
