//! How errors look on stderr: miette's handler, without the diagnostic
//! code line (`rfs::script`) above every error unless `-v` asks for it —
//! the code names rfs's error type, which helps a developer of rfs, not
//! someone reading why their run was refused.

use std::fmt;

use miette::{Diagnostic, LabeledSpan, ReportHandler, Severity, SourceCode};

/// A handler that renders with `inner`, codes hidden unless `codes`.
pub(crate) struct Handler {
    pub(crate) inner: Box<dyn ReportHandler>,
    pub(crate) codes: bool,
}

impl ReportHandler for Handler {
    fn debug(&self, diagnostic: &dyn Diagnostic, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.codes {
            self.inner.debug(diagnostic, f)
        } else {
            self.inner.debug(&CodeLess(diagnostic), f)
        }
    }
}

/// `0` with everything but its code.
struct CodeLess<'a>(&'a dyn Diagnostic);

impl fmt::Debug for CodeLess<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl fmt::Display for CodeLess<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}

impl std::error::Error for CodeLess<'_> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Diagnostic for CodeLess<'_> {
    fn severity(&self) -> Option<Severity> {
        self.0.severity()
    }
    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.0.help()
    }
    fn url<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.0.url()
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.0.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.0.labels()
    }
    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn Diagnostic> + 'b>> {
        self.0.related()
    }
    fn diagnostic_source(&self) -> Option<&dyn Diagnostic> {
        self.0.diagnostic_source()
    }
}
