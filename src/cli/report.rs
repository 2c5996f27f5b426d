//! `rfs report OUT`: a verified bundle's view, as HTML or Markdown.

use std::path::PathBuf;

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct ReportCommand {
    /// The run's output directory (holds journal.jsonl).
    out: PathBuf,
    /// `html` (default) or `markdown`.
    #[arg(long, value_enum, default_value = "html")]
    format: ReportFormat,
    /// Write here instead (html: instead of OUT/report.html;
    /// markdown: instead of standard output).
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// What `rfs report` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReportFormat {
    Html,
    Markdown,
}

impl ReportCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        report(&self.out, self.format, self.output.as_deref())
    }
}

/// `rfs report OUT`: verify the bundle (as `rfs verify` does; a bundle
/// that does not verify gets no report), then write its view.
fn report(
    out: &std::path::Path,
    format: ReportFormat,
    output: Option<&std::path::Path>,
) -> Result<i32, Error> {
    // The report in the bundle is what this command replaces.
    let skip = [rfs_evidence::report::HTML_FILE];
    if let Err(f) = rfs_evidence::verify::verify_except(
        out,
        rfs_evidence::seal::Trust::default(),
        rfs_evidence::verify::Views::MustMatch,
        &skip,
    ) {
        return Err(Error::NotVerified {
            out: out.display().to_string(),
            check: f.check,
            reason: f.reason.to_string(),
        });
    }
    let failed = |e: rfs_evidence::report::ReportError| Error::Internal(e.to_string());
    match (format, output) {
        (ReportFormat::Html, None) => {
            rfs_evidence::report::write_html(out).map_err(failed)?;
            outln!("{}", out.join(rfs_evidence::report::HTML_FILE).display());
        }
        (ReportFormat::Html, Some(file)) => {
            let page = rfs_evidence::report::render_html(out).map_err(failed)?;
            std::fs::write(file, page).map_err(Error::internal)?;
            outln!("{}", file.display());
        }
        (ReportFormat::Markdown, to) => {
            let b = rfs_evidence::report::FinishedRun::read(out).map_err(failed)?;
            let md = rfs_evidence::report::markdown::summary(&b, &out.display().to_string());
            match to {
                Some(file) => std::fs::write(file, md).map_err(Error::internal)?,
                None => outln!("{}", md.trim_end()),
            }
        }
    }
    Ok(exit_code::SUCCESS)
}
