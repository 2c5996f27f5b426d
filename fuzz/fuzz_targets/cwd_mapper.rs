//! The cwd mapper: any input against any committed tree either refuses or
//! yields a normalised relative path that stays inside the root and goes
//! through no symlink or file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rfs::fuzzing::{resolve_cwd, Entry, Manifest};

fuzz_target!(|data: &[u8]| {
    // First line: the cwd; every further line `d PATH`, `f PATH` or
    // `l PATH TARGET` is a tree entry.
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let input = lines.next().unwrap_or_default();
    let mut m = Manifest::default();
    for l in lines {
        let mut parts = l.splitn(3, ' ');
        let (kind, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let entry = match kind {
            "d" => Entry::Dir,
            "f" => Entry::File { exec: false, sha256: String::new(), size: 0 },
            "l" => Entry::Symlink { target: parts.next().unwrap_or("").as_bytes().to_vec() },
            _ => continue,
        };
        m.entries.insert(path.as_bytes().to_vec(), entry);
    }
    if let Ok(rel) = resolve_cwd(input, &m) {
        assert!(!rel.starts_with('/'), "absolute result {rel:?} for {input:?}");
        let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
        assert!(!comps.iter().any(|c| *c == ".." || *c == "."), "{rel:?} for {input:?}");
        for i in 1..=comps.len() {
            let prefix = comps[..i].join("/");
            assert!(
                matches!(m.entries.get(prefix.as_bytes()), None | Some(Entry::Dir)),
                "{rel:?} goes through {prefix:?} (not a directory) for {input:?}"
            );
        }
    }
});
