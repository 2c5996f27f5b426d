//! A session command's output as the toolbox gives it: JSON with the
//! streams apart (version header ≥ 0.167) or raw text multiplexed with
//! marker bytes (older daemons), cut before rfs's end lines.

use serde::Deserialize;

/// Marker bytes the toolbox puts before stdout / stderr chunks in raw logs.
const STDOUT_MARK: &[u8] = b"\x01\x01\x01";
const STDERR_MARK: &[u8] = b"\x02\x02\x02";

/// A command's output so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Logs {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[derive(Deserialize)]
struct JsonLogs {
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
}

/// Split raw multiplexed output at the toolbox's markers (unmarked output
/// is stdout).
pub(super) fn demux(raw: &[u8]) -> Logs {
    let mut l = Logs::default();
    let mut to_err = false;
    let mut i = 0;
    while i < raw.len() {
        if raw[i..].starts_with(STDOUT_MARK) {
            to_err = false;
            i += 3;
        } else if raw[i..].starts_with(STDERR_MARK) {
            to_err = true;
            i += 3;
        } else {
            if to_err {
                l.stderr.push(raw[i]);
            } else {
                l.stdout.push(raw[i]);
            }
            i += 1;
        }
    }
    l
}

/// Parse a logs answer in either shape: JSON `{output, stdout, stderr}`
/// (version header ≥ 0.167) or plain text (older daemons).
pub(super) fn parse_logs(body: &[u8]) -> Logs {
    if let Ok(j) = serde_json::from_slice::<JsonLogs>(body) {
        if j.stdout.is_some() || j.stderr.is_some() {
            return Logs {
                stdout: j.stdout.unwrap_or_default().into_bytes(),
                stderr: j.stderr.unwrap_or_default().into_bytes(),
            };
        }
        if let Some(o) = j.output {
            return demux(o.as_bytes());
        }
    }
    demux(body)
}

/// Cumulative logs up to the end lines (and without a tail that may be
/// the start of one).
pub(super) fn before_end(logs: &Logs, token: &str) -> Logs {
    let cut = |b: &[u8]| -> Vec<u8> {
        let mut scan = super::agent::EndScan::new(token);
        scan.push(b)
    };
    Logs {
        stdout: cut(&logs.stdout),
        stderr: cut(&logs.stderr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn logs_parse_in_both_shapes() {
        let j = br#"{"output":"ignored","stdout":"out\n","stderr":"err\n"}"#;
        assert_eq!(
            parse_logs(j),
            Logs {
                stdout: b"out\n".to_vec(),
                stderr: b"err\n".to_vec()
            }
        );
        let raw = b"\x01\x01\x01hello \x02\x02\x02oops\x01\x01\x01world";
        assert_eq!(
            parse_logs(raw),
            Logs {
                stdout: b"hello world".to_vec(),
                stderr: b"oops".to_vec()
            }
        );
        let jraw =
            serde_json::to_vec(&json!({"output": "\u{1}\u{1}\u{1}a\u{2}\u{2}\u{2}b"})).unwrap();
        assert_eq!(
            parse_logs(&jraw),
            Logs {
                stdout: b"a".to_vec(),
                stderr: b"b".to_vec()
            }
        );
        assert_eq!(
            parse_logs(b"plain combined"),
            Logs {
                stdout: b"plain combined".to_vec(),
                stderr: vec![]
            }
        );
    }
}
