//! A session command's output as the toolbox gives it: JSON with the
//! streams apart (version header ≥ 0.167) or raw text multiplexed with
//! marker bytes (older daemons), cut before rfs's end lines; the same
//! markers split a followed log as it streams ([`StreamDemux`]), and
//! [`EndScan`] finds the end lines rfs appends ([`end_lines`]).

use serde::Deserialize;

use super::shell_text;

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
/// is stdout): [`StreamDemux`] over the whole of it.
pub(super) fn demux(raw: &[u8]) -> Logs {
    let mut d = StreamDemux::default();
    let mut pieces = d.push(raw);
    pieces.extend(d.finish());
    let mut l = Logs::default();
    for (to_err, piece) in pieces {
        let to = if to_err { &mut l.stderr } else { &mut l.stdout };
        to.extend_from_slice(&piece);
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
        let mut scan = EndScan::new(token);
        scan.push(b)
    };
    Logs {
        stdout: cut(&logs.stdout),
        stderr: cut(&logs.stderr),
    }
}

/// Marker bytes the toolbox puts before stdout / stderr chunks in raw logs.
const OUT: &[u8] = b"\x01\x01\x01";
const ERR: &[u8] = b"\x02\x02\x02";

/// Splits a streamed multiplexed log into stdout/stderr pieces, in
/// order, whatever the frame boundaries (a marker may be cut in two).
#[derive(Debug, Default)]
pub(super) struct StreamDemux {
    to_err: bool,
    pending: Vec<u8>,
}

impl StreamDemux {
    /// The pieces of `chunk` (`true` = stderr).
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<(bool, Vec<u8>)> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(chunk);
        let mut pieces: Vec<(bool, Vec<u8>)> = vec![];
        let mut i = 0;
        while i < buf.len() {
            let rest = &buf[i..];
            if rest.starts_with(OUT) || rest.starts_with(ERR) {
                self.to_err = rest[0] == ERR[0];
                i += 3;
                continue;
            }
            if rest.len() < 3 && (OUT.starts_with(rest) || ERR.starts_with(rest)) {
                self.pending = rest.to_vec();
                break;
            }
            match pieces.last_mut() {
                Some((e, p)) if *e == self.to_err => p.push(buf[i]),
                _ => pieces.push((self.to_err, vec![buf[i]])),
            }
            i += 1;
        }
        pieces
    }

    /// Bytes held back as a possible marker, once the stream ended.
    pub(super) fn finish(&mut self) -> Vec<(bool, Vec<u8>)> {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() {
            vec![]
        } else {
            vec![(self.to_err, rest)]
        }
    }
}

/// Shell text printing the end line `rfs-daytona:TOKEN:end:CODE` (CODE:
/// the status of what ran before it) on stdout, then on stderr, leaving
/// that status as `$rfs_r`. The marker is built by `printf` from the
/// token, so the command line itself (and any echo of it) never holds it.
pub fn end_lines(token: &str) -> String {
    format!(
        "rfs_r=$?; printf 'rfs-daytona:%s:end:%s\\n' {t} \"$rfs_r\"; printf 'rfs-daytona:%s:end:%s\\n' {t} \"$rfs_r\" >&2",
        t = shell_text::quote(token)
    )
}

/// Finds the end line of one stream (`rfs-daytona:TOKEN:end:CODE\n`),
/// passing on everything before it and holding back what may be its start.
#[derive(Debug)]
pub struct EndScan {
    marker: Vec<u8>,
    held: Vec<u8>,
    code: Option<i32>,
}

impl EndScan {
    pub fn new(token: &str) -> EndScan {
        EndScan {
            marker: format!("rfs-daytona:{token}:end:").into_bytes(),
            held: vec![],
            code: None,
        }
    }

    /// The exit code, once the end line was seen.
    pub fn code(&self) -> Option<i32> {
        self.code
    }

    /// The bytes of `b` that are output (none after the end line).
    pub fn push(&mut self, b: &[u8]) -> Vec<u8> {
        if self.code.is_some() {
            return vec![];
        }
        self.held.extend_from_slice(b);
        let m = &self.marker;
        if let Some(pos) = self.held.windows(m.len()).position(|w| w == &m[..]) {
            let after = &self.held[pos + m.len()..];
            let out = self.held[..pos].to_vec();
            if let Some(nl) = after.iter().position(|&c| c == b'\n') {
                let code = String::from_utf8_lossy(&after[..nl])
                    .trim()
                    .parse()
                    .unwrap_or(-1);
                self.code = Some(code);
                self.held.clear();
            } else {
                self.held.drain(..pos);
            }
            return out;
        }
        // Hold the longest tail that may begin the marker.
        let keep = (1..m.len().min(self.held.len() + 1))
            .rev()
            .find(|&n| self.held.ends_with(&m[..n]))
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        self.held.drain(..cut).collect()
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

    #[test]
    fn markers_cut_across_frames_still_split_the_streams() {
        let mut d = StreamDemux::default();
        let mut got = d.push(b"\x01\x01\x01out\0a\x02");
        got.extend(d.push(b"\x02"));
        got.extend(d.push(b"\x02err\x01"));
        got.extend(d.finish());
        assert_eq!(
            got,
            vec![
                (false, b"out\0a".to_vec()),
                (true, b"err".to_vec()),
                (true, b"\x01".to_vec())
            ]
        );
    }

    #[test]
    fn the_end_line_is_found_across_chunks_and_never_passed_on() {
        let mut s = EndScan::new("tk");
        let mut got = s.push(b"hello rfs-day");
        assert_eq!(got, b"hello ");
        got = s.push(b"tona:tk:e");
        assert!(got.is_empty());
        assert_eq!(s.code(), None);
        got = s.push(b"nd:42");
        assert!(got.is_empty());
        got = s.push(b"\nnext step's bytes");
        assert!(got.is_empty());
        assert_eq!(s.code(), Some(42));
        let mut s = EndScan::new("tk");
        assert_eq!(
            s.push(b"rfs-daytona:other:end:1\nx"),
            b"rfs-daytona:other:end:1\nx"
        );
        assert_eq!(s.push(b"rfs-daytona:tk:end:0\n"), b"");
        assert_eq!(s.code(), Some(0));
    }
}
