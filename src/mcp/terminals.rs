//! The terminals of an `rfs mcp` session, under one numbering: the number
//! `attach` returns is the session's number in the journal, the
//! recordings (`terminal/session-N.cast`) and the reports, and `send`,
//! `screen` and `assert_screen` take that number. A number no terminal
//! has is an error naming the terminals there are.

use rhai::{Dynamic, Engine, EvalAltResult, Map};

use crate::script::terminal_bindings::session_of;

/// Register `terms.mcp_keep(t)` (keep a terminal under its number; the
/// number) and `terms.mcp_term(n)` (the terminal numbered `n`) on the
/// session's engine; scripts never see them.
pub(crate) fn register(engine: &mut Engine) {
    engine.register_fn(
        "mcp_keep",
        |terms: &mut Map, t: Dynamic| -> Result<i64, Box<EvalAltResult>> {
            let (n, _, _) = session_of(&t).ok_or("attach did not give a terminal")?;
            terms.insert(n.to_string().into(), t);
            Ok(i64::from(n))
        },
    );
    engine.register_fn(
        "mcp_term",
        |terms: &mut Map, n: i64| -> Result<Dynamic, Box<EvalAltResult>> {
            terms
                .get(n.to_string().as_str())
                .cloned()
                .ok_or_else(|| no_such_terminal(terms, n).into())
        },
    );
}

/// The error for a terminal number that names none.
fn no_such_terminal(terms: &Map, n: i64) -> String {
    let mut known: Vec<(u32, String, bool)> = terms.values().filter_map(session_of).collect();
    if known.is_empty() {
        return format!("there is no terminal {n}: no terminal is open in this session (attach starts one and returns its number)");
    }
    known.sort_by_key(|(i, _, _)| *i);
    let list: Vec<String> = known
        .iter()
        .map(|(i, cmd, exited)| {
            let exited = if *exited { ", exited" } else { "" };
            format!("{i} (`{cmd}`{exited})")
        })
        .collect();
    let word = if list.len() == 1 {
        "terminal"
    } else {
        "terminals"
    };
    format!(
        "there is no terminal {n}; this session's {word}: {}",
        list.join(", ")
    )
}
