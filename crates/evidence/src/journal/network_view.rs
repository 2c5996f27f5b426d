//! The "Network" section of EVIDENCE.md and report.html (#34): the
//! policy in force, then every destination with its counts, refusals
//! first. A pure function of the journal, so `rfs verify` re-derives it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::inert_markdown::{code, esc};
use crate::events::network_facts::{Connection, NetworkFact};

/// What the journal says of the run's network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkSummary {
    /// The policy in force (from the placement).
    pub policy: Option<NetworkFact>,
    /// Every connection attempt through rfs's proxy, in order.
    pub connections: Vec<Connection>,
}

/// The refused destinations a step's line names (the rest are counted).
const SHOWN_REFUSALS: usize = 10;

/// Connections to one destination decided by one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub allowed: bool,
    pub destination: String,
    pub rule: String,
    pub count: usize,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The steps they belong to, in first-seen order.
    pub steps: Vec<String>,
}

impl NetworkSummary {
    /// The refused attempts.
    pub fn refused(&self) -> impl Iterator<Item = &Connection> {
        self.connections.iter().filter(|c| !c.allowed)
    }

    /// The destinations, refused ones first, then by destination.
    pub fn destinations(&self) -> Vec<Destination> {
        let mut by: BTreeMap<(bool, String, String), Destination> = BTreeMap::new();
        for c in &self.connections {
            let key = (c.allowed, c.destination(), c.rule.clone());
            let d = by.entry(key).or_insert_with(|| Destination {
                allowed: c.allowed,
                destination: c.destination(),
                rule: c.rule.clone(),
                count: 0,
                bytes_up: 0,
                bytes_down: 0,
                steps: vec![],
            });
            d.count += c.attempts() as usize;
            d.bytes_up += c.bytes_up;
            d.bytes_down += c.bytes_down;
            // A connection of no step was opened by a background
            // process (a spawn, a service, a terminal), said by whom.
            let who = match (&c.step, &c.opened_by) {
                (Some(s), _) => Some(s.clone()),
                (None, Some(o)) => Some(format!("background: {o}")),
                (None, None) => None,
            };
            if let Some(s) = who {
                if !d.steps.contains(&s) {
                    d.steps.push(s);
                }
            }
        }
        by.into_values().collect()
    }

    /// What step `name` connected to, refusals named (`None`: nothing).
    pub fn step_line(&self, name: &str) -> Option<String> {
        let mine: Vec<&Connection> = self
            .connections
            .iter()
            .filter(|c| c.step.as_deref() == Some(name))
            .collect();
        if mine.is_empty() {
            return None;
        }
        let all: u64 = mine.iter().map(|c| c.attempts()).sum();
        let refused: Vec<&&Connection> = mine.iter().filter(|c| !c.allowed).collect();
        let shown: Vec<String> = refused
            .iter()
            .take(SHOWN_REFUSALS)
            .map(|c| match c.repeated {
                0 => format!("{} ({})", c.destination(), c.rule),
                n => format!("{} ({}) ×{}", c.destination(), c.rule, n + 1),
            })
            .collect();
        let mut line = format!(
            "{all} connection{}, {} refused",
            if all == 1 { "" } else { "s" },
            refused.iter().map(|c| c.attempts()).sum::<u64>()
        );
        if !shown.is_empty() {
            line.push_str(": ");
            line.push_str(&shown.join("; "));
        }
        if refused.len() > SHOWN_REFUSALS {
            let _ = write!(
                line,
                "; and {} more destinations refused (see the Network section)",
                refused.len() - SHOWN_REFUSALS
            );
        }
        Some(line)
    }

    /// One line: `3 connections, 1 refused`.
    pub fn counts(&self) -> String {
        let n: u64 = self.connections.iter().map(|c| c.attempts()).sum();
        let r: u64 = self.refused().map(|c| c.attempts()).sum();
        format!(
            "{n} connection{} through rfs's proxy, {r} refused",
            if n == 1 { "" } else { "s" }
        )
    }
}

/// The Markdown section (nothing when the journal says nothing of the
/// network: an older journal).
pub fn markdown(s: &mut String, n: &NetworkSummary) {
    let Some(p) = &n.policy else {
        if n.connections.is_empty() {
            return;
        }
        let _ = writeln!(s, "\n## Network\n");
        let _ = writeln!(s, "- policy: not recorded");
        return table(s, n);
    };
    let _ = writeln!(s, "\n## Network\n");
    let _ = writeln!(s, "- policy: {}", esc(&p.describe()));
    if p.unfiltered {
        let _ = writeln!(
            s,
            "- **UNFILTERED**: the sandbox reached the network without rfs; its connections are not recorded"
        );
    }
    table(s, n);
}

fn table(s: &mut String, n: &NetworkSummary) {
    let _ = writeln!(s, "- connections: {}", esc(&n.counts()));
    let dests = n.destinations();
    if dests.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n| | destination | rule | connections | bytes up | bytes down | steps |\n|---|---|---|---|---|---|---|"
    );
    for d in dests {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            if d.allowed { "allowed" } else { "**refused**" },
            code(&d.destination),
            quoted(&d.rule),
            d.count,
            d.bytes_up,
            d.bytes_down,
            esc(&d.steps.join(", "))
        );
    }
}

/// The HTML section, with `h` escaping text.
pub fn html(s: &mut String, n: &NetworkSummary, h: &dyn Fn(&str) -> String) {
    if n.policy.is_none() && n.connections.is_empty() {
        return;
    }
    s.push_str("<section id=\"network\"><h2>Network</h2><ul>\n");
    match &n.policy {
        Some(p) => {
            let _ = writeln!(s, "<li>policy: {}</li>", h(&p.describe()));
            if p.unfiltered {
                s.push_str("<li><strong>UNFILTERED</strong>: the sandbox reached the network without rfs; its connections are not recorded</li>\n");
            }
        }
        None => s.push_str("<li>policy: not recorded</li>\n"),
    }
    let _ = writeln!(s, "<li>connections: {}</li></ul>", h(&n.counts()));
    let dests = n.destinations();
    if !dests.is_empty() {
        s.push_str("<table><thead><tr><th></th><th>destination</th><th>rule</th><th>connections</th><th>bytes up</th><th>bytes down</th><th>steps</th></tr></thead><tbody>\n");
        for d in dests {
            let _ = writeln!(
                s,
                "<tr class=\"{}\"><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if d.allowed { "allowed" } else { "refused" },
                if d.allowed { "allowed" } else { "<strong>refused</strong>" },
                h(&d.destination),
                h(&d.rule),
                d.count,
                d.bytes_up,
                d.bytes_down,
                h(&d.steps.join(", "))
            );
        }
        s.push_str("</tbody></table>\n");
    }
    s.push_str("</section>\n");
}

/// A rule as Markdown: what it quotes in backticks (``allow `pypi.org` ``)
/// as code spans, the rest escaped, so a plain name reads without a
/// backslash in front of each backtick (#46).
fn quoted(rule: &str) -> String {
    rule.split('`')
        .enumerate()
        .map(|(i, part)| match i % 2 {
            1 if !part.is_empty() => code(part),
            _ => esc(part),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rule_quoting_a_name_reads_without_backslashes() {
        assert_eq!(super::quoted("allow `pypi.org`"), "allow `pypi.org`");
        assert_eq!(
            super::quoted("default: loopback (127.0.0.0/8)"),
            "default: loopback (127.0.0.0/8)"
        );
        // What is not a plain name stays escaped, never a live span.
        assert!(super::quoted("allow `a|b`").contains("\\|"));
    }

    use super::*;

    fn conn(name: &str, allowed: bool, step: &str, down: u64) -> Connection {
        Connection {
            name: Some(name.into()),
            address: Some("203.0.113.9".into()),
            port: 443,
            allowed,
            rule: if allowed {
                "default: public address"
            } else {
                "not in the allow list"
            }
            .into(),
            via: "connect".into(),
            bytes_up: 1,
            bytes_down: down,
            duration_ms: 1,
            step: Some(step.into()),
            opened_by: None,
            error: None,
            repeated: 0,
        }
    }

    #[test]
    fn destinations_are_counted_with_refusals_first() {
        let n = NetworkSummary {
            policy: None,
            connections: vec![
                conn("a.org", true, "build", 10),
                conn("z.org", false, "build", 0),
                conn("a.org", true, "test", 5),
            ],
        };
        let d = n.destinations();
        assert_eq!(d.len(), 2);
        assert!(!d[0].allowed && d[0].destination.starts_with("z.org"));
        assert_eq!((d[1].count, d[1].bytes_down), (2, 15));
        assert_eq!(d[1].steps, ["build", "test"]);
        assert_eq!(n.counts(), "3 connections through rfs's proxy, 1 refused");
        let line = n.step_line("build").unwrap();
        assert!(
            line.starts_with("2 connections, 1 refused: z.org"),
            "{line}"
        );
        assert_eq!(n.step_line("other"), None);
    }
}
