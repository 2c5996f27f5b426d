//! Rhai errors → miette diagnostics pointing at the script line. A failure
//! inside a function of an imported module points at the module's line
//! (its own source shown), with the call in the script as context; one
//! inside the stdlib points at the call that reached it.

use miette::{NamedSource, SourceOffset, SourceSpan};
use rhai::{EvalAltResult, ParseError, Position};

use rfs_evidence::error::{CallSite, Error, ScriptError};

/// The script being run, for rendering.
#[derive(Clone)]
pub(crate) struct ScriptSource {
    pub name: String,
    pub text: String,
}

impl ScriptSource {
    fn span(&self, pos: Position) -> Option<SourceSpan> {
        let (line, col) = (pos.line()?, pos.position().unwrap_or(1));
        let off = SourceOffset::from_location(&self.text, line, col).offset();
        let len = self.text[off.min(self.text.len())..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .map(char::len_utf8)
            .sum::<usize>()
            .max(1);
        Some(SourceSpan::new(off.into(), len))
    }

    fn error(&self, message: String, pos: Position, label: &str, cause: Error) -> Error {
        Error::Script(Box::new(ScriptError {
            message,
            src: NamedSource::new(&self.name, displayable(&self.text)),
            span: self.span(pos),
            label: label.to_owned(),
            help: None,
            cause: Box::new(cause),
            called_from: vec![],
        }))
    }

    /// What [`super::lint`] found (at least one problem): the first at its
    /// span, the others listed with their line and column.
    pub(crate) fn lint_error(&self, problems: &[super::problem::Problem]) -> Error {
        let first = &problems[0];
        let mut err = self.error(
            first.message.clone(),
            first.pos,
            "here",
            Error::Usage(first.message.clone()),
        );
        let mut help: Vec<String> = first.help.iter().cloned().collect();
        for p in &problems[1..] {
            help.push(format!(
                "also at {}:{}: {}{}",
                p.pos.line().unwrap_or(0),
                p.pos.position().unwrap_or(0),
                p.message,
                p.help
                    .as_ref()
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default()
            ));
        }
        if let Error::Script(s) = &mut err {
            s.help = (!help.is_empty()).then(|| help.join("\n"));
        }
        err
    }

    /// A compile error.
    pub(crate) fn parse_error(&self, e: &ParseError) -> Error {
        let message = format!("the script does not compile: {}", e.err_type());
        self.error(message.clone(), e.position(), "here", Error::Usage(message))
    }

    /// A runtime error; `classify` turns its message into what the
    /// failure is (the message may be redacted on the way).
    pub(crate) fn runtime_error(
        &self,
        e: &EvalAltResult,
        classify: impl FnOnce(String) -> Error,
    ) -> Error {
        let inner = e.unwrap_inner();
        let cause = classify(message_of(inner));
        let message = match &cause {
            Error::Interrupted => "interrupted".to_owned(),
            Error::Refused(m) | Error::Internal(m) | Error::ScriptFailed(m) | Error::Usage(m) => {
                m.clone()
            }
            other => other.to_string(),
        };
        let mut chain = vec![];
        // Each script function the failure passed through: (name, the
        // source it is defined in, where it was called from in its caller).
        let mut frames: Vec<(&str, &str, Position)> = vec![];
        let mut cur = e;
        loop {
            match cur {
                EvalAltResult::ErrorInFunctionCall(f, src, next, pos) => {
                    chain.push(format!("in call to `{f}`"));
                    frames.push((f, src, *pos));
                    cur = next;
                }
                EvalAltResult::ErrorInModule(m, next, _) => {
                    chain.push(format!("in module `{m}`"));
                    cur = next;
                }
                _ => break,
            }
        }
        let label = match cause {
            Error::Refused(_) => "refused here",
            Error::Interrupted => "interrupted here",
            _ => "failed here",
        };
        let help = (!chain.is_empty()).then(|| chain.join(", "));
        // The innermost function defined in an imported module (not the
        // stdlib): the failure is on its line (where it called deeper, or
        // where it failed itself).
        let in_module = frames
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, (_, src, _))| {
                let text = super::resolver::module_text(src)?;
                let pos = match frames.get(i + 1) {
                    Some((_, _, called_at)) => *called_at,
                    None => cur.position(),
                };
                Some((src, text, pos))
            });
        let mut err = match in_module {
            Some((src, text, pos)) if !pos.is_none() => {
                let module = ScriptSource {
                    name: shown_path(src),
                    text: text.to_string(),
                };
                let mut err = module.error(message, pos, label, cause);
                if let Error::Script(s) = &mut err {
                    let (f, _, called_at) = frames[0];
                    s.called_from.push(CallSite {
                        message: format!("called from {}", self.name),
                        src: NamedSource::new(&self.name, displayable(&self.text)),
                        span: self.span(called_at),
                        label: format!("in call to `{f}`"),
                    });
                }
                err
            }
            _ => self.error(message, call_site(e), label, cause),
        };
        if let Error::Script(s) = &mut err {
            s.help = help;
        }
        err
    }
}

/// A module's path as a diagnostic names it: relative to the current
/// directory when inside it.
fn shown_path(src: &str) -> String {
    let p = std::path::Path::new(src);
    std::env::current_dir()
        .ok()
        .and_then(|d| d.canonicalize().ok())
        .and_then(|d| p.strip_prefix(d).ok().map(|r| r.display().to_string()))
        .unwrap_or_else(|| src.to_owned())
}

/// The text of an error without Rhai's position suffix.
pub(crate) fn message_of(e: &EvalAltResult) -> String {
    match e {
        EvalAltResult::ErrorRuntime(v, _) => v.to_string(),
        EvalAltResult::ErrorTerminated(v, _) => v.to_string(),
        other => {
            let text = other.to_string();
            match text.rfind(" (line ") {
                Some(i) if text.ends_with(')') => text[..i].to_owned(),
                _ => text,
            }
        }
    }
}

/// The outermost position in the main script (the call site).
fn call_site(e: &EvalAltResult) -> Position {
    let p = e.position();
    if !p.is_none() {
        return p;
    }
    match e {
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _)
        | EvalAltResult::ErrorInModule(_, inner, _) => call_site(inner),
        _ => Position::NONE,
    }
}

/// The script's text as a diagnostic may show it: every invisible
/// character (bidi controls, zero-width characters, the BOM, line
/// separators other than `\n`) replaced by a visible one of the same
/// UTF-8 length, so spans still point at the same bytes and nothing
/// reorders or hides what the terminal shows.
pub(crate) fn displayable(text: &str) -> String {
    text.chars()
        .map(|c| {
            let hidden = c != '\n'
                && c != '\r'
                && c != '\t'
                && (c.is_control()
                    || rfs_evidence::validate::is_invisible(c)
                    || matches!(c, '\u{2028}' | '\u{2029}'));
            match (hidden, c.len_utf8()) {
                (false, _) => c,
                (true, 1) => '?',
                (true, 2) => '\u{BF}',
                (true, 3) => '\u{FFFD}',
                (true, _) => '\u{1F5B5}',
            }
        })
        .collect()
}

#[cfg(test)]
mod displayable_tests {
    #[test]
    fn invisible_characters_in_a_script_are_shown_visibly_at_the_same_offsets() {
        let text = "step(\"a\u{202E}b\u{2028}\u{85}\", \"x\");\n";
        let shown = super::displayable(text);
        assert_eq!(shown.len(), text.len());
        assert_eq!(shown, "step(\"a\u{FFFD}b\u{FFFD}\u{BF}\", \"x\");\n");
    }
}
