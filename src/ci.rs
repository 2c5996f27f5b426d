//! What `rfs run` leaves for CI besides the bundle: JUnit XML
//! (`--junit FILE`) and, when `GITHUB_STEP_SUMMARY` names a file (GitHub
//! Actions sets it for each step), a Markdown summary appended to it.
//! Both are views of the bundle, made after the run from its journal.

use std::path::{Path, PathBuf};

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;
use rfs_evidence::report::{FinishedRun, ReportError};

/// The CI views asked for, validated before the run.
#[derive(Debug, Default)]
pub(crate) struct Views {
    junit: Option<PathBuf>,
    step_summary: Option<PathBuf>,
}

impl Views {
    /// `--junit FILE` (its folder must exist and it must not be one) and
    /// `GITHUB_STEP_SUMMARY`.
    pub(crate) fn from_args(junit: Option<PathBuf>) -> Result<Views, Error> {
        if let Some(j) = &junit {
            let parent = j.parent().filter(|p| !p.as_os_str().is_empty());
            if j.is_dir() || parent.is_some_and(|p| !p.is_dir()) {
                return Err(Error::Usage(format!(
                    "--junit {}: not a file in an existing folder",
                    j.display()
                )));
            }
        }
        let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Ok(Views {
            junit,
            step_summary,
        })
    }

    /// Write the views of the bundle in `out` after a run that exited
    /// with `code`; the exit code to use. A JUnit file that cannot be
    /// written fails a run that passed (CI would read no result); a step
    /// summary that cannot be written is a warning.
    pub(crate) fn write(&self, out: &Path, code: i32) -> i32 {
        if self.junit.is_none() && self.step_summary.is_none() {
            return code;
        }
        let bundle = match FinishedRun::read(out) {
            Ok(b) => b,
            // No journal: the run was refused before it began.
            Err(ReportError::Read { .. }) if !out.join("journal.jsonl").exists() => return code,
            Err(e) => return self.failed(code, &e),
        };
        if let Some(path) = &self.step_summary {
            let md = rfs_evidence::report::markdown::summary(&bundle, &out.display().to_string());
            if let Err(e) = rfs_evidence::report::append(path, &format!("{md}\n")) {
                errln!("rfs: warning: GITHUB_STEP_SUMMARY: {e}");
            }
        }
        if let Some(path) = &self.junit {
            let xml = rfs_evidence::report::junit::xml_of(out, &bundle);
            if let Err(source) = std::fs::write(path, xml) {
                let e = ReportError::Write {
                    path: path.display().to_string(),
                    source,
                };
                return self.failed(code, &e);
            }
        }
        code
    }

    fn failed(&self, code: i32, e: &ReportError) -> i32 {
        errln!("rfs: error: cannot write the CI views: {e}");
        if code == exit_code::SUCCESS {
            exit_code::INTERNAL
        } else {
            code
        }
    }
}
