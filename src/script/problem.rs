//! A problem the lint finds in a script, at its source position (the lint
//! and the checks of literal options report them alike).

use rhai::Position;

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub pos: Position,
    pub message: String,
    pub help: Option<String>,
}
