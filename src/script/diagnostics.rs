//! Rhai errors → miette diagnostics pointing at the script line (the call
//! site in the main script when the failure is deeper, e.g. in a module).

use miette::{NamedSource, SourceOffset, SourceSpan};
use rhai::{EvalAltResult, ParseError, Position};

use crate::error::{Error, ScriptError};

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
        }))
    }

    /// What [`super::lint`] found (at least one problem): the first at its
    /// span, the others listed with their line and column.
    pub(crate) fn lint_error(&self, problems: &[super::lint::Problem]) -> Error {
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
        let pos = call_site(e);
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
        let mut cur = e;
        loop {
            match cur {
                EvalAltResult::ErrorInFunctionCall(f, _, next, _) => {
                    chain.push(format!("in call to `{f}`"));
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
        let mut err = self.error(message, pos, label, cause);
        if let Error::Script(s) = &mut err {
            if !chain.is_empty() {
                s.help = Some(chain.join(", "));
            }
        }
        err
    }
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
                    || crate::validate::is_invisible(c)
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
