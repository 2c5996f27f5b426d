//! Script functions for background processes: `spawn()` and the
//! `Process` handle (`wait_for`, `alive`, `logs`, `stop`).

use std::sync::Arc;

use rhai::{Dynamic, Engine, EvalAltResult, Map, NativeCallContext};

use super::bindings::{script_error, to_rhai};
use super::options::{OptionError, Opts};
use crate::runtime::spawn::{SpawnOptions, Spawned};
use crate::runtime::spawn_wait::{WaitFor, DEFAULT_WAIT};
use crate::runtime::Run;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// The script's handle on one background process.
#[derive(Clone)]
pub(crate) struct ProcessHandle {
    run: Arc<Run>,
    p: Arc<Spawned>,
}

fn spawn_opts(map: Map) -> Result<SpawnOptions, OptionError> {
    let mut o = Opts::new("spawn()", map);
    let cwd = o.string("cwd")?;
    let env = o.string_map("env")?;
    o.finish()?;
    Ok(SpawnOptions { cwd, env })
}

pub(super) fn wait_opts(map: Map) -> Result<(WaitFor, std::time::Duration), String> {
    let mut o = Opts::new("wait_for()", map);
    let e = |m: OptionError| m.to_string();
    let port = o.int("port").map_err(e)?;
    let line = o.string("line").map_err(e)?;
    let timeout = o.seconds("timeout").map_err(e)?.unwrap_or(DEFAULT_WAIT);
    o.finish().map_err(e)?;
    let what = match (port, line) {
        (Some(p), None) => WaitFor::Port(
            u16::try_from(p)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("wait_for(): `port` must be between 1 and 65535, not {p}"))?,
        ),
        (None, Some(l)) if !l.is_empty() => WaitFor::Line(l),
        (None, Some(_)) => return Err("wait_for(): `line` must not be empty".into()),
        _ => {
            return Err(
                "wait_for() takes exactly one of `port` (a TCP port in the sandbox) and `line` (text a line of its output contains)".into(),
            )
        }
    };
    Ok((what, timeout))
}

fn ended_map(e: &crate::runtime::spawn::Ended) -> Map {
    let int = |v: Option<i32>| v.map(|v| Dynamic::from(v as i64)).unwrap_or(Dynamic::UNIT);
    let mut m = Map::new();
    m.insert("exit".into(), int(e.exit));
    m.insert("signal".into(), int(e.signal));
    m.insert(
        "group_gone".into(),
        e.group_gone.map(Dynamic::from).unwrap_or(Dynamic::UNIT),
    );
    m
}

/// Register `spawn()` and the `Process` handle for `run`.
pub(crate) fn register(engine: &mut Engine, run: Arc<Run>) {
    engine.register_type_with_name::<ProcessHandle>("Process");
    let r = run.clone();
    engine.register_fn(
        "spawn",
        move |ctx: NativeCallContext, name: &str, cmd: &str| -> RhaiResult<ProcessHandle> {
            let p = r
                .spawn(name, cmd, SpawnOptions::default())
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            Ok(ProcessHandle { run: r.clone(), p })
        },
    );
    let r = run;
    engine.register_fn(
        "spawn",
        move |ctx: NativeCallContext,
              name: &str,
              cmd: &str,
              opts: Map|
              -> RhaiResult<ProcessHandle> {
            let o = spawn_opts(opts).map_err(|m| script_error(m, ctx.call_position()))?;
            let p = r
                .spawn(name, cmd, o)
                .map_err(|e| to_rhai(&r, e, ctx.call_position()))?;
            Ok(ProcessHandle { run: r.clone(), p })
        },
    );
    engine.register_fn(
        "wait_for",
        |ctx: NativeCallContext, h: &mut ProcessHandle, opts: Map| -> RhaiResult<()> {
            let (what, timeout) =
                wait_opts(opts).map_err(|m| script_error(m, ctx.call_position()))?;
            h.run
                .wait_for(&h.p, what, timeout)
                .map_err(|e| to_rhai(&h.run, e, ctx.call_position()))
        },
    );
    engine.register_fn("alive", |h: &mut ProcessHandle| h.p.alive());
    engine.register_fn("logs", |h: &mut ProcessHandle| h.p.logs());
    engine.register_fn(
        "stop",
        |ctx: NativeCallContext, h: &mut ProcessHandle| -> RhaiResult<Map> {
            h.run
                .stop_spawned(&h.p)
                .map(|e| ended_map(&e))
                .map_err(|e| to_rhai(&h.run, e, ctx.call_position()))
        },
    );
    engine.register_get("name", |h: &mut ProcessHandle| h.p.name.clone());
    engine.register_fn("to_string", |h: &mut ProcessHandle| {
        format!("background process `{}`", h.p.name)
    });
}
