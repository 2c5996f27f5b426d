//! The allowed-signers file of `ssh-keygen -Y verify` (ssh-keygen(1),
//! "ALLOWED SIGNERS"): one key per line, `principals [options] key`.
//!
//! Supported options: `namespaces="…"` (the entry only vouches for those
//! namespaces). Entries with options rfs does not evaluate
//! (`cert-authority`, `valid-after`, `valid-before`, anything unknown)
//! never match: rfs fails closed rather than trusting a key more widely
//! than the file says.

use std::path::Path;

use ssh_key::PublicKey;

use super::error::{MalformedLine, SignatureError};

/// One usable line of the file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Comma-separated principal patterns (`*`, `?`, `!` negation).
    pub principals: String,
    pub namespaces: Option<String>,
    /// Options rfs does not evaluate (the entry then never matches).
    pub unsupported: Vec<String>,
    pub key: PublicKey,
}

/// Parse an allowed-signers file. Malformed lines are errors naming them.
pub fn read(path: &Path) -> Result<Vec<Entry>, SignatureError> {
    let shown = || path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| {
        SignatureError::AllowedSignersUnreadable {
            path: shown(),
            source,
        }
    })?;
    parse(&text).map_err(|source| SignatureError::AllowedSignersMalformed {
        path: shown(),
        source,
    })
}

pub fn parse(text: &str) -> Result<Vec<Entry>, MalformedLine> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let lineno = i + 1;
        let toks = tokens(line);
        let bad = |why: &'static str| MalformedLine { line: lineno, why };
        let principals = toks.first().ok_or_else(|| bad("empty"))?.clone();
        // `principals key…` or `principals options key…`.
        let (opts, key_at) = match key_from(&toks, 1) {
            Some(_) => (None, 1),
            None => (Some(toks.get(1).ok_or_else(|| bad("no key"))?.clone()), 2),
        };
        let key = key_from(&toks, key_at).ok_or_else(|| bad("no readable public key"))?;
        let mut namespaces = None;
        let mut unsupported = Vec::new();
        for o in opts.iter().flat_map(|o| split_options(o)) {
            match o.split_once('=') {
                Some((k, v)) if k.eq_ignore_ascii_case("namespaces") => {
                    namespaces = Some(v.trim_matches('"').to_owned())
                }
                _ => unsupported.push(o),
            }
        }
        out.push(Entry {
            principals: principals.trim_matches('"').to_owned(),
            namespaces,
            unsupported,
            key,
        });
    }
    Ok(out)
}

fn key_from(toks: &[String], at: usize) -> Option<PublicKey> {
    let (t, b) = (toks.get(at)?, toks.get(at + 1)?);
    PublicKey::from_openssh(&format!("{t} {b}")).ok()
}

/// Whitespace-separated tokens; double quotes group.
fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Comma-separated options; commas inside quotes do not split.
fn split_options(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().filter(|o| !o.is_empty()).collect()
}

/// OpenSSH's `match_pattern`: `*` any run, `?` one character.
pub fn glob(pattern: &str, s: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && go(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    go(&p, &s)
}

/// OpenSSH's `match_pattern_list`: a negated match anywhere wins.
pub fn matches_list(list: &str, s: &str) -> bool {
    let mut hit = false;
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p.strip_prefix('!') {
            Some(neg) if glob(neg, s) => return false,
            Some(_) => {}
            None if glob(p, s) => hit = true,
            None => {}
        }
    }
    hit
}

impl Entry {
    /// Whether this entry vouches for `key` signing in `namespace`.
    pub fn vouches(&self, key: &ssh_key::public::KeyData, namespace: &str) -> bool {
        self.unsupported.is_empty()
            && self.key.key_data() == key
            && self
                .namespaces
                .as_deref()
                .is_none_or(|ns| matches_list(ns, namespace))
    }
}

/// The principals `entries` allow for `key` in `namespace`, restricted to
/// `identity` when one is given. Empty: the key is not allowed.
pub fn principals_for(
    entries: &[Entry],
    key: &ssh_key::public::KeyData,
    namespace: &str,
    identity: Option<&str>,
) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.vouches(key, namespace))
        .filter_map(|e| match identity {
            Some(id) => matches_list(&e.principals, id).then(|| id.to_owned()),
            None => Some(e.principals.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGgoiA6gdXpm8EjeNBXRdaSYF/TpY8iNkT+4mvrjF2FZ";

    #[test]
    fn parses_plain_and_optioned_lines() {
        let text = format!(
            "# comment\n\nalice@example.com {KEY} laptop\n\"bob@x,carol@*\" namespaces=\"git,rfs\" {KEY}\ndave cert-authority {KEY}\n"
        );
        let e = parse(&text).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].principals, "alice@example.com");
        assert_eq!(e[1].namespaces.as_deref(), Some("git,rfs"));
        assert_eq!(e[2].unsupported, vec!["cert-authority".to_string()]);
        let k = e[0].key.key_data();
        assert_eq!(
            principals_for(&e, k, "rfs", Some("carol@home")),
            vec!["carol@home"]
        );
        assert!(principals_for(&e, k, "rfs", Some("dave")).is_empty());
        // The namespaces option restricts, others are unrestricted.
        assert_eq!(
            principals_for(&e, k, "file", None),
            vec!["alice@example.com"]
        );
    }

    #[test]
    fn malformed_line_is_named() {
        let e = parse("alice ssh-ed25519 notbase64\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(e.to_string().starts_with("line 1: "), "{e}");
    }

    #[test]
    fn pattern_lists_follow_openssh() {
        assert!(matches_list("*@example.com", "a@example.com"));
        assert!(!matches_list("*@example.com,!evil@*", "evil@example.com"));
        assert!(matches_list("a?c", "abc"));
        assert!(!matches_list("a?c", "ac"));
    }
}
