//! Tracing of rfs itself (`-v`, `-vv`, or `RUST_LOG`), to stderr. Off by
//! default: without either, nothing is logged.

/// Install the subscriber for `verbose` (count of `-v`) or `RUST_LOG`.
pub fn init(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match verbose {
        0 => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => EnvFilter::new(v),
            _ => return,
        },
        1 => EnvFilter::new("rfs=debug"),
        _ => EnvFilter::new("rfs=trace"),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
