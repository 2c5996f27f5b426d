//! `rfs verify OUT`: every check of a bundle, printed as it passes.

use std::path::PathBuf;

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct VerifyCommand {
    /// The run's output directory (holds journal.jsonl), or a suite's
    /// or bisect's folder (every bundle in it is verified, and a suite's
    /// index.json against them).
    out: PathBuf,
    /// Require a signature (journal.sig) by a key this `ssh-keygen`
    /// allowed-signers file allows for namespace `rfs`.
    #[arg(long, value_name = "FILE")]
    allowed_signers: Option<PathBuf>,
    /// The principal the signer must be (with --allowed-signers).
    #[arg(long, value_name = "ID")]
    identity: Option<String>,
    /// Verify a bundle whose EVIDENCE.md or report.html another rfs
    /// made (this rfs cannot compare them): they are named as NOT
    /// CHECKED, and everything else must verify. Without it, such a
    /// bundle is not verified.
    #[arg(long)]
    allow_unchecked_views: bool,
}

impl VerifyCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        let trust = rfs_evidence::seal::Trust {
            allowed_signers: self.allowed_signers.clone(),
            identity: self.identity.clone(),
        };
        let views = if self.allow_unchecked_views {
            rfs_evidence::verify::Views::AllowUnchecked
        } else {
            rfs_evidence::verify::Views::MustMatch
        };
        if super::verify_folder::is_folder(&self.out) {
            return super::verify_folder::verify(&self.out, &trust, views);
        }
        verify(
            &self.out,
            rfs_evidence::seal::Trust {
                allowed_signers: self.allowed_signers,
                identity: self.identity,
            },
            if self.allow_unchecked_views {
                rfs_evidence::verify::Views::AllowUnchecked
            } else {
                rfs_evidence::verify::Views::MustMatch
            },
        )
    }
}

/// `rfs verify OUT`: print every check that passed; the first failure is
/// the error (exit 4).
fn verify(
    out: &std::path::Path,
    trust: rfs_evidence::seal::Trust,
    views: rfs_evidence::verify::Views,
) -> Result<i32, Error> {
    let (passed, failed) = match rfs_evidence::verify::verify_views(out, trust, views) {
        Ok(p) => (p, None),
        Err(mut f) => (std::mem::take(&mut f.passed), Some(f)),
    };
    for p in &passed {
        let word = if p.unchecked { "UNCHECKED" } else { "ok" };
        outln!("{word}: {}: {}", p.check, p.detail);
    }
    match failed {
        None => {
            let unchecked: Vec<_> = passed
                .iter()
                .filter(|p| p.unchecked)
                .map(|p| p.check)
                .collect();
            if unchecked.is_empty() {
                outln!("{}: verified", out.display());
            } else {
                outln!(
                    "{}: verified, except {} (made by another rfs, NOT CHECKED: do not rely on {})",
                    out.display(),
                    unchecked.join(" and "),
                    if unchecked.len() == 1 { "it" } else { "them" }
                );
            }
            // Intact, and yet nobody else can re-run it: said every time.
            if let Some(w) = rfs_evidence::report::FinishedRun::read(out)
                .ok()
                .and_then(|b| b.summary.not_reproducible)
            {
                outln!("warning: {}", w.describe());
            }
            Ok(exit_code::SUCCESS)
        }
        Some(f) => Err(Error::NotVerified {
            out: out.display().to_string(),
            check: f.check,
            reason: f.reason.to_string(),
        }),
    }
}
