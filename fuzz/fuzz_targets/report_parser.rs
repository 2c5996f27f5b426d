//! The in-sandbox reports: the source verification report and the step
//! wrapper's signal lines. Any bytes (a hostile sandbox controls them)
//! parse or are refused, never a panic; the wrapper gate never reports a
//! refusal once the command started, and passes every byte of the
//! command's own output on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rfs::fuzzing::{parse_report, Gate};

fuzz_target!(|data: &[u8]| {
    let _ = parse_report(data);

    // The gate: split the input into chunks at 0xFF bytes.
    let nonce = "0123456789abcdef";
    let mut g = Gate::new(nonce);
    let mut passed = Vec::new();
    let mut fed = Vec::new();
    for chunk in data.split(|b| *b == 0xff) {
        fed.extend_from_slice(chunk);
        passed.extend(g.stderr(chunk));
    }
    let started = format!("rfs-started:{nonce}\n");
    match g.finish(Some(121)) {
        Ok(held) => {
            passed.extend(held);
            // Everything but the wrapper's own first line is passed on.
            let own = fed.strip_prefix(started.as_bytes()).unwrap_or(&fed);
            assert!(passed == own || passed.is_empty(), "bytes lost");
        }
        Err(_) => {
            assert!(
                !fed.starts_with(started.as_bytes()),
                "a refusal after the start line"
            );
            assert!(fed.starts_with(b"rfs-refused:"), "a refusal from other text");
        }
    }
});
