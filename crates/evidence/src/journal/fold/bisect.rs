//! Folding `rfs bisect`'s facts in.

use super::{Bisect, RunSummary};
use crate::events::Event;

impl RunSummary {
    /// `rfs bisect`'s facts.
    pub(super) fn apply_bisect(&mut self, e: &Event) {
        match e {
            Event::BisectStart {
                good,
                bad,
                commits,
                ends_trusted,
            } => {
                self.bisect = Some(Bisect {
                    good: good.clone(),
                    bad: bad.clone(),
                    commits: *commits,
                    ends_trusted: *ends_trusted,
                    ..Bisect::default()
                });
            }
            Event::BisectCommit {
                commit,
                result,
                reason,
            } => {
                if let Some(b) = &mut self.bisect {
                    b.tested.push((commit.clone(), *result, reason.clone()));
                }
            }
            Event::BisectEnd {
                good_result,
                bad_result,
                first_changed,
                candidates,
                found,
                results,
                ..
            } => {
                if let Some(b) = &mut self.bisect {
                    b.first_changed.clone_from(first_changed);
                    b.candidates.clone_from(candidates);
                    b.ended = true;
                    b.ends = Some((*good_result, *bad_result));
                    b.found.clone_from(found);
                    b.results.clone_from(results);
                }
            }
            _ => {}
        }
    }
}
