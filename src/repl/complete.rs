//! Tab completion: meta-commands, stdlib module names inside `import "…"`,
//! fields and methods of the values rfs returns (after `.`), and otherwise
//! keywords, the engine's functions and the variables and functions in the
//! session's scope.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rhai::{Dynamic, Map};
use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::Context;

use super::meta::COMMANDS;
use crate::script::bindings::SandboxHandle;
use crate::script::terminal_bindings::TerminalHandle;

/// What the completer knows about a value in scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Sandbox,
    Terminal,
    /// A map: its keys.
    Map(Vec<String>),
    String,
    Array,
    Other,
}

impl Kind {
    pub(crate) fn of(v: &Dynamic) -> Kind {
        if v.is::<SandboxHandle>() {
            Kind::Sandbox
        } else if v.is::<TerminalHandle>() {
            Kind::Terminal
        } else if let Some(m) = v.read_lock::<Map>() {
            Kind::Map(m.keys().map(|k| k.to_string()).collect())
        } else if v.is_string() {
            Kind::String
        } else if v.is_array() {
            Kind::Array
        } else {
            Kind::Other
        }
    }

    fn members(&self, methods: &Methods) -> Vec<String> {
        let fixed: &[&str] = match self {
            Kind::Sandbox => &["id", "provider", "workdir", "to_string"],
            Kind::Terminal => &[
                "send",
                "press",
                "resize",
                "screen",
                "line",
                "cursor",
                "wait_exit",
                "close",
                "to_string",
            ],
            _ => &[],
        };
        let mut out: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
        match self {
            Kind::Map(keys) => {
                out.extend(keys.iter().cloned());
                out.extend(methods.map.iter().cloned());
            }
            Kind::String => out.extend(methods.string.iter().cloned()),
            Kind::Array => out.extend(methods.array.iter().cloned()),
            _ => {}
        }
        out
    }
}

/// Methods of the standard types, from the engine's signatures.
#[derive(Debug, Default, Clone)]
pub(crate) struct Methods {
    string: BTreeSet<String>,
    array: BTreeSet<String>,
    map: BTreeSet<String>,
}

/// The session's scope as the completer sees it (refreshed after every
/// evaluation).
#[derive(Debug, Default, Clone)]
pub(crate) struct ScopeView {
    pub vars: Vec<(String, Kind)>,
    pub fns: Vec<String>,
    /// `import "…" as alias` aliases in scope.
    pub modules: Vec<String>,
}

const KEYWORDS: &[&str] = &[
    "let", "const", "fn", "if", "else", "while", "loop", "for", "in", "do", "until", "break",
    "continue", "return", "throw", "try", "catch", "import", "export", "as", "true", "false",
    "switch", "private", "this",
];

/// The rustyline helper.
pub(crate) struct Helper {
    /// Functions callable by name (primitives and the standard library).
    functions: BTreeSet<String>,
    methods: Methods,
    stdlib: Vec<String>,
    pub scope: Arc<Mutex<ScopeView>>,
}

impl Helper {
    pub(crate) fn new(engine: &rhai::Engine) -> Helper {
        let mut functions = BTreeSet::new();
        let mut methods = Methods::default();
        for sig in engine.gen_fn_signatures(true) {
            let Some((name, rest)) = sig.split_once('(') else {
                continue;
            };
            // "Namespace::name" or plain "name".
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !is_ident(name) || name.starts_with("get$") || name.starts_with("set$") {
                continue;
            }
            functions.insert(name.to_owned());
            let first = rest.split([',', ')']).next().unwrap_or("");
            let ty = first.rsplit(':').next().unwrap_or("").trim();
            if ty.contains("String") || ty.contains("str") {
                methods.string.insert(name.to_owned());
            } else if ty.contains("Array") || ty.contains("Vec<") {
                methods.array.insert(name.to_owned());
            } else if ty.contains("Map") {
                methods.map.insert(name.to_owned());
            }
        }
        Helper {
            functions,
            methods,
            stdlib: crate::script::resolver::STDLIB
                .iter()
                .map(|(n, _)| n.to_string())
                .collect(),
            scope: Arc::default(),
        }
    }

    /// Candidates for the text before the cursor: (start, candidates).
    pub(crate) fn candidates(&self, before: &str) -> (usize, Vec<String>) {
        let trimmed = before.trim_start();
        if trimmed.starts_with(':') && !trimmed.contains(char::is_whitespace) {
            let start = before.len() - trimmed.len();
            return (start, filter(COMMANDS.iter().map(|c| c.0), trimmed));
        }
        if let Some(q) = open_import(before) {
            let prefix = &before[q..];
            return (q, filter(self.stdlib.iter().map(String::as_str), prefix));
        }
        let word_len = before
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .map(char::len_utf8)
            .sum::<usize>();
        let start = before.len() - word_len;
        let word = &before[start..];
        let head = &before[..start];
        if let Some(receiver) = head.strip_suffix('.') {
            let kind = self.receiver_kind(receiver);
            let members = kind.members(&self.methods);
            return (start, filter(members.iter().map(String::as_str), word));
        }
        if word.is_empty() {
            return (start, vec![]);
        }
        let scope = self.scope.lock().unwrap_or_else(|p| p.into_inner());
        let all = KEYWORDS
            .iter()
            .copied()
            .chain(self.functions.iter().map(String::as_str))
            .chain(scope.vars.iter().map(|(n, _)| n.as_str()))
            .chain(scope.fns.iter().map(String::as_str))
            .chain(scope.modules.iter().map(String::as_str));
        (start, filter(all, word))
    }

    /// What the expression before a `.` evaluates to, as far as can be told
    /// without evaluating it.
    fn receiver_kind(&self, receiver: &str) -> Kind {
        let r = receiver.trim_end();
        if let Some(inner) = r.strip_suffix(')') {
            // `name(...)`: find the call's name.
            let mut depth = 1;
            let mut open = None;
            for (i, c) in inner.char_indices().rev() {
                match c {
                    ')' => depth += 1,
                    '(' => {
                        depth -= 1;
                        if depth == 0 {
                            open = Some(i);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let name = trailing_ident(&inner[..open.unwrap_or(0)]);
            return match name {
                "sandbox" => Kind::Sandbox,
                "attach" => Kind::Terminal,
                other => match crate::script::primitives::find(other) {
                    Some(p) if !p.returns.is_empty() => {
                        Kind::Map(p.returns.iter().map(|k| k.to_string()).collect())
                    }
                    _ => Kind::Other,
                },
            };
        }
        let name = trailing_ident(r);
        if r.ends_with('"') || r.ends_with('`') {
            return Kind::String;
        }
        let scope = self.scope.lock().unwrap_or_else(|p| p.into_inner());
        scope
            .vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, k)| k.clone())
            .unwrap_or(Kind::Other)
    }
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

fn trailing_ident(s: &str) -> &str {
    let n = s
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .map(char::len_utf8)
        .sum::<usize>();
    &s[s.len() - n..]
}

/// If the cursor is inside the string of `import "…`, where it starts.
fn open_import(before: &str) -> Option<usize> {
    let q = before.rfind('"')?;
    let head = before[..q].trim_end();
    (head.ends_with("import") && !before[q + 1..].contains('"')).then_some(q + 1)
}

fn filter<'a>(all: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<String> {
    let set: BTreeSet<&str> = all.filter(|c| c.starts_with(prefix)).collect();
    set.into_iter().map(str::to_owned).collect()
}

impl Completer for Helper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(self.candidates(&line[..pos]))
    }
}

impl Hinter for Helper {
    type Hint = String;
}
impl Highlighter for Helper {}
impl Validator for Helper {}
impl rustyline::Helper for Helper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> Helper {
        let engine = crate::script::base_engine(std::path::Path::new(".")).unwrap();
        let h = Helper::new(&engine);
        h.scope.lock().unwrap().vars = vec![
            ("sb".into(), Kind::Sandbox),
            ("term".into(), Kind::Terminal),
            ("r".into(), Kind::Map(vec!["exit".into(), "stdout".into()])),
            ("result_count".into(), Kind::Other),
        ];
        h
    }

    #[test]
    fn completes_meta_commands() {
        let h = helper();
        assert_eq!(h.candidates(":jo"), (0, vec![":journal".to_string()]));
        assert_eq!(h.candidates(":s").1, vec![":sandbox", ":save", ":screen"]);
    }

    #[test]
    fn completes_stdlib_modules_inside_import() {
        let h = helper();
        assert_eq!(
            h.candidates("import \"rfs/as"),
            (8, vec!["rfs/assert".to_string()])
        );
    }

    #[test]
    fn completes_members_of_values_rfs_returns() {
        let h = helper();
        assert_eq!(h.candidates("sb.pro"), (3, vec!["provider".to_string()]));
        assert_eq!(h.candidates("term.wa"), (5, vec!["wait_exit".to_string()]));
        assert!(h.candidates("r.").1.contains(&"stdout".to_string()));
        assert_eq!(
            h.candidates("step(\"a\", \"b\").stdo"),
            (15, vec!["stdout".to_string()])
        );
        assert_eq!(
            h.candidates("sync_source().tree"),
            (14, vec!["tree_digest".to_string()])
        );
        assert!(h
            .candidates("\"x\".to_up")
            .1
            .contains(&"to_upper".to_string()));
    }

    #[test]
    fn completes_primitives_keywords_and_scope() {
        let h = helper();
        // (The run's primitives come with the run engine: the PTY test
        // completes `sync_so`.)
        assert!(h
            .candidates("let n = pars")
            .1
            .contains(&"parse_int".to_string()));
        assert_eq!(h.candidates("resu").1, vec!["result_count".to_string()]);
        assert!(h.candidates("whi").1.contains(&"while".to_string()));
    }
}
