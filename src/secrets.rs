//! Keeping secrets out of the journal, logs and console.
//!
//! A name looks secret when, upper-cased, it contains TOKEN, SECRET, KEY,
//! PASSWORD, PASSWD or CREDENTIAL. Values of such names are replaced by
//! [`REDACTED`] in journal payloads, and any occurrence of a secret value
//! in output is replaced before it reaches a log, the console or the script.

/// What a redacted value becomes.
pub const REDACTED: &str = "[REDACTED]";

/// Whether an env/var name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    ["TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|w| up.contains(w))
}

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<Vec<u8>>,
}

impl Redactor {
    /// Remember a secret value (values shorter than 4 bytes are not
    /// redacted in output: they would shred ordinary text).
    pub fn add(&mut self, value: &str) {
        if value.len() >= 4 && !self.secrets.iter().any(|s| s == value.as_bytes()) {
            self.secrets.push(value.as_bytes().to_vec());
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// Redact every secret in `data`.
    pub fn redact(&self, data: &[u8]) -> Vec<u8> {
        if self.secrets.is_empty() {
            return data.to_vec();
        }
        let mut out = Vec::with_capacity(data.len());
        let mut i = 0;
        'outer: while i < data.len() {
            for s in &self.secrets {
                if data[i..].starts_with(s) {
                    out.extend_from_slice(REDACTED.as_bytes());
                    i += s.len();
                    continue 'outer;
                }
            }
            out.push(data[i]);
            i += 1;
        }
        out
    }

    pub fn redact_str(&self, s: &str) -> String {
        String::from_utf8_lossy(&self.redact(s.as_bytes())).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_and_values() {
        assert!(is_secret_name("GITHUB_TOKEN"));
        assert!(is_secret_name("api_key"));
        assert!(!is_secret_name("PATH"));
        let mut r = Redactor::default();
        r.add("hunter22");
        assert_eq!(r.redact_str("pw=hunter22!"), "pw=[REDACTED]!");
    }
}
