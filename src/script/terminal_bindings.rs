//! Script functions for terminal proofs: `attach()`, the `Terminal` handle
//! (`send`, `press`, `resize`, `screen`, `line`, `cursor`, `wait_exit`,
//! `close`) and `assert_screen()`.

use std::sync::Arc;

use rhai::{Array, Dynamic, Engine, EvalAltResult, Map, NativeCallContext};

use super::bindings::{script_error, to_rhai};
use super::options::Opts;
use crate::runtime::attach::{AttachOptions, Attached};
use crate::runtime::Run;
use crate::terminal::PatternSpec;
use rfs_sandbox::provider::ExecOutcome;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// The script's handle on one attached session.
#[derive(Clone)]
pub(crate) struct TerminalHandle {
    run: Arc<Run>,
    s: Arc<Attached>,
}

/// A terminal handle's session: its number (as the journal, recordings
/// and reports number it), command, and whether its program has exited;
/// `None` when `d` is not a terminal.
pub(crate) fn session_of(d: &Dynamic) -> Option<(u32, String, bool)> {
    let t = d.read_lock::<TerminalHandle>()?;
    Some((
        t.s.index,
        t.s.command.clone(),
        t.s.session.exit_status().is_some(),
    ))
}

fn usage(msg: impl std::fmt::Display, ctx: &NativeCallContext) -> Box<EvalAltResult> {
    script_error(msg, ctx.call_position())
}

fn size(v: i64, what: &str, ctx: &NativeCallContext) -> RhaiResult<u16> {
    u16::try_from(v)
        .ok()
        .filter(|v| (1..=crate::terminal::MAX_SIDE).contains(v))
        .ok_or_else(|| {
            usage(
                format!(
                    "{what} must be between 1 and {}, not {v}",
                    crate::terminal::MAX_SIDE
                ),
                ctx,
            )
        })
}

fn attach_opts(map: Map, ctx: &NativeCallContext) -> RhaiResult<AttachOptions> {
    let mut o = Opts::new("attach()", map);
    let mut a = AttachOptions::default();
    let e = |m: super::options::OptionError| usage(m, ctx);
    if let Some(c) = o.int("cols").map_err(e)? {
        a.cols = size(c, "cols", ctx)?;
    }
    if let Some(r) = o.int("rows").map_err(e)? {
        a.rows = size(r, "rows", ctx)?;
    }
    a.env = o.string_map("env").map_err(e)?;
    a.cwd = o.string("cwd").map_err(e)?;
    if let Some(t) = o.string("term").map_err(e)? {
        a.term = t;
    }
    o.finish().map_err(e)?;
    Ok(a)
}

/// A pattern from a string (contained text) or a map.
fn pattern(p: Dynamic, ctx: &NativeCallContext) -> RhaiResult<PatternSpec> {
    if p.is_string() {
        return Ok(PatternSpec {
            text: Some(p.into_string().expect("string")),
            ..Default::default()
        });
    }
    if !p.is_map() {
        return Err(usage(
            format!(
                "assert_screen: the pattern must be a string or a map, not {}",
                p.type_name()
            ),
            ctx,
        ));
    }
    // Whole seconds are fine where seconds may be fractional.
    let mut map = p.cast::<Map>();
    if let Some(t) = map.get_mut("timeout") {
        if let Ok(i) = t.as_int() {
            *t = Dynamic::from_float(i as f64);
        }
    }
    rhai::serde::from_dynamic::<PatternSpec>(&Dynamic::from_map(map))
        .map_err(|e| usage(format!("assert_screen: invalid pattern: {e}"), ctx))
}

fn outcome_map(o: &ExecOutcome) -> Map {
    let mut m = Map::new();
    m.insert(
        "exit".into(),
        o.exit
            .map(|e| Dynamic::from(e as i64))
            .unwrap_or(Dynamic::UNIT),
    );
    m.insert(
        "signal".into(),
        o.signal
            .map(|e| Dynamic::from(e as i64))
            .unwrap_or(Dynamic::UNIT),
    );
    m
}

/// Register the terminal functions for `run`.
pub(crate) fn register(engine: &mut Engine, run: Arc<Run>) {
    engine.register_type_with_name::<TerminalHandle>("Terminal");
    let r = run.clone();
    engine.register_fn(
        "attach",
        move |ctx: NativeCallContext, cmd: &str| -> RhaiResult<TerminalHandle> {
            let s = r
                .attach(cmd, AttachOptions::default())
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            Ok(TerminalHandle { run: r.clone(), s })
        },
    );
    let r = run.clone();
    engine.register_fn(
        "attach",
        move |ctx: NativeCallContext, cmd: &str, opts: Map| -> RhaiResult<TerminalHandle> {
            let o = attach_opts(opts, &ctx)?;
            let s = r
                .attach(cmd, o)
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            Ok(TerminalHandle { run: r.clone(), s })
        },
    );
    engine.register_fn(
        "send",
        |ctx: NativeCallContext, t: &mut TerminalHandle, text: &str| -> RhaiResult<()> {
            t.run
                .attach_send(&t.s, text)
                .map_err(|e| to_rhai(&t.run, e, ctx.call_position()))
        },
    );
    engine.register_fn(
        "press",
        |ctx: NativeCallContext, t: &mut TerminalHandle, key: &str| -> RhaiResult<()> {
            t.run
                .attach_press(&t.s, key)
                .map_err(|e| to_rhai(&t.run, e, ctx.call_position()))
        },
    );
    engine.register_fn(
        "resize",
        |ctx: NativeCallContext, t: &mut TerminalHandle, cols: i64, rows: i64| -> RhaiResult<()> {
            let (c, r) = (size(cols, "cols", &ctx)?, size(rows, "rows", &ctx)?);
            t.run
                .attach_resize(&t.s, c, r)
                .map_err(|e| to_rhai(&t.run, e, ctx.call_position()))
        },
    );
    engine.register_fn("screen", |t: &mut TerminalHandle| {
        t.s.session.screen().text()
    });
    engine.register_fn("line", |t: &mut TerminalHandle, n: i64| -> String {
        t.s.session
            .line(n.clamp(i32::MIN as i64, i32::MAX as i64) as i32)
            .unwrap_or_default()
    });
    engine.register_fn("cursor", |t: &mut TerminalHandle| -> Array {
        let (r, c) = t.s.session.cursor();
        vec![Dynamic::from(r as i64), Dynamic::from(c as i64)]
    });
    engine.register_fn(
        "wait_exit",
        |ctx: NativeCallContext, t: &mut TerminalHandle, secs: Dynamic| -> RhaiResult<Map> {
            let d = super::options::seconds_value("wait_exit: the timeout", &secs)
                .map_err(|m| usage(m, &ctx))?;
            t.run
                .attach_wait_exit(&t.s, d)
                .map(|o| outcome_map(&o))
                .map_err(|e| to_rhai(&t.run, e, ctx.call_position()))
        },
    );
    engine.register_fn(
        "close",
        |ctx: NativeCallContext, t: &mut TerminalHandle| -> RhaiResult<Map> {
            t.run
                .attach_close(&t.s)
                .map(|o| outcome_map(&o))
                .map_err(|e| to_rhai(&t.run, e, ctx.call_position()))
        },
    );
    engine.register_fn("to_string", |t: &mut TerminalHandle| {
        format!("terminal session {} (`{}`)", t.s.index, t.s.command)
    });
    let r = run;
    engine.register_fn(
        "assert_screen",
        move |ctx: NativeCallContext, t: TerminalHandle, p: Dynamic| -> RhaiResult<()> {
            let spec = pattern(p, &ctx)?;
            r.assert_screen(&t.s, &spec)
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))
        },
    );
}
