//! Waiting on a background process ([`super::spawn`]): `wait_for` a line
//! of its output or a listening port, and the probes rfs runs in the
//! sandbox (the port, and that a stopped group is gone). Probes run in
//! the sandbox, not on this machine: the sandbox may have its own network
//! and process namespaces.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::background::Background;
use super::spawn::Spawned;
use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::{BoundedCollect, ExecRequest, PROBE_OUTPUT};

/// What `wait_for` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WaitFor {
    /// A line of its output contains this text.
    Line(String),
    /// A TCP socket listens on this port in the sandbox.
    Port(u16),
}

impl WaitFor {
    /// What it waits for, in words.
    pub(crate) fn shown(&self) -> String {
        match self {
            WaitFor::Line(l) => format!("a line containing {l:?}"),
            WaitFor::Port(p) => format!("port {p} to listen in the sandbox"),
        }
    }

    pub(crate) fn on(&self) -> &'static str {
        match self {
            WaitFor::Line(_) => "line",
            WaitFor::Port(_) => "port",
        }
    }

    pub(crate) fn target(&self) -> String {
        match self {
            WaitFor::Line(l) => l.clone(),
            WaitFor::Port(p) => p.to_string(),
        }
    }
}

/// Default `wait_for` timeout.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Whether a TCP socket listens on port `$1` of a loopback or any
/// address (IPv4 or IPv6), read from the sandbox's own
/// `/proc/net/tcp{,6}` (state `0A` is LISTEN; addresses are hex in the
/// kernel's byte order). Exit 0: listening; 1: not; 2: no table to read.
const PORT_PROBE: &str = r#"p=$(printf '%04X' "$1")
seen=
for f in /proc/net/tcp /proc/net/tcp6; do
  [ -r "$f" ] || continue
  seen=1
  while read -r sl addr rem st rest; do
    [ "$st" = 0A ] || continue
    case "$addr" in
      *:"$p") ;;
      *) continue ;;
    esac
    case "${addr%:*}" in
      00000000|??????7F|00000000000000000000000000000000|00000000000000000000000001000000|0000000000000000FFFF0000??????7F) exit 0 ;;
    esac
  done < "$f"
done
[ -n "$seen" ] || exit 2
exit 1
"#;

/// Whether no process of group `$1` is left (zombies waiting to be
/// reaped do not count), polled for up to 5 s. Exit 0: none left; 1:
/// some still there; 2: no /proc to read. `kill -0` on the group first:
/// when it finds none (the usual end) the probe is done at once, instead
/// of reading every process's `stat` — with thousands of processes in
/// the sandbox that took most of a second per `stop()`.
const GROUP_GONE_PROBE: &str = r#"g=$1
[ -d /proc/self ] || exit 2
i=0
while :; do
  kill -0 -"$g" 2>/dev/null || exit 0
  left=0
  for d in /proc/[0-9]*; do
    read -r s < "$d/stat" 2>/dev/null || continue
    s=${s##*) }
    set -- $s
    if [ "$3" = "$g" ] && [ "$1" != Z ]; then left=1; fi
  done
  [ "$left" = 0 ] && exit 0
  i=$((i+1))
  [ "$i" -gt 50 ] && exit 1
  sleep 0.1
done
"#;

impl Run {
    /// Run a probe script in the sandbox (not through the cwd wrapper:
    /// it reads /proc only); its exit code.
    fn probe(
        &self,
        id: &str,
        script: &str,
        arg: &str,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<Option<i32>> {
        let req = ExecRequest {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                script.into(),
                "rfs-probe".into(),
                arg.into(),
            ],
            cwd: "/".into(),
            env: vec![],
            timeout: Some(Duration::from_secs(20)),
            cancel: cancel.child_token(),
        };
        let mut sink = BoundedCollect::new(PROBE_OUTPUT, PROBE_OUTPUT, req.cancel.clone());
        let ran = self.block_on(self.cfg.provider.exec(id, &req, &mut sink));
        if let Some(e) = sink.error(&format!("a probe in sandbox {id}")) {
            return Err(Error::ScriptFailed(e.to_string()));
        }
        let o =
            ran.map_err(|e| Error::ScriptFailed(format!("a probe in sandbox {id} failed: {e}")))?;
        if o.cancelled {
            return Err(Error::Interrupted);
        }
        Ok(o.exit)
    }

    /// Whether no process of group `g` is left in sandbox `id`: `None`
    /// when the probe could not tell (no /proc, the sandbox gone). Asked
    /// after an interrupt too (the probe is bounded, not cancelled).
    pub(crate) fn group_gone(&self, id: &str, g: i32) -> Option<bool> {
        if self.state().destroyed {
            return None;
        }
        let fresh = tokio_util::sync::CancellationToken::new();
        match self.probe(id, GROUP_GONE_PROBE, &g.to_string(), fresh) {
            Ok(Some(0)) => Some(true),
            Ok(Some(1)) => Some(false),
            _ => None,
        }
    }

    /// `srv.wait_for(#{ line | port, timeout })`: wait until it holds;
    /// a timeout, or the process ending first, fails the script with
    /// the tail of its output.
    pub(crate) fn wait_for(
        &self,
        sp: &Arc<Spawned>,
        what: WaitFor,
        timeout: Duration,
    ) -> Result<()> {
        match self.watch_until(sp, &what, timeout)? {
            Ok(after_ms) => self.record(Event::SpawnReady {
                name: sp.name.clone(),
                on: what.on().into(),
                target: self.state().redactor.redact_str(&what.target()),
                after_ms,
            }),
            Err(why) => {
                let tail = sp.shared.lines().tail();
                self.record(Event::SpawnWaitFailed {
                    name: sp.name.clone(),
                    on: what.on().into(),
                    target: self.state().redactor.redact_str(&what.target()),
                    timeout_s: timeout.as_secs_f64(),
                    why: why.clone(),
                    output_tail: tail.clone(),
                })?;
                let msg = format!(
                    "spawn `{}`: wait_for {}: {why}{}",
                    sp.name,
                    what.shown(),
                    tail_text(tail.as_ref())
                );
                Err(Error::ScriptFailed(self.state().redactor.redact_str(&msg)))
            }
        }
    }

    /// Wait until `what` holds for `w` (its output, or a port probed in
    /// its sandbox): `Ok(after ms)`, or why not (timed out, it ended
    /// first, no table to probe).
    pub(crate) fn watch_until<D, E: Clone>(
        &self,
        w: &Background<D, E>,
        what: &WaitFor,
        timeout: Duration,
    ) -> Result<std::result::Result<u64, String>> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut last_probe: Option<Instant> = None;
        let why = loop {
            self.check_cancelled()?;
            // Read before asking whether it still runs: a line printed
            // right before the end counts.
            let running = w.alive();
            let held = match what {
                WaitFor::Line(l) => w.shared.lines().contains(l),
                WaitFor::Port(p) => {
                    let due = last_probe.is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
                    if due {
                        last_probe = Some(Instant::now());
                        match self.probe(
                            &w.sandbox_id,
                            PORT_PROBE,
                            &p.to_string(),
                            self.cancel_token(),
                        )? {
                            Some(0) => true,
                            Some(2) => {
                                break "the sandbox has no /proc/net/tcp to read listening sockets from (wait_for a line instead)".to_owned()
                            }
                            _ => false,
                        }
                    } else {
                        false
                    }
                }
            };
            if held {
                return Ok(Ok(super::ms(start.elapsed().as_millis())));
            }
            if !running {
                break "it ended before that".to_owned();
            }
            if Instant::now() >= deadline {
                break format!("timed out after {}", secs(timeout));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Ok(Err(why))
    }
}

/// The tail of an output for a failure's message.
pub(crate) fn tail_text(tail: Option<&rfs_evidence::events::OutputTail>) -> String {
    match tail {
        Some(t) => {
            let mut s = String::new();
            for (label, text) in [("stdout", &t.stdout), ("stderr", &t.stderr)] {
                if !text.is_empty() {
                    s.push_str(&format!("\n--- its {label}, last lines ---\n{text}"));
                }
            }
            s
        }
        None => "\n(it printed nothing)".to_owned(),
    }
}

pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}
