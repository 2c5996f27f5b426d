//! The terminal sessions of a bundle as the report shows them: the
//! screen at each `assert_screen` and frames for the player, rendered
//! from the session's recording (`terminal/session-N.cast`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::journal::fold::RunSummary;
use crate::terminal::playback::{AssertScreen, Recording};
use crate::terminal::svg;

/// A screen as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screenshot {
    /// Rendered from the emulator's cells.
    Svg(String),
    /// The journaled text snapshot, when the recording could not give
    /// the screen the assertion saw (`why`).
    Text { text: String, why: String },
}

/// One session, rendered.
#[derive(Debug, Clone, Default)]
pub struct SessionView {
    pub session: u32,
    /// By assertion number.
    pub at_assert: BTreeMap<u32, Screenshot>,
    /// The screen when the recording ends.
    pub last: Option<String>,
    /// The player's frames: seconds since the session began, and the
    /// screen then.
    pub frames: Vec<(f64, String)>,
}

/// The most bytes of a recording the report reads.
const MAX_CAST_BYTES: u64 = 64 << 20;

/// The most frames the player holds per session.
pub const MAX_FRAMES: usize = 60;

/// The most cells of all frames of one session (60 frames of 80x24):
/// a larger screen gets fewer frames.
const FRAME_CELLS: u64 = 60 * 80 * 24;

/// The most work (cell operations, [`Recording::cost`]) replaying all of
/// a report's recordings may take: about 2 MB of output at 80x24. A
/// recording past it is shown by its text snapshots.
const REPLAY_BUDGET: u64 = 4_000_000_000;

/// Frames closer than this (seconds) are one.
const FRAME_INTERVAL: f64 = 0.1;

/// The sessions of the run in `out`: each assertion's screen from the
/// recording (matched by its journaled digest), else its text snapshot
/// with the reason; the player's frames.
pub fn sessions(out: &Path, r: &RunSummary) -> Vec<SessionView> {
    let mut budget = REPLAY_BUDGET;
    r.recordings
        .iter()
        .map(|rec| {
            let asserts: Vec<_> = r
                .assertions
                .iter()
                .filter(|a| a.session == rec.session)
                .collect();
            let digests: BTreeMap<u32, String> = asserts
                .iter()
                .map(|a| (a.assert, a.screen_digest.clone()))
                .collect();
            // Only a recording whose digest the journal holds (`attach.end`)
            // is read: `rfs verify` checked it.
            let replayed = rec
                .closed
                .as_deref()
                .ok_or_else(|| "the recording was not closed".to_owned())
                .and_then(|p| {
                    crate::out_dir::read_regular(out, p, MAX_CAST_BYTES).map_err(|e| e.to_string())
                })
                .and_then(|b| Recording::parse(&String::from_utf8_lossy(&b)))
                .and_then(|c| {
                    let frames = (FRAME_CELLS / c.max_area().max(1)).clamp(1, MAX_FRAMES as u64);
                    c.replay(&digests, FRAME_INTERVAL, frames as usize, &mut budget)
                });
            let mut v = SessionView {
                session: rec.session,
                ..Default::default()
            };
            for a in &asserts {
                let snapshot = || {
                    a.snapshot
                        .as_deref()
                        .and_then(|p| {
                            crate::out_dir::read_regular(out, p, crate::out_dir::MAX_RECORD_BYTES)
                                .ok()
                        })
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default()
                };
                let shot = match replayed.as_ref().map(|r| r.at_assert.get(&a.assert)) {
                    Ok(Some(AssertScreen::Matched(s))) => Screenshot::Svg(svg::render(s)),
                    Ok(_) => Screenshot::Text {
                        text: snapshot(),
                        why: "the recording does not show this screen (it is redacted or cut); this is the journaled text snapshot".into(),
                    },
                    Err(e) => Screenshot::Text {
                        text: snapshot(),
                        why: format!("the recording is not replayed: {e}"),
                    },
                };
                v.at_assert.insert(a.assert, shot);
            }
            if let Ok(r) = &replayed {
                v.last = Some(svg::render(&r.last));
                v.frames = r
                    .frames
                    .iter()
                    .map(|(t, s)| ((t * 1000.0).round() / 1000.0, svg::render(s)))
                    .collect();
            }
            v
        })
        .collect()
}
