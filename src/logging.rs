//! Tracing of rfs itself (`-v`, `-vv`, or `RUST_LOG`), to stderr. Off by
//! default: without either, nothing is logged.
//!
//! Every line passes the redactor of the process's known secrets (see
//! [`crate::secrets::redact_known`]) on its way to stderr, like every
//! other byte rfs writes.

use std::io::Write;

/// Install the subscriber for `verbose` (count of `-v`) or `RUST_LOG`.
/// `vars` are the command line's `K=V` pairs: secret-named ones are
/// learned before anything is logged.
pub fn init<'a>(verbose: u8, vars: impl IntoIterator<Item = &'a str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match verbose {
        0 => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => EnvFilter::new(v),
            _ => return,
        },
        1 => EnvFilter::new("rfs=debug"),
        _ => EnvFilter::new("rfs=trace"),
    };
    crate::secrets::learn_from_env(vars);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| RedactedLine(Vec::new()))
        .with_ansi(false)
        .try_init();
}

/// One formatted event, redacted and written to stderr in one piece when
/// the subscriber is done with it.
struct RedactedLine(Vec<u8>);

impl Write for RedactedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        let line = crate::secrets::redact_known(&self.0);
        let _ = std::io::stderr().lock().write_all(&line);
    }
}
