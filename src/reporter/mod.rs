//! Views of a run's event stream (the journal is the record). Each
//! reporter consumes the same [`rfs_evidence::events::Event`]s:
//! - [`Console`]: lines for a human on stderr, step output on stdout;
//! - [`Json`]: `--json`, one JSON object a line on stdout, then a summary;
//! - [`Progress`]: a spinner on a terminal while a sync runs.

mod console;
mod json;
pub mod progress;
mod summary;
pub(crate) use rfs_evidence::text;

pub use console::Console;
pub use json::Json;
pub use progress::Progress;
pub use summary::{StepSummary, Summary};
