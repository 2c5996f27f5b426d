//! Host folders (`host.mount`) as EVIDENCE.md shows them: what the
//! person mounted read-only from this machine, named by digest (the
//! folder is not in the bundle: a replay needs one that digests the same).

use std::fmt::Write as _;

use super::inert_markdown::code;
use crate::events::host_mount_facts::HostMounted;

/// EVIDENCE.md's section on host folders.
pub fn evidence(s: &mut String, rows: &[HostMounted]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Host folders\n");
    let _ = writeln!(
        s,
        "The person running rfs showed these folders of this machine in the sandbox, read-only (`--mount-ro`). They are not in this bundle: what each held is named by its digest, taken before the sandbox was created, and the run is reproducible only with folders that digest the same.\n"
    );
    for m in rows {
        let _ = writeln!(
            s,
            "- {} at {}: {} file(s), {} bytes, sha256 {} (digested in {} ms, {} file(s) read, by the {})",
            code(&m.host_dir),
            code(&m.path),
            m.files,
            m.bytes,
            code(&m.sha256),
            m.digest_ms,
            m.files_read,
            code(&m.by),
        );
    }
}
