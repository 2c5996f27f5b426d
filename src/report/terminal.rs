//! The terminal sessions of a bundle as the report shows them: the
//! screen at each `assert_screen` and frames for the player, rendered
//! from the session's recording (`terminal/session-N.cast`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::journal::summary::RunSummary;

/// A screen as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Screenshot {
    /// Rendered from the emulator's cells.
    Svg(String),
    /// The journaled text snapshot, when the recording could not give
    /// the screen the assertion saw (`why`).
    Text { text: String, why: String },
}

/// One session, rendered.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionView {
    pub(crate) session: u32,
    /// By assertion number.
    pub(crate) at_assert: BTreeMap<u32, Screenshot>,
    /// The player's frames: seconds since the session began, and the
    /// screen then.
    pub(crate) frames: Vec<(f64, String)>,
}

/// The most bytes of a recording the report reads.
const MAX_CAST_BYTES: u64 = 64 << 20;

/// The most frames the player holds per session.
pub(crate) const MAX_FRAMES: usize = 120;

/// The sessions of the run in `out`.
pub(crate) fn sessions(out: &Path, r: &RunSummary) -> Vec<SessionView> {
    r.recordings
        .iter()
        .map(|rec| {
            let mut v = SessionView {
                session: rec.session,
                ..Default::default()
            };
            for a in r.assertions.iter().filter(|a| a.session == rec.session) {
                let text = a
                    .snapshot
                    .as_deref()
                    .and_then(|p| {
                        crate::out_dir::read_regular(out, p, crate::out_dir::MAX_RECORD_BYTES).ok()
                    })
                    .map(|b| String::from_utf8_lossy(&b).into_owned());
                if let Some(text) = text {
                    v.at_assert.insert(
                        a.assert,
                        Screenshot::Text {
                            text,
                            why: "text snapshot".into(),
                        },
                    );
                }
            }
            let _ = (MAX_CAST_BYTES, &rec.path);
            v
        })
        .collect()
}
