//! The in-sandbox wrapper every command goes through (steps and attached
//! sessions alike), and the parser of what it reports.
//!
//! `/bin/sh -c WRAPPER rfs-wrapper DIR ROOT COMMAND NONCE` (never a login
//! shell) starts in `/` (which exists in every sandbox), checks that `$HOME`
//! and the synced root exist, enters the mapped cwd, checks that its
//! physical path is inside the root, then replaces itself (`exec`, same
//! process) with `/bin/sh -c COMMAND sh`: the command runs exactly as the
//! user's `sh -c COMMAND` would, so the shell's own messages read as the
//! user's shell says them (`sh: 1: python3: not found`), never with the
//! wrapper's name or line numbers (`rfs-wrapper: eval: line 8: …`). The
//! command sees no positional parameters and no wrapper variables (the
//! wrapper sets none: the user's environment reaches it untouched). If a
//! check fails the command never starts.
//!
//! **Signals cannot be forged by the command.** The wrapper reports on
//! stderr — the one channel every provider has — with lines carrying a
//! fresh random nonce per command:
//! - `rfs-refused:NONCE:WHAT[:DETAIL]` then exit 121 (122 for an escape):
//!   the command did not start;
//! - `rfs-started:NONCE` right before the command is evaluated.
//!
//! A refusal counts only when the wrapper's refusal line came first on
//! stderr, the exit code is the wrapper's, and no start line was seen
//! (see [`Gate`]). Whatever the command prints comes after the start
//! line, so even a command that learns the nonce cannot turn its own
//! failure into a refusal. Both lines are rfs's own and never reach the
//! step's logs, the console or the script.
//!
//! The script itself is the sandbox crate's ([`rfs_sandbox::provider::wrapper`]):
//! a provider may do its checks without a shell, saying the same lines
//! with the same exit codes (isolation `gvisor`'s agent and `local` in
//! namespaces do: one shell per command instead of two).

use rfs_sandbox::provider::wrapper::{EXIT_CWD_ESCAPE, EXIT_CWD_MISSING};

/// The directory a wrapped command is started in (the wrapper then
/// enters the mapped cwd): it exists in every sandbox, so a removed home
/// or root is named by the wrapper instead of failing the start.
pub(crate) const START_DIR: &str = rfs_sandbox::provider::wrapper::START_DIR;

/// Where a command runs, resolved and checked (by `Run::place_command`).
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub sandbox_id: String,
    /// The sandbox user's home.
    pub home: String,
    /// Relative to the synced root ("" = root).
    pub rel: String,
    pub remote_dir: String,
    pub physical_root: String,
    /// User env followed by the binding env.
    pub env: Vec<(String, String)>,
}

/// What the wrapper refused, parsed from its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WrapperRefusal {
    /// The synced root is gone.
    RootMissing,
    /// The cwd does not exist (or cannot be entered).
    CwdMissing,
    /// The cwd resolves (physically) to this path, outside the root.
    Escape(String),
    /// The sandbox user's home is gone.
    HomeMissing,
}

impl Placement {
    /// argv running `command` through the wrapper, confined to the root;
    /// the wrapper's signals carry `nonce` (see [`Gate`]).
    pub(crate) fn argv(&self, command: &str, nonce: &str) -> Vec<String> {
        rfs_sandbox::provider::wrapper::argv(&self.remote_dir, &self.physical_root, command, nonce)
    }

    /// argv for a terminal session: the same checks, no start line (it
    /// would show on the screen; the cwd was checked by a probe first).
    pub(crate) fn pty_argv(&self, command: &str) -> Vec<String> {
        self.argv(command, "")
    }

    /// The refusal message for what the wrapper refused; `what` names the
    /// command.
    pub(crate) fn refusal_message(&self, r: &WrapperRefusal, what: &str) -> String {
        let shown = if self.rel.is_empty() { "." } else { &self.rel };
        let (dir, id, root) = (&self.remote_dir, &self.sandbox_id, &self.physical_root);
        match r {
            WrapperRefusal::RootMissing => format!(
                "{what} refused: the synced source root {root} no longer exists in sandbox {id} (removed by an earlier command?)"
            ),
            WrapperRefusal::CwdMissing => format!(
                "{what} refused: its cwd `{shown}` ({dir}) does not exist in sandbox {id}"
            ),
            WrapperRefusal::Escape(p) => format!(
                "{what} refused: its cwd `{shown}` resolves to {} in sandbox {id}, outside the synced root {root}",
                rfs_evidence::validate::shown(p)
            ),
            WrapperRefusal::HomeMissing => format!(
                "{what} refused: the sandbox home {} no longer exists in sandbox {id} (removed by an earlier command?)",
                self.home
            ),
        }
    }
}

/// A fresh nonce for one command.
pub(crate) fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The longest first line the gate holds back while deciding whether it
/// is the wrapper's (a refusal line holds a path).
const MAX_SIGNAL_LINE: usize = 8192;

#[derive(Debug)]
enum GateState {
    /// Nothing decided yet: stderr bytes held until the first line ends.
    Pending(Vec<u8>),
    /// The wrapper said the command starts: everything after is output.
    Started,
    /// The wrapper's refusal line (the command did not start).
    Refused(WrapperRefusal),
    /// The first line was not the wrapper's (the shell itself failed):
    /// everything is output.
    Passthrough,
}

/// Reads the wrapper's signals off a command's stderr: passes the
/// command's own bytes on and holds the wrapper's lines back.
#[derive(Debug)]
pub struct Gate {
    nonce: String,
    state: GateState,
}

impl Gate {
    pub fn new(nonce: &str) -> Gate {
        Gate {
            nonce: nonce.to_owned(),
            state: GateState::Pending(Vec::new()),
        }
    }

    /// Feed a stderr chunk; returns the bytes that are the command's.
    pub fn stderr(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut held = match &mut self.state {
            GateState::Pending(buf) => std::mem::take(buf),
            GateState::Refused(_) => return Vec::new(),
            GateState::Started | GateState::Passthrough => return chunk.to_vec(),
        };
        held.extend_from_slice(chunk);
        let Some(nl) = held.iter().position(|b| *b == b'\n') else {
            if held.len() > MAX_SIGNAL_LINE {
                self.state = GateState::Passthrough;
                return held;
            }
            self.state = GateState::Pending(held);
            return Vec::new();
        };
        let (line, rest) = held.split_at(nl + 1);
        match self.signal(&line[..nl]) {
            Some(Ok(())) => {
                self.state = GateState::Started;
                rest.to_vec()
            }
            Some(Err(r)) => {
                self.state = GateState::Refused(r);
                Vec::new()
            }
            None => {
                self.state = GateState::Passthrough;
                held
            }
        }
    }

    /// The wrapper's line: `Ok` = started, `Err` = refused, `None` = not
    /// the wrapper's (wrong nonce, unknown word, not a signal at all).
    fn signal(&self, line: &[u8]) -> Option<Result<(), WrapperRefusal>> {
        if self.nonce.is_empty() {
            return None;
        }
        let line = std::str::from_utf8(line).ok()?;
        if let Some(n) = line.strip_prefix("rfs-started:") {
            return (n == self.nonce).then_some(Ok(()));
        }
        let rest = line
            .strip_prefix("rfs-refused:")?
            .strip_prefix(self.nonce.as_str())?
            .strip_prefix(':')?;
        let r = match rest {
            "root" => WrapperRefusal::RootMissing,
            "cwd" => WrapperRefusal::CwdMissing,
            "home" => WrapperRefusal::HomeMissing,
            _ => WrapperRefusal::Escape(rest.strip_prefix("escape:")?.to_owned()),
        };
        Some(Err(r))
    }

    /// The verdict once the command ended with `exit`: the refusal, if
    /// the wrapper refused (its line first, its exit code, no start line);
    /// otherwise `Ok` with the stderr bytes still held (the command's).
    pub fn finish(self, exit: Option<i32>) -> Result<Vec<u8>, WrapperRefusal> {
        match self.state {
            GateState::Refused(r) => {
                let code = match r {
                    WrapperRefusal::Escape(_) => EXIT_CWD_ESCAPE,
                    _ => EXIT_CWD_MISSING,
                };
                if exit == Some(code) {
                    Err(r)
                } else {
                    // Cannot happen with the wrapper above; never guess.
                    Ok(Vec::new())
                }
            }
            GateState::Pending(held) => Ok(held),
            GateState::Started | GateState::Passthrough => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        gate_nonce: &str,
        chunks: &[&[u8]],
        exit: i32,
    ) -> (Vec<u8>, Result<Vec<u8>, WrapperRefusal>) {
        let mut g = Gate::new(gate_nonce);
        let mut out = vec![];
        for c in chunks {
            out.extend(g.stderr(c));
        }
        (out, g.finish(Some(exit)))
    }

    #[test]
    fn start_line_is_held_back_and_split_chunks_work() {
        let (out, v) = run("n1", &[b"rfs-sta", b"rted:n1\nhello\n", b"bye"], 0);
        assert_eq!(out, b"hello\nbye");
        assert_eq!(v, Ok(vec![]));
    }

    #[test]
    fn refusals_need_nonce_first_line_and_exit_code() {
        let (out, v) = run("n1", &[b"rfs-refused:n1:cwd\n"], 121);
        assert!(out.is_empty());
        assert_eq!(v, Err(WrapperRefusal::CwdMissing));
        let (_, v) = run("n1", &[b"rfs-refused:n1:escape:/etc\n"], 122);
        assert_eq!(v, Err(WrapperRefusal::Escape("/etc".into())));
        // Wrong nonce, wrong code: the command's own output.
        let (out, v) = run("n1", &[b"rfs-refused:n2:cwd\n"], 121);
        assert_eq!(
            (out.as_slice(), v),
            (&b"rfs-refused:n2:cwd\n"[..], Ok(vec![]))
        );
        let (_, v) = run("n1", &[b"rfs-refused:n1:cwd\n"], 1);
        assert_eq!(v, Ok(vec![]));
    }

    #[test]
    fn a_command_that_knows_the_nonce_still_cannot_forge_a_refusal() {
        let (out, v) = run("n1", &[b"rfs-started:n1\n", b"rfs-refused:n1:cwd\n"], 121);
        assert_eq!(out, b"rfs-refused:n1:cwd\n");
        assert_eq!(v, Ok(vec![]));
    }

    #[test]
    fn unterminated_output_is_given_back() {
        let (out, v) = run("n1", &[b"sh: oops"], 2);
        assert!(out.is_empty());
        assert_eq!(v, Ok(b"sh: oops".to_vec()));
        let big = vec![b'x'; MAX_SIGNAL_LINE + 1];
        let (out, _) = run("n1", &[&big], 0);
        assert_eq!(out.len(), big.len());
    }
}
