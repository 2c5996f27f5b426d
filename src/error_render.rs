//! How errors look on stderr: miette's handler, without the diagnostic
//! code line (`rfs::script`) above every error unless `-v` asks for it —
//! the code names rfs's error type, which helps a developer of rfs, not
//! someone reading why their run was refused — and with every text of the
//! error (message, help, labels) made inert as the console's other
//! untrusted text is ([`crate::reporter::text::block`]): an error names
//! steps, paths, commits and messages that a script or a repository
//! chose, and a control character in one must not reach the terminal.

use std::fmt;

use miette::{Diagnostic, LabeledSpan, ReportHandler, Severity, SourceCode};

/// A handler that renders with `inner`, codes hidden unless `codes`.
pub(crate) struct Handler {
    pub(crate) inner: Box<dyn ReportHandler>,
    pub(crate) codes: bool,
}

impl ReportHandler for Handler {
    fn debug(&self, diagnostic: &dyn Diagnostic, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug(&Inert::new(diagnostic, self.codes), f)
    }
}

/// `d` with its texts inert, and its code only when `codes`.
struct Inert<'a> {
    d: &'a dyn Diagnostic,
    codes: bool,
    message: String,
    help: Option<String>,
}

impl<'a> Inert<'a> {
    fn new(d: &'a dyn Diagnostic, codes: bool) -> Self {
        use crate::reporter::text::block;
        Inert {
            d,
            codes,
            message: block(&d.to_string()),
            help: d.help().map(|h| block(&h.to_string())),
        }
    }
}

impl fmt::Debug for Inert<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Inert<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Inert<'_> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.d.source()
    }
}

impl Diagnostic for Inert<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.d.code().filter(|_| self.codes)
    }
    fn severity(&self) -> Option<Severity> {
        self.d.severity()
    }
    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.help
            .as_deref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display + 'b>)
    }
    fn url<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.d.url()
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.d.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let labels = self.d.labels()?.map(|mut l| {
            let text = l.label().map(crate::reporter::text::inline);
            l.set_label(text);
            l
        });
        Some(Box::new(labels))
    }
    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn Diagnostic> + 'b>> {
        self.d.related()
    }
    fn diagnostic_source(&self) -> Option<&dyn Diagnostic> {
        self.d.diagnostic_source()
    }
}
