//! The journal verifier: any file content is judged intact or not, never
//! a panic; an intact verdict means every line parsed and chained.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    std::fs::write(&path, data).unwrap();
    if rfs::fuzzing::verify_journal(&path).is_ok() {
        let text = std::str::from_utf8(data).expect("an intact journal is UTF-8");
        for line in text.lines() {
            let _: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => panic!("intact journal with an unparsable line {line:?}: {e}"),
            };
        }
    }
});

