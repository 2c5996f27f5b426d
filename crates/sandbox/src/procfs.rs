//! Reading `/proc/<pid>/stat`, in one place (owner liveness for `rfs gc`,
//! process-group membership for local sessions).

/// The fields of `/proc/<pid>/stat` rfs uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: R, S, D, Z, ...
    pub state: char,
    /// Field 4.
    pub ppid: i32,
    /// Field 5: process group id.
    pub pgrp: i32,
    /// Field 6: session id.
    pub session: i32,
    /// Field 22: start time in clock ticks since boot.
    pub start_ticks: u64,
}

/// Why a process's stat could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatError {
    /// No such process.
    NotRunning,
    /// It may exist, but its stat could not be read or parsed.
    Unreadable(String),
}

/// Parse the text of a `/proc/<pid>/stat` file. The command name (field
/// 2) may hold spaces and parentheses: fields are counted after the last
/// `)`.
pub fn parse(stat: &str) -> Option<ProcStat> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

/// The stat of `pid`.
pub fn stat(pid: u32) -> Result<ProcStat, StatError> {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => parse(&text).ok_or_else(|| {
            StatError::Unreadable(format!("/proc/{pid}/stat has an unknown format"))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !exists(pid) => {
            Err(StatError::NotRunning)
        }
        Err(e) => Err(StatError::Unreadable(format!(
            "cannot read /proc/{pid}/stat: {e}"
        ))),
    }
}

/// Whether a process `pid` exists (signal 0: ESRCH means it does not;
/// EPERM means it does, owned by someone else).
fn exists(pid: u32) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_with_spaces_and_parens() {
        let s = "42 (a) b (c)) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        let p = parse(s).unwrap();
        assert_eq!((p.state, p.ppid, p.pgrp, p.session), ('S', 1, 42, 42));
        assert_eq!(p.start_ticks, 12345);
        assert_eq!(parse("42 (x) S 1"), None);
        assert_eq!(parse("garbage"), None);
    }

    #[test]
    fn own_process_is_readable() {
        let me = stat(std::process::id()).unwrap();
        assert!(me.start_ticks > 0 && me.ppid > 0);
    }
}
