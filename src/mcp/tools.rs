//! The tools of `rfs mcp`, as a client sees them. Each one becomes one
//! evaluation on the session's script thread ([`super::worker`]), so it
//! is journaled and refused exactly as the same call in a script.

use std::sync::Arc;

use rhai::Dynamic;
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData as McpError, ServerHandler};
use serde::Deserialize;

use super::client_session::Session;
use super::worker::{fixed, lit, Reply, Shown};

/// The session behind the tools, once it has started (it starts after
/// the client initialized): `Err` when it could not.
pub(crate) type Started = Option<Result<Arc<Session>, String>>;

impl RfsMcp {
    /// The session, waiting for it to start; the tool error when it did not.
    async fn session(&self) -> Result<Arc<Session>, CallToolResult> {
        let mut rx = self.ready.clone();
        let started = rx.wait_for(Option::is_some).await.map(|s| s.clone());
        match started {
            Ok(Some(Ok(s))) => Ok(s),
            Ok(Some(Err(e))) => Err(err_text(&format!("the session could not start: {e}"))),
            _ => Err(err_text("the session could not start")),
        }
    }

    /// Evaluate one call on the session's script thread; its result.
    async fn eval(
        &self,
        code: &str,
        vars: Vec<(&'static str, Dynamic)>,
        shown: Option<Shown>,
    ) -> Result<CallToolResult, McpError> {
        let session = match self.session().await {
            Ok(s) => s,
            Err(r) => return Ok(r),
        };
        Ok(match session.eval(code.into(), vars, shown).await {
            Ok(Reply::Value(v)) => CallToolResult::success(vec![ContentBlock::text(
                serde_json::to_string_pretty(&v).unwrap_or_default(),
            )]),
            Ok(Reply::Failed { refused, reason }) => {
                let word = if refused { "refused: " } else { "failed: " };
                let reason = reason.strip_prefix(word).unwrap_or(&reason);
                err_text(&format!("{word}{reason}"))
            }
            Err(why) => err_text(why),
        })
    }
}

fn err_text(t: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(t.to_owned())])
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SyncArgs {
    /// A revision to bind (default HEAD); a later call moves the source
    /// to another commit by incremental re-sync.
    pub rev: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct StepArgs {
    /// A name for the step (journal, evidence).
    pub name: String,
    /// The command, run by `sh -c` in the sandbox.
    pub command: String,
    /// Working directory inside the synced source (default: where rfs
    /// was started, mapped into it).
    pub cwd: Option<String>,
    /// Seconds before the step is killed.
    pub timeout: Option<i64>,
    /// Extra environment variables.
    pub env: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct AttachArgs {
    /// The program to run in a terminal (an agent CLI, a shell, a TUI).
    pub command: String,
    pub cols: Option<i64>,
    pub rows: Option<i64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SendArgs {
    /// The terminal, as `attach` numbered it (its session number in the
    /// journal, recordings and reports).
    pub terminal: i64,
    /// Text to type (use "\r" for Enter).
    pub text: Option<String>,
    /// A key to press instead: enter, tab, escape, up, down, ctrl-c, ...
    pub key: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct ScreenArgs {
    /// The terminal, as `attach` numbered it.
    pub terminal: i64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct AssertArgs {
    /// The terminal, as `attach` numbered it.
    pub terminal: i64,
    /// Text the screen must show.
    pub text: Option<String>,
    /// Or a regular expression it must match.
    pub regex: Option<String>,
    /// Wait for it to be gone instead.
    pub absent: Option<bool>,
    /// Seconds to wait (default 10).
    pub timeout: Option<i64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct JournalArgs {
    /// How many of the last journal lines (default 20).
    pub tail: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SaveArgs {
    /// Where to write the script: relative to where rfs mcp started,
    /// inside its repository.
    pub path: String,
    /// Overwrite an existing file.
    pub overwrite: Option<bool>,
}

/// The MCP server of one session.
#[derive(Clone)]
pub(crate) struct RfsMcp {
    ready: tokio::sync::watch::Receiver<Started>,
    tool_router: ToolRouter<Self>,
}

impl RfsMcp {
    pub(crate) fn new(ready: tokio::sync::watch::Receiver<Started>) -> Self {
        RfsMcp {
            ready,
            tool_router: Self::tool_router(),
        }
    }
}

/// A Rhai map literal of the given entries (`None`s left out).
fn map_lit(entries: &[(&str, Option<String>)]) -> String {
    let body: Vec<String> = entries
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}: {v}")))
        .collect();
    format!("#{{ {} }}", body.join(", "))
}

fn rhai_map(entries: Vec<(&str, Option<Dynamic>)>) -> Dynamic {
    let mut m = rhai::Map::new();
    for (k, v) in entries {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    }
    Dynamic::from_map(m)
}

#[tool_router]
impl RfsMcp {
    #[tool(
        description = "Bind the repository's committed source into the session's sandbox (resolved once to a commit, shipped from the object database, verified in the sandbox). Give rev to move it to another commit (incremental re-sync). Returns the pin: commit, tree digest, files, workdir."
    )]
    async fn sync(&self, Parameters(a): Parameters<SyncArgs>) -> Result<CallToolResult, McpError> {
        let opts = rhai_map(vec![("rev", a.rev.clone().map(Dynamic::from))]);
        let shown = format!(
            "sync_source({});",
            map_lit(&[("rev", a.rev.as_deref().map(lit))])
        );
        self.eval(
            "sync_source(mcp_opts)",
            vec![("mcp_opts", opts)],
            Some(fixed(shown)),
        )
        .await
    }

    #[tool(
        description = "Run a command in the session's sandbox, in the synced source (binding it first if needed). Returns ok, exit, stdout, stderr, duration. A failing command is a result (ok: false), not an error; a refused one (a cwd that escapes the source, ...) is an error with the reason."
    )]
    async fn step(&self, Parameters(a): Parameters<StepArgs>) -> Result<CallToolResult, McpError> {
        let env = a.env.as_ref().map(|e| {
            let m: rhai::Map = e
                .iter()
                .map(|(k, v)| (k.into(), Dynamic::from(v.clone())))
                .collect();
            Dynamic::from_map(m)
        });
        let opts = rhai_map(vec![
            ("cwd", a.cwd.clone().map(Dynamic::from)),
            ("timeout", a.timeout.map(Dynamic::from)),
            ("env", env),
            ("allow_failure", Some(Dynamic::from(true))),
        ]);
        let env_lit = a.env.as_ref().map(|e| {
            let parts: Vec<String> = e
                .iter()
                .map(|(k, v)| format!("{}: {}", lit(k), lit(v)))
                .collect();
            format!("#{{ {} }}", parts.join(", "))
        });
        let (name, command, cwd, timeout) =
            (a.name.clone(), a.command.clone(), a.cwd.clone(), a.timeout);
        // Saved as the agent saw it: a step that succeeded must succeed
        // again (a failure fails the saved script); one that failed is kept
        // for its effects, allowed to fail, its exit noted.
        let shown: Shown = Box::new(move |v| {
            let failed = v["ok"] != true;
            let entries = [
                ("cwd", cwd.as_deref().map(lit)),
                ("timeout", timeout.map(|t| t.to_string())),
                ("env", env_lit),
                ("allow_failure", failed.then(|| "true".into())),
            ];
            let call = if entries.iter().all(|(_, v)| v.is_none()) {
                format!("step({}, {});", lit(&name), lit(&command))
            } else {
                let opts = map_lit(&entries);
                format!("step({}, {}, {opts});", lit(&name), lit(&command))
            };
            if failed {
                let how = match (&v["exit"], v["timed_out"] == true) {
                    (_, true) => "timed out".to_owned(),
                    (serde_json::Value::Number(n), _) => format!("exit {n}"),
                    _ => "no exit code".to_owned(),
                };
                format!("// failed in the session ({how}): kept for its effects, allowed to fail\n{call}")
            } else {
                call
            }
        });
        self.eval(
            "step(mcp_name, mcp_cmd, mcp_opts)",
            vec![
                ("mcp_name", Dynamic::from(a.name)),
                ("mcp_cmd", Dynamic::from(a.command)),
                ("mcp_opts", opts),
            ],
            Some(shown),
        )
        .await
    }

    #[tool(
        description = "Open an interactive terminal session (a real PTY) in the sandbox running a program; returns its number for send, screen and assert_screen (the same number the journal, recordings and reports give the session: the first is 1)."
    )]
    async fn attach(
        &self,
        Parameters(a): Parameters<AttachArgs>,
    ) -> Result<CallToolResult, McpError> {
        let opts = rhai_map(vec![
            ("cols", a.cols.map(Dynamic::from)),
            ("rows", a.rows.map(Dynamic::from)),
        ]);
        let (command, cols, rows) = (a.command.clone(), a.cols, a.rows);
        // Saved under the number the session gave it (the journal's).
        let shown: Shown = Box::new(move |v| {
            format!(
                "let t{} = attach({}, {});",
                v,
                lit(&command),
                map_lit(&[
                    ("cols", cols.map(|c| c.to_string())),
                    ("rows", rows.map(|r| r.to_string()))
                ])
            )
        });
        self.eval(
            "mcp_terms.mcp_keep(attach(mcp_cmd, mcp_opts))",
            vec![("mcp_cmd", Dynamic::from(a.command)), ("mcp_opts", opts)],
            Some(shown),
        )
        .await
    }

    #[tool(description = "Type text, or press a named key, in a terminal session.")]
    async fn send(&self, Parameters(a): Parameters<SendArgs>) -> Result<CallToolResult, McpError> {
        let (code, shown, value) = match (&a.text, &a.key) {
            (Some(t), None) => (
                "send(mcp_terms.mcp_term(mcp_i), mcp_v)",
                format!("send(t{}, {});", a.terminal, lit(t)),
                t.clone(),
            ),
            (None, Some(k)) => (
                "press(mcp_terms.mcp_term(mcp_i), mcp_v)",
                format!("press(t{}, {});", a.terminal, lit(k)),
                k.clone(),
            ),
            _ => return Ok(err_text("give exactly one of text and key")),
        };
        self.eval(
            code,
            vec![
                ("mcp_i", Dynamic::from(a.terminal)),
                ("mcp_v", Dynamic::from(value)),
            ],
            Some(fixed(shown)),
        )
        .await
    }

    #[tool(
        description = "The terminal session's screen as text, as its emulated terminal shows it now."
    )]
    async fn screen(
        &self,
        Parameters(a): Parameters<ScreenArgs>,
    ) -> Result<CallToolResult, McpError> {
        self.eval(
            "screen(mcp_terms.mcp_term(mcp_i))",
            vec![("mcp_i", Dynamic::from(a.terminal))],
            None,
        )
        .await
    }

    #[tool(
        description = "Wait until a terminal session's screen shows a text or matches a regex (or, with absent, no longer does), within a timeout; an error with a screen dump when it does not."
    )]
    async fn assert_screen(
        &self,
        Parameters(a): Parameters<AssertArgs>,
    ) -> Result<CallToolResult, McpError> {
        let pattern = rhai_map(vec![
            ("text", a.text.clone().map(Dynamic::from)),
            ("regex", a.regex.clone().map(Dynamic::from)),
            ("absent", a.absent.map(Dynamic::from)),
            ("timeout", Some(Dynamic::from(a.timeout.unwrap_or(10)))),
        ]);
        let shown = format!(
            "assert_screen(t{}, {});",
            a.terminal,
            map_lit(&[
                ("text", a.text.as_deref().map(lit)),
                ("regex", a.regex.as_deref().map(lit)),
                ("absent", a.absent.map(|b| b.to_string())),
                ("timeout", Some(a.timeout.unwrap_or(10).to_string())),
            ])
        );
        self.eval(
            "assert_screen(mcp_terms.mcp_term(mcp_i), mcp_p); true",
            vec![("mcp_i", Dynamic::from(a.terminal)), ("mcp_p", pattern)],
            Some(fixed(shown)),
        )
        .await
    }

    #[tool(
        description = "The last lines of the session's journal (every fact of the run, as JSON lines: placement with its network policy, pins, steps, every connection through rfs's egress proxy (`net.connect`: destination, allowed or refused and by which rule, bytes), refusals)."
    )]
    async fn journal(
        &self,
        Parameters(a): Parameters<JournalArgs>,
    ) -> Result<CallToolResult, McpError> {
        let session = match self.session().await {
            Ok(s) => s,
            Err(r) => return Ok(r),
        };
        let text =
            std::fs::read_to_string(session.out_dir.join("journal.jsonl")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let n = a.tail.unwrap_or(20).min(lines.len());
        Ok(CallToolResult::success(vec![ContentBlock::text(
            lines[lines.len() - n..].join("\n"),
        )]))
    }

    #[tool(
        description = "Write the calls that succeeded so far as a Rhai script `rfs run` can run, checking what the session saw: a step that succeeded must succeed again, each screen asserted is asserted again; says how to run it. The path is relative to where rfs mcp started and must stay inside the repository (not in .git, not in the run's output folder, through no symlink, onto no special file)."
    )]
    async fn save(&self, Parameters(a): Parameters<SaveArgs>) -> Result<CallToolResult, McpError> {
        let session = match self.session().await {
            Ok(s) => s,
            Err(r) => return Ok(r),
        };
        let lines = session
            .transcript
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let text = format!(
            "// Saved by rfs mcp from run {}.\n{}\n",
            session.run.cfg.run_id,
            lines.join("\n")
        );
        let (bounds, overwrite) = (session.bounds.clone(), a.overwrite.unwrap_or(false));
        let path = a.path.clone();
        // Off the protocol's threads: a slow disk holds up this call only.
        let written = tokio::task::spawn_blocking(move || {
            super::save::write(&bounds, &path, text.as_bytes(), overwrite)
        })
        .await;
        let path = match written {
            Ok(Ok(p)) => p,
            Ok(Err(refusal)) => return Ok(err_text(&refusal.to_string())),
            Err(e) => return Ok(err_text(&format!("cannot write {:?}: {e}", a.path))),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "saved {} to {}; run it with `rfs run {}` (commit it first: rfs ships only what is committed)",
            rfs_evidence::plural::count(lines.len(), "call", "calls"),
            path.display(),
            path.display()
        ))]))
    }

    #[tool(
        description = "End the session: a call still running is cancelled and waited for, the sandbox is destroyed and its destruction verified; returns the outcome and where the evidence (EVIDENCE.md, journal) is."
    )]
    async fn end(&self) -> Result<CallToolResult, McpError> {
        let session = match self.session().await {
            Ok(s) => s,
            Err(r) => return Ok(r),
        };
        let s = session.clone();
        let ending = match tokio::task::spawn_blocking(move || s.end()).await {
            Ok((ending, true)) => ending,
            Ok((_, false)) => return Ok(err_text("the session has already ended")),
            Err(e) => return Ok(err_text(&format!("ending the session failed: {e}"))),
        };
        let cancelled = if ending.cancelled_a_call {
            " (the call that was running was cancelled)"
        } else {
            ""
        };
        let teardown = match &ending.teardown_warning {
            Some(w) => format!(" (warning: {w})"),
            None => " and verified gone".into(),
        };
        let text = format!(
            "session ended: {}{cancelled}; sandbox destroyed{teardown}; evidence: {}",
            ending.outcome.as_str(),
            session.out_dir.join("EVIDENCE.md").display()
        );
        Ok(match &ending.seal_error {
            Some(e) => err_text(&format!("{text}; but {e}: the evidence is incomplete")),
            None => CallToolResult::success(vec![ContentBlock::text(text)]),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RfsMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "rfs: one sandbox for this session, holding the repository's committed source. \
             Call sync (optional), then step to run commands, attach/send/screen/assert_screen for \
             terminal programs, journal to see the record, save to keep what worked as a script, \
             and end when done (the sandbox is destroyed and verified gone; also when you disconnect).",
        )
    }
}
