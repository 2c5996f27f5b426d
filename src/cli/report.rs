//! `rfs report OUT`: a verified bundle's view, as HTML or Markdown.

use std::path::PathBuf;

use crate::error::Error;
use crate::exit_code;

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
    let skip = [crate::report::HTML_FILE];
    if let Err(f) = crate::verify::verify_except(
        out,
        crate::seal::Trust::default(),
        crate::verify::Views::MustMatch,
        &skip,
    ) {
        return Err(Error::NotVerified {
            out: out.display().to_string(),
            check: f.check,
            reason: f.reason.to_string(),
        });
    }
    let failed = |e: crate::report::ReportError| Error::Internal(e.to_string());
    match (format, output) {
        (ReportFormat::Html, None) => {
            crate::report::write_html(out).map_err(failed)?;
            outln!("{}", out.join(crate::report::HTML_FILE).display());
        }
        (ReportFormat::Html, Some(file)) => {
            let page = crate::report::render_html(out).map_err(failed)?;
            std::fs::write(file, page).map_err(Error::internal)?;
            outln!("{}", file.display());
        }
        (ReportFormat::Markdown, to) => {
            let b = crate::report::FinishedRun::read(out).map_err(failed)?;
            let md = crate::report::markdown::summary(&b, &out.display().to_string());
            match to {
                Some(file) => std::fs::write(file, md).map_err(Error::internal)?,
                None => outln!("{}", md.trim_end()),
            }
        }
    }
    Ok(exit_code::SUCCESS)
}
