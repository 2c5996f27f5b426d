//! The search of `rfs bisect`, apart from any sandbox: which commit to
//! test next, and what the results so far prove.
//!
//! `commits[0]` is `good`, the last is `bad`; both ends are tested first
//! (their results are what "changed" means: a proof that passes at
//! `good` and fails at `bad`, or the other way round for finding a fix).
//! The range `(lo, hi]` holds the first commit whose result is `bad`'s;
//! each result inside it narrows it. With several lanes, the next commit
//! splits the widest gap between the range's ends and the commits being
//! tested; with skipped commits, the untested commit nearest that point.

use std::collections::BTreeSet;

use rfs_evidence::events::BisectResult;

/// What a lane should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Test the commit at this index.
    Test(usize),
    /// Every useful commit is being tested: wait for a result.
    Wait,
    /// Nothing more to test.
    Done(Found),
}

/// What the search proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// The first commit whose result is `bad`'s.
    FirstChanged(usize),
    /// Skipped commits are in the way: the first changed commit is one
    /// of these (the last is the first known to have changed).
    OneOf(Vec<usize>),
    /// `good` and `bad` give the same result: nothing changed.
    NoChange(BisectResult),
    /// An end could not be tested.
    Untestable(usize),
}

/// The state of one bisection.
#[derive(Debug)]
pub(crate) struct Search {
    len: usize,
    results: Vec<Option<BisectResult>>,
    in_flight: BTreeSet<usize>,
    lo: usize,
    hi: usize,
    /// `--trust-ends`: the ends' results are the person's word.
    ends_trusted: bool,
}

impl Search {
    /// A search over `len` commits (`good` first, `bad` last; at least 2).
    pub(crate) fn new(len: usize) -> Search {
        Search {
            len,
            results: vec![None; len],
            in_flight: BTreeSet::new(),
            lo: 0,
            hi: len - 1,
            ends_trusted: false,
        }
    }

    /// A search whose ends are not tested (`--trust-ends`): `good`
    /// passes and `bad` fails on the person's word.
    pub(crate) fn trusting_ends(len: usize) -> Search {
        let mut s = Search::new(len);
        s.results[0] = Some(BisectResult::Passed);
        s.results[len - 1] = Some(BisectResult::Failed);
        s.ends_trusted = true;
        s
    }

    /// Whether the ends were taken from the person's word.
    pub(crate) fn ends_trusted(&self) -> bool {
        self.ends_trusted
    }

    pub(crate) fn result(&self, i: usize) -> Option<BisectResult> {
        self.results[i]
    }

    /// How many commits were tested (trusted ends are not).
    pub(crate) fn tested(&self) -> usize {
        let trusted = if self.ends_trusted { 2 } else { 0 };
        self.results.iter().flatten().count() - trusted
    }

    /// Decide the next commit to test (marked in flight) or why none.
    pub(crate) fn next(&mut self) -> Next {
        let next = self.choose();
        if let Next::Test(i) = next {
            self.in_flight.insert(i);
        }
        next
    }

    /// What [`Search::next`] would say, without marking anything.
    pub(crate) fn choose(&self) -> Next {
        let last = self.len - 1;
        for end in [0, last] {
            if self.results[end].is_none() && !self.in_flight.contains(&end) {
                return Next::Test(end);
            }
        }
        let ends = (self.results[0], self.results[last]);
        match ends {
            (Some(BisectResult::Skipped), _) => return Next::Done(Found::Untestable(0)),
            (_, Some(BisectResult::Skipped)) => return Next::Done(Found::Untestable(last)),
            (Some(g), Some(b)) if g == b => return Next::Done(Found::NoChange(g)),
            (Some(_), Some(_)) => {}
            // An end is still being tested: probe the middle meanwhile.
            _ => return self.probe().map_or(Next::Wait, Next::Test),
        }
        if let Some(i) = self.probe() {
            return Next::Test(i);
        }
        if self.in_flight.iter().any(|&i| i > self.lo && i < self.hi) {
            return Next::Wait;
        }
        let between: Vec<usize> = (self.lo + 1..self.hi).collect();
        if between.is_empty() {
            Next::Done(Found::FirstChanged(self.hi))
        } else {
            // Every commit between is skipped.
            let mut all = between;
            all.push(self.hi);
            Next::Done(Found::OneOf(all))
        }
    }

    /// The untested commit in `(lo, hi)` that best splits what is left.
    fn probe(&self) -> Option<usize> {
        let eligible = |i: usize| self.results[i].is_none() && !self.in_flight.contains(&i);
        let mut pivots: Vec<usize> = vec![self.lo, self.hi];
        pivots.extend(
            self.in_flight
                .iter()
                .copied()
                .filter(|&i| i > self.lo && i < self.hi),
        );
        pivots.sort_unstable();
        pivots.dedup();
        // The widest gap first, then the others: the midpoint's nearest
        // eligible commit inside the gap.
        let mut gaps: Vec<(usize, usize)> = pivots.windows(2).map(|w| (w[0], w[1])).collect();
        gaps.sort_by_key(|&(a, b)| std::cmp::Reverse(b - a));
        for (a, b) in gaps {
            let mid = a + (b - a) / 2;
            let nearest = (a + 1..b)
                .filter(|&i| eligible(i))
                .min_by_key(|&i| (i.abs_diff(mid), i));
            if nearest.is_some() {
                return nearest;
            }
        }
        None
    }

    /// Take the result of the commit at `i`.
    pub(crate) fn record(&mut self, i: usize, r: BisectResult) {
        self.in_flight.remove(&i);
        self.results[i] = Some(r);
        let (Some(good), Some(bad)) = (self.results[0], self.results[self.len - 1]) else {
            return;
        };
        if good == bad || r == BisectResult::Skipped {
            return;
        }
        // Results that came in before both ends were known narrow the
        // range now, in index order; later ones as they come.
        for j in 1..self.len - 1 {
            match self.results[j] {
                Some(x) if j > self.lo && j < self.hi && x == good => self.lo = j,
                _ => {}
            }
        }
        for j in (1..self.len - 1).rev() {
            match self.results[j] {
                Some(x) if j > self.lo && j < self.hi && x == bad => self.hi = j,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BisectResult::*;

    /// Run the search sequentially over `n` commits whose result is
    /// `f(i)`; the finding and how many commits were tested.
    fn bisect(n: usize, f: impl Fn(usize) -> BisectResult) -> (Found, usize) {
        let mut s = Search::new(n);
        loop {
            match s.next() {
                Next::Test(i) => s.record(i, f(i)),
                Next::Wait => panic!("a sequential search never waits"),
                Next::Done(found) => return (found, s.tested()),
            }
        }
    }

    #[test]
    fn sixty_four_commits_take_the_two_ends_and_six_probes_wherever_the_change_is() {
        for first_bad in 1..=64 {
            let (found, tested) = bisect(65, |i| if i >= first_bad { Failed } else { Passed });
            assert_eq!(found, Found::FirstChanged(first_bad));
            assert!(tested <= 2 + 6, "first bad {first_bad}: {tested} tested");
        }
    }

    /// `git bisect run` tests 6 of 64 commits; rfs re-tests both ends
    /// unless `--trust-ends` takes them from the person's word.
    #[test]
    fn trusted_ends_are_not_tested_so_sixty_four_commits_take_six_probes() {
        for first_bad in 1..=64 {
            let mut s = Search::trusting_ends(65);
            let mut probed = vec![];
            let found = loop {
                match s.next() {
                    Next::Test(i) => {
                        probed.push(i);
                        s.record(i, if i >= first_bad { Failed } else { Passed })
                    }
                    Next::Wait => panic!("a sequential search never waits"),
                    Next::Done(found) => break found,
                }
            };
            assert_eq!(found, Found::FirstChanged(first_bad));
            assert!(!probed.contains(&0) && !probed.contains(&64), "{probed:?}");
            assert!(s.tested() <= 6, "first bad {first_bad}: {probed:?}");
            assert_eq!(s.tested(), probed.len());
        }
    }

    #[test]
    fn a_fix_is_found_the_same_way_and_no_change_is_said() {
        let (found, _) = bisect(10, |i| if i >= 4 { Passed } else { Failed });
        assert_eq!(found, Found::FirstChanged(4));
        assert_eq!(bisect(10, |_| Passed).0, Found::NoChange(Passed));
    }

    #[test]
    fn skipped_commits_are_stepped_around_and_named_when_they_hide_the_change() {
        // 5 is skipped; the change is at 7: found exactly.
        let (found, _) = bisect(12, |i| match i {
            5 => Skipped,
            i if i >= 7 => Failed,
            _ => Passed,
        });
        assert_eq!(found, Found::FirstChanged(7));
        // 4, 5, 6 skipped and the change at 5: any of 4..=7.
        let (found, _) = bisect(12, |i| match i {
            4..=6 => Skipped,
            i if i >= 5 => Failed,
            _ => Passed,
        });
        assert_eq!(found, Found::OneOf(vec![4, 5, 6, 7]));
        // An end that cannot be tested ends the search.
        assert_eq!(
            bisect(6, |i| if i == 0 { Skipped } else { Failed }).0,
            Found::Untestable(0)
        );
    }

    #[test]
    fn lanes_test_different_commits_and_wait_when_nothing_useful_is_left() {
        let mut s = Search::new(9);
        let a = s.next();
        let b = s.next();
        let c = s.next();
        assert_eq!((a, b), (Next::Test(0), Next::Test(8)));
        assert_eq!(c, Next::Test(4), "the middle, while the ends run");
        let d = s.next();
        assert!(
            matches!(d, Next::Test(i) if i != 4 && i > 0 && i < 8),
            "{d:?}"
        );
        s.record(0, Passed);
        s.record(8, Failed);
        s.record(4, Failed);
        if let Next::Test(i) = d {
            s.record(i, if i >= 3 { Failed } else { Passed });
        }
        loop {
            match s.next() {
                Next::Test(i) => s.record(i, if i >= 3 { Failed } else { Passed }),
                Next::Wait => panic!("nothing is in flight"),
                Next::Done(f) => {
                    assert_eq!(f, Found::FirstChanged(3));
                    break;
                }
            }
        }
    }
}
