//! Keeping secrets out of the journal, logs and console.
//!
//! A name looks secret when, upper-cased, it contains TOKEN, SECRET, KEY,
//! PASSWORD, PASSWD or CREDENTIAL. Values of such names are replaced by
//! [`REDACTED`] in journal payloads, and any occurrence of a secret value
//! in output is replaced before it reaches a log, the console or the script.

/// What a redacted value becomes.
pub const REDACTED: &str = "[REDACTED]";
/// Secret values shorter than this are not redacted in output: they
/// would shred ordinary text.
const MIN_SECRET: usize = 4;
/// The shortest line of a multi-line secret that is redacted on its own
/// (shorter lines, such as a blank line or `==`, are ordinary text).
const MIN_SECRET_LINE: usize = 8;

/// Whether an env/var name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    ["TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|w| up.contains(w))
}

/// Every secret value this process has learned, for output that is not
/// tied to one run (the tracing of rfs itself: `-v`, `RUST_LOG`).
static KNOWN: std::sync::RwLock<Redactor> = std::sync::RwLock::new(Redactor {
    secrets: Vec::new(),
});

/// Redact every secret the process knows of (any run's, plus the values
/// of secret-named environment variables and `--var`s, see
/// [`learn_from_env`]).
pub fn redact_known(data: &[u8]) -> Vec<u8> {
    KNOWN.read().unwrap_or_else(|p| p.into_inner()).redact(data)
}

/// Learn the values of this process's secret-named environment variables
/// (`DAYTONA_API_KEY`, `GITHUB_TOKEN`, ...) and of secret-named `K=V`
/// pairs (`--var`), before anything is logged.
pub fn learn_from_env<'a>(pairs: impl IntoIterator<Item = &'a str>) {
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    for (k, v) in std::env::vars_os() {
        if let (Some(k), Some(v)) = (k.to_str(), v.to_str()) {
            if is_secret_name(k) {
                known.add_local(v);
            }
        }
    }
    for p in pairs {
        if let Some((k, v)) = p.split_once('=') {
            if is_secret_name(k) {
                known.add_local(v);
            }
        }
    }
}

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<Vec<u8>>,
}

impl Redactor {
    /// Remember a secret value (values shorter than 4 bytes are not
    /// redacted in output: they would shred ordinary text); of a
    /// multi-line value, also each line of at least 8 bytes.
    /// The process-wide set learns it too (see [`redact_known`]).
    pub fn add(&mut self, value: &str) {
        self.add_local(value);
        KNOWN
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .add_local(value);
    }

    fn add_local(&mut self, value: &str) {
        self.add_piece(value, MIN_SECRET);
        // A multi-line secret (a PEM or SSH key) reaches line-oriented
        // output (step logs, the console) one line at a time: each of its
        // lines is a secret of its own.
        if value.contains(['\n', '\r']) {
            for line in value.split(['\n', '\r']) {
                self.add_piece(line.trim(), MIN_SECRET_LINE);
            }
        }
    }

    fn add_piece(&mut self, value: &str, min: usize) {
        if value.len() >= min && !self.secrets.iter().any(|s| s == value.as_bytes()) {
            self.secrets.push(value.as_bytes().to_vec());
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// Whether `text` holds a known secret (whole or one of its lines).
    /// Whether `text` holds a secret when ASCII case is ignored (a host
    /// name, which DNS and rfs's proxy fold to lower case).
    pub fn holds_secret_ignoring_case(&self, text: &str) -> bool {
        !self.find_ignoring_case(text).is_empty()
    }

    /// The ranges of `text` that are a secret, ASCII case ignored.
    fn find_ignoring_case(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        let t = text.to_ascii_lowercase();
        let folded = Redactor {
            secrets: self
                .secrets
                .iter()
                .map(|s| s.to_ascii_lowercase())
                .collect(),
        };
        folded.find(t.as_bytes())
    }

    /// [`Redactor::redact_str`], ASCII case ignored: for a host name.
    pub fn redact_str_ignoring_case(&self, s: &str) -> String {
        let ranges = self.find_ignoring_case(s);
        if ranges.is_empty() {
            return s.to_owned();
        }
        let mut out = String::new();
        let mut at = 0;
        for r in ranges {
            if r.start < at {
                continue;
            }
            out.push_str(&s[at..r.start]);
            out.push_str(REDACTED);
            at = r.end;
        }
        out.push_str(&s[at..]);
        out
    }

    pub fn holds_secret(&self, text: &str) -> bool {
        self.redact(text.as_bytes()) != text.as_bytes()
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

    /// Where secrets occur in `data`: the byte ranges [`Self::redact`]
    /// replaces, left to right.
    pub fn find(&self, data: &[u8]) -> Vec<std::ops::Range<usize>> {
        let mut found = vec![];
        let mut i = 0;
        'outer: while i < data.len() && !self.secrets.is_empty() {
            for s in &self.secrets {
                if data[i..].starts_with(s) {
                    found.push(i..i + s.len());
                    i += s.len();
                    continue 'outer;
                }
            }
            i += 1;
        }
        found
    }

    pub fn redact_str(&self, s: &str) -> String {
        String::from_utf8_lossy(&self.redact(s.as_bytes())).into_owned()
    }

    /// Whether `tail` is a proper prefix of a secret (the start of one
    /// that may continue in the next chunk).
    fn may_continue(&self, tail: &[u8]) -> bool {
        self.secrets
            .iter()
            .any(|s| s.len() > tail.len() && s.starts_with(tail))
    }

    fn longest(&self) -> usize {
        self.secrets.first().map_or(0, Vec::len)
    }
}

/// Redacts a byte stream that arrives in chunks (terminal output, typed
/// input): a secret split across two chunks is still caught, because the
/// shortest tail that could be the start of a secret is held back until
/// the next chunk (or [`StreamRedactor::finish`]).
#[derive(Debug, Clone, Default)]
pub struct StreamRedactor {
    redactor: Redactor,
    pending: Vec<u8>,
}

impl StreamRedactor {
    pub fn new(redactor: Redactor) -> Self {
        StreamRedactor {
            redactor,
            pending: Vec::new(),
        }
    }

    /// Learn another secret from now on.
    pub fn add(&mut self, value: &str) {
        self.redactor.add(value);
    }

    /// The redacted bytes of `chunk` that are safe to write now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(chunk);
        let from = buf
            .len()
            .saturating_sub(self.redactor.longest().saturating_sub(1));
        let hold = (from..buf.len())
            .find(|&k| self.redactor.may_continue(&buf[k..]))
            .unwrap_or(buf.len());
        self.pending = buf.split_off(hold);
        self.redactor.redact(&buf)
    }

    /// Everything still held back, redacted (at the end of the stream).
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        self.redactor.redact(&rest)
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

    #[test]
    fn a_secret_split_across_chunks_is_redacted() {
        let mut r = Redactor::default();
        r.add("hunter22");
        let mut s = StreamRedactor::new(r);
        let mut out = s.push(b"pw=hun");
        assert_eq!(out, b"pw=", "the possible start is held back");
        out.extend(s.push(b"ter22 and hu"));
        out.extend(s.push(b"mble"));
        out.extend(s.finish());
        assert_eq!(String::from_utf8(out).unwrap(), "pw=[REDACTED] and humble");
        // Every split point of a stream gives the same text.
        let text = b"a hunter22 b hunter2 c hunter22";
        for cut in 0..text.len() {
            let mut r = Redactor::default();
            r.add("hunter22");
            let mut s = StreamRedactor::new(r);
            let mut out = s.push(&text[..cut]);
            out.extend(s.push(&text[cut..]));
            out.extend(s.finish());
            assert_eq!(out, b"a [REDACTED] b hunter2 c [REDACTED]", "cut at {cut}");
        }
    }

    #[test]
    fn a_multi_line_secret_is_redacted_whole_and_line_by_line() {
        let key = "-----BEGIN KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\r\nQyNTUxOQAAACB\n==\n-----END KEY-----\n";
        let mut r = Redactor::default();
        r.add(key);
        assert_eq!(r.redact_str(key), "[REDACTED]");
        let shown = r.redact_str("line: b3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB\n== x\n");
        assert_eq!(shown, "line: [REDACTED]\n[REDACTED]\n== x\n");
        assert!(r.holds_secret("QyNTUxOQAAACB"));
        assert!(!r.holds_secret("== ordinary"));
    }
}
