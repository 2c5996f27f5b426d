//! Tracing of rfs itself (`-v`, `-vv`, or `RUST_LOG`), to stderr. Off by
//! default: without either, nothing is logged.
//!
//! Every line passes the redactor of the process's known secrets (see
//! [`rfs_evidence::secrets::redact_known`]) on its way to stderr, like every
//! other byte rfs writes.

use std::io::Write;

/// Install the subscriber for `verbose` (count of `-v`) or `RUST_LOG`.
/// `vars` are the command line's `K=V` pairs: secret-named ones are
/// learned before anything is logged.
pub(crate) fn init<'a>(verbose: u8, vars: impl IntoIterator<Item = &'a str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match verbose {
        0 => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => EnvFilter::new(v),
            _ => return,
        },
        1 => EnvFilter::new("rfs=debug"),
        _ => EnvFilter::new("rfs=trace"),
    };
    rfs_evidence::secrets::learn_from_env(vars);
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
        let line = rfs_evidence::secrets::redact_known(&self.0);
        let _ = std::io::stderr().lock().write_all(&line);
    }
}

/// Panics print like Rust's default hook, through the redactor: a panic
/// message can carry a value (a key, a token) the run knew as secret.
pub(crate) fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "Box<dyn Any>".into());
        let at = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let bt = std::backtrace::Backtrace::capture();
        let bt = match bt.status() {
            std::backtrace::BacktraceStatus::Captured => format!("{bt}\n"),
            _ => String::new(),
        };
        let text = format!(
            "thread '{}' panicked at {at}:\n{msg}\n{bt}",
            thread.name().unwrap_or("<unnamed>"),
        );
        let text = rfs_evidence::secrets::redact_known(text.as_bytes());
        let _ = std::io::stderr().lock().write_all(&text);
    }));
}
