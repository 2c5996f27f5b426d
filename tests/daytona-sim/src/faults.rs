//! Runtime fault knobs: tests arm them, the HTTP layer consumes them.
//!
//! A rule matches a request by method (case-insensitive, `*` = any) and a
//! path prefix compared with the request path without the leading `/api`
//! (REST) — toolbox paths keep their `/toolbox/{id}/...` form; a `{}`
//! segment in the prefix matches any one segment (any sandbox id).

use std::sync::Mutex;
use std::time::Duration;

/// What the HTTP layer must do with one request before routing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Injected {
    /// Answer with this status and body (`None` = empty body).
    Fail { status: u16, body: Option<String> },
    /// Answer 429 with this `Retry-After` (seconds).
    RateLimit { retry_after_secs: u64 },
    /// Close the connection without any response.
    Drop,
    /// Handle the request, then close the connection without its response.
    DropResponse,
}

#[derive(Debug, Clone)]
struct Rule {
    method: String,
    prefix: String,
    remaining: u32,
    action: Injected,
}

#[derive(Debug, Clone)]
struct SlowRule {
    method: String,
    prefix: String,
    delay: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    rules: Vec<Rule>,
    slow: Vec<SlowRule>,
    corrupt_uploads: u32,
    create_late: Option<Duration>,
    create_ends_in: Option<&'static str>,
    exec_start_failures: Vec<String>,
    lost_exit_codes: Vec<String>,
    refuse_follow: bool,
    echo_unsuppressed: bool,
    pty_frame_delay: Option<Duration>,
    pty_drop_after: Option<usize>,
}

/// Thread-safe fault knobs of a running [`crate::Sim`].
#[derive(Debug, Default)]
pub struct Faults {
    inner: Mutex<Inner>,
}

/// A `{}` segment of the prefix matches any one segment of the path
/// (`/toolbox/{}/process/execute`); otherwise a plain prefix match.
fn matches(rule_method: &str, rule_prefix: &str, method: &str, path: &str) -> bool {
    if !(rule_method == "*" || rule_method.eq_ignore_ascii_case(method)) {
        return false;
    }
    if !rule_prefix.contains("{}") {
        return path.starts_with(rule_prefix);
    }
    let want: Vec<&str> = rule_prefix.split('/').collect();
    let got: Vec<&str> = path.split('/').collect();
    want.len() <= got.len()
        && want
            .iter()
            .zip(&got)
            .enumerate()
            .all(|(i, (w, g))| *w == "{}" || w == g || (i == want.len() - 1 && g.starts_with(w)))
}

impl Faults {
    fn push(&self, method: &str, path_prefix: &str, n: u32, action: Injected) {
        if n == 0 {
            return;
        }
        self.inner.lock().unwrap().rules.push(Rule {
            method: method.to_string(),
            prefix: path_prefix.to_string(),
            remaining: n,
            action,
        });
    }

    /// The next `n` matching requests fail with `status` and `body` (`None` = empty body).
    pub fn fail_next(
        &self,
        method: &str,
        path_prefix: &str,
        n: u32,
        status: u16,
        body: Option<String>,
    ) {
        self.push(method, path_prefix, n, Injected::Fail { status, body });
    }

    /// The next `n` matching requests get 429 with `Retry-After: retry_after_secs`.
    pub fn rate_limit_next(&self, method: &str, path_prefix: &str, n: u32, retry_after_secs: u64) {
        self.push(
            method,
            path_prefix,
            n,
            Injected::RateLimit { retry_after_secs },
        );
    }

    /// Every matching request waits `delay` before it is handled, until [`Faults::clear`].
    pub fn slow(&self, method: &str, path_prefix: &str, delay: Duration) {
        self.inner.lock().unwrap().slow.push(SlowRule {
            method: method.to_string(),
            prefix: path_prefix.to_string(),
            delay,
        });
    }

    /// The next `n` matching requests see their connection closed without a response.
    pub fn drop_next(&self, method: &str, path_prefix: &str, n: u32) {
        self.push(method, path_prefix, n, Injected::Drop);
    }

    /// The next `n` matching requests are carried out, but their
    /// connection is closed instead of answered (the client cannot tell
    /// whether the server acted).
    pub fn drop_response_next(&self, method: &str, path_prefix: &str, n: u32) {
        self.push(method, path_prefix, n, Injected::DropResponse);
    }

    /// The next uploaded file lands with one byte flipped (the client's verification must catch it).
    pub fn corrupt_next_upload(&self) {
        self.inner.lock().unwrap().corrupt_uploads += 1;
    }

    /// The next `POST /sandbox` creates the sandbox at once but answers only after `delay`.
    pub fn create_succeeds_late(&self, delay: Duration) {
        self.inner.lock().unwrap().create_late = Some(delay);
    }

    /// The next `POST /sandbox` answers, but its sandbox then goes to
    /// `state` instead of `started`: `"error"` or `"build_failed"` (with an
    /// `errorReason`), or `"creating"`, where it stays (it never starts).
    pub fn next_create_ends_in(&self, state: &'static str) {
        assert!(
            matches!(state, "error" | "build_failed" | "creating"),
            "unsupported create outcome {state}"
        );
        self.inner.lock().unwrap().create_ends_in = Some(state);
    }

    /// The next session command is answered at once with exit code -1 and
    /// `output` (what Daytona's daemon does when it cannot start the
    /// shell: Go's `fork/exec /usr/bin/zsh: no such file or directory`
    /// for a missing working directory, or nothing at all); the command
    /// does not run.
    pub fn next_exec_fails_to_start(&self, output: &str) {
        self.inner
            .lock()
            .unwrap()
            .exec_start_failures
            .push(output.to_owned());
    }

    /// The next session command whose text contains `needle` runs, but
    /// its exit code is lost (as when the daemon's session shell dies
    /// before recording it): its status never gets an `exitCode`, and its
    /// log follow ends with its output.
    pub fn lose_exit_code_of(&self, needle: &str) {
        self.inner
            .lock()
            .unwrap()
            .lost_exit_codes
            .push(needle.to_owned());
    }

    pub(crate) fn take_lost_exit_code(&self, command: &str) -> bool {
        let mut inner = self.inner.lock().unwrap();
        match inner
            .lost_exit_codes
            .iter()
            .position(|n| command.contains(n.as_str()))
        {
            Some(i) => {
                inner.lost_exit_codes.remove(i);
                true
            }
            None => false,
        }
    }

    pub(crate) fn take_create_ends_in(&self) -> Option<&'static str> {
        self.inner.lock().unwrap().create_ends_in.take()
    }

    pub(crate) fn take_exec_start_failure(&self) -> Option<String> {
        let mut inner = self.inner.lock().unwrap();
        if inner.exec_start_failures.is_empty() {
            None
        } else {
            Some(inner.exec_start_failures.remove(0))
        }
    }

    /// Input sent to session commands is echoed into their logs even when
    /// they were started with `suppressInputEcho: true`, like a daemon from
    /// before that field (it ignores it): a client must tell its input's
    /// echo from the command's output.
    pub fn echo_input_regardless(&self) {
        self.inner.lock().unwrap().echo_unsuppressed = true;
    }

    pub(crate) fn input_echo_unsuppressed(&self) -> bool {
        self.inner.lock().unwrap().echo_unsuppressed
    }

    /// Session log requests asking to follow (WebSocket upgrade) are
    /// answered as plain requests, like a proxy that does not pass
    /// upgrades on: clients must fall back to polling.
    pub fn refuse_log_follow(&self) {
        self.inner.lock().unwrap().refuse_follow = true;
    }

    pub(crate) fn log_follow_refused(&self) -> bool {
        self.inner.lock().unwrap().refuse_follow
    }

    /// PTY output reaches its WebSocket clients no faster than one frame
    /// per `delay` (a reader on a slow network), until [`Faults::clear`]:
    /// once a client is 256 frames behind, the daemon drops it with close
    /// code 1008 "slow consumer".
    pub fn slow_pty_reader(&self, delay: Duration) {
        self.inner.lock().unwrap().pty_frame_delay = Some(delay);
    }

    pub(crate) fn pty_frame_delay(&self) -> Option<Duration> {
        self.inner.lock().unwrap().pty_frame_delay
    }

    /// Every PTY WebSocket client is dropped as a slow consumer (close
    /// code 1008) once it has been sent more than `bytes` of output, until
    /// [`Faults::clear`]; the session itself goes on running, as when the
    /// daemon drops a client that fell 256 frames behind.
    pub fn drop_pty_clients_after(&self, bytes: usize) {
        self.inner.lock().unwrap().pty_drop_after = Some(bytes);
    }

    pub(crate) fn pty_drop_after(&self) -> Option<usize> {
        self.inner.lock().unwrap().pty_drop_after
    }

    /// Disarm every knob.
    pub fn clear(&self) {
        *self.inner.lock().unwrap() = Inner::default();
    }

    /// Consume the first armed rule matching this request, if any.
    pub(crate) fn take(&self, method: &str, path: &str) -> Option<Injected> {
        let mut inner = self.inner.lock().unwrap();
        let pos = inner
            .rules
            .iter()
            .position(|r| matches(&r.method, &r.prefix, method, path))?;
        let rule = &mut inner.rules[pos];
        rule.remaining -= 1;
        let action = rule.action.clone();
        if rule.remaining == 0 {
            inner.rules.remove(pos);
        }
        Some(action)
    }

    /// Total delay of the slow rules matching this request.
    pub(crate) fn delay(&self, method: &str, path: &str) -> Duration {
        let inner = self.inner.lock().unwrap();
        inner
            .slow
            .iter()
            .filter(|r| matches(&r.method, &r.prefix, method, path))
            .map(|r| r.delay)
            .sum()
    }

    pub(crate) fn take_corrupt_upload(&self) -> bool {
        let mut inner = self.inner.lock().unwrap();
        if inner.corrupt_uploads > 0 {
            inner.corrupt_uploads -= 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn take_create_late(&self) -> Option<Duration> {
        self.inner.lock().unwrap().create_late.take()
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn prefixes_match_plainly_or_with_any_segment() {
        assert!(matches("GET", "/sandbox", "get", "/sandbox/abc"));
        assert!(!matches("POST", "/sandbox", "GET", "/sandbox"));
        let p = "/toolbox/{}/process/execute";
        assert!(matches("*", p, "POST", "/toolbox/sb-1/process/execute"));
        assert!(!matches("*", p, "POST", "/toolbox/sb-1/process/session"));
        assert!(!matches("*", p, "POST", "/toolbox/sb-1"));
        assert!(matches(
            "*",
            "/toolbox/{}/process/sess",
            "POST",
            "/toolbox/x/process/session/s/exec"
        ));
    }
}
