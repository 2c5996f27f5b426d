//! The stdio framing of `rfs mcp`: one JSON-RPC message a line, each at
//! most [`MAX_LINE`] bytes, checked before rmcp sees it.
//!
//! rmcp's stdio transport drops a line over its limit and ignores input
//! that is not JSON, both without a word to the client. JSON-RPC 2.0 says
//! otherwise, so rfs reads stdin itself: a line over the limit is
//! discarded as it streams by (never buffered whole) and answered with an
//! Invalid Request error (-32600) that says the limit; a line that is not
//! JSON is answered with a Parse error (-32700); every other line is
//! handed to rmcp unchanged. rmcp's answers and these go out on stdout
//! one whole line at a time, so they never interleave.

use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// The largest message rfs mcp reads, in bytes (without its newline).
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;

/// What one read of a line gave.
#[derive(Debug, PartialEq, Eq)]
enum Framed {
    Line(Vec<u8>),
    /// A line over the limit, discarded; its length so far.
    TooLong(usize),
    Eof,
}

/// Read one line of at most `max` bytes; a longer one is consumed to its
/// end without being kept. At the end of input, a last line without its
/// newline still counts.
async fn next_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Framed> {
    let mut line = Vec::new();
    let mut dropped: Option<usize> = None;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(match dropped {
                Some(n) => Framed::TooLong(n),
                None if line.is_empty() => Framed::Eof,
                None => Framed::Line(line),
            });
        }
        let (chunk, used, ended) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], i + 1, true),
            None => (avail, avail.len(), false),
        };
        match &mut dropped {
            Some(n) => *n += chunk.len(),
            None if line.len() + chunk.len() > max => {
                dropped = Some(line.len() + chunk.len());
                line = Vec::new();
            }
            None => line.extend_from_slice(chunk),
        }
        r.consume(used);
        if ended {
            return Ok(match dropped {
                Some(n) => Framed::TooLong(n),
                None => Framed::Line(line),
            });
        }
    }
}

/// A JSON-RPC error answer that cannot name a request (`id: null`).
fn error_answer(code: i32, message: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    }))
    .unwrap_or_default();
    v.push(b'\n');
    v
}

/// What a line from the client is, as JSON: `None` to hand it on, or the
/// answer rfs gives itself. Blank lines are skipped (rmcp skips them).
fn check(line: &[u8]) -> Option<Option<Vec<u8>>> {
    let body = line.strip_suffix(b"\r").unwrap_or(line);
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(
        serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .err()
            .map(|e| error_answer(-32700, &format!("Parse error: the line is not JSON ({e})"))),
    )
}

fn too_long(n: usize) -> Vec<u8> {
    error_answer(
        -32600,
        &format!(
            "Invalid Request: a message of more than {n} bytes is over rfs mcp's limit of {MAX_LINE} bytes (16 MiB) a line; it was dropped unread"
        ),
    )
}

/// Serve the framing between `input`/`output` (stdin/stdout) and the two
/// ends rmcp gets: a reader of the checked lines and a writer for its
/// answers. The returned task ends when rmcp has closed its writer and
/// every answer has been written out.
pub(crate) fn start<R, W>(
    input: R,
    output: W,
) -> (
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<()>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    const PIPE: usize = 64 * 1024;
    let (to_rmcp, mut feed) = tokio::io::duplex(PIPE);
    let (from_rmcp, answers) = tokio::io::duplex(PIPE);
    let (own_tx, own_rx) = mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(async move {
        let mut input = tokio::io::BufReader::with_capacity(PIPE, input);
        loop {
            let own = match next_line(&mut input, MAX_LINE).await {
                Ok(Framed::Line(mut line)) => match check(&line) {
                    None => continue,
                    Some(Some(answer)) => answer,
                    Some(None) => {
                        line.push(b'\n');
                        if feed.write_all(&line).await.is_err() {
                            break;
                        }
                        continue;
                    }
                },
                Ok(Framed::TooLong(n)) => too_long(n),
                Ok(Framed::Eof) => break,
                Err(e) => {
                    tracing::debug!("rfs mcp: reading stdin: {e}");
                    break;
                }
            };
            if own_tx.send(own).await.is_err() {
                break;
            }
        }
        // End of input: rmcp sees it as the client going away.
        let _ = feed.shutdown().await;
    });
    let writer = tokio::spawn(write_out(answers, own_rx, output));
    (to_rmcp, from_rmcp, writer)
}

/// Copy rmcp's answers and rfs's own to `output`, a whole line at a time.
async fn write_out<W: AsyncWrite + Unpin>(
    answers: tokio::io::DuplexStream,
    mut own: mpsc::Receiver<Vec<u8>>,
    mut output: W,
) {
    let mut answers = tokio::io::BufReader::new(answers);
    let mut own_open = true;
    loop {
        let mut line = Vec::new();
        let next = tokio::select! {
            n = answers.read_until(b'\n', &mut line) => match n {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line),
            },
            o = own.recv(), if own_open => match o {
                Some(o) => Some(o),
                None => {
                    own_open = false;
                    continue;
                }
            },
        };
        let Some(bytes) = next else { break };
        if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Framed> {
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        let mut out = vec![];
        loop {
            let l = next_line(&mut r, max).await.unwrap();
            let end = l == Framed::Eof;
            out.push(l);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_and_the_next_one_is_read() {
        assert_eq!(
            lines(b"12345\n0123456789abc\n123\nlast", 5).await,
            vec![
                Framed::Line(b"12345".to_vec()),
                Framed::TooLong(13),
                Framed::Line(b"123".to_vec()),
                Framed::Line(b"last".to_vec()),
                Framed::Eof,
            ]
        );
    }

    #[test]
    fn what_is_not_json_gets_a_parse_error() {
        assert_eq!(check(b"  \r"), None);
        assert_eq!(check(b"{\"jsonrpc\":\"2.0\"}\r"), Some(None));
        let a = check(b"{not json").unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(v["error"]["code"], -32700);
        assert!(v["id"].is_null());
    }
}
