//! How the REPL shows a value: maps one field a line, arrays one element a
//! line when they do not fit on one, a step result as its exit, duration,
//! attempts and the first lines of its output — unless that output was
//! just streamed above as the step ran (it is not shown twice).

use rhai::{Dynamic, Map};

/// Lines of a step's output shown before "… N more lines".
const OUTPUT_LINES: usize = 5;
/// A one-line rendering longer than this is broken over lines.
const WIDE: usize = 72;

/// Render `v` for the terminal. `streamed`: steps ran while it was
/// computed, and their output has been shown as they ran, so a step
/// result shows its exit and duration only.
pub(crate) fn render(v: &Dynamic, streamed: bool) -> String {
    let mut out = String::new();
    value(v, 0, streamed, &mut out);
    out
}

fn value(v: &Dynamic, indent: usize, streamed: bool, out: &mut String) {
    if let Some(m) = v.read_lock::<Map>() {
        if is_step_result(&m) {
            step_result(&m, indent, streamed, out);
        } else {
            map(&m, indent, streamed, out);
        }
    } else if let Some(a) = v.read_lock::<rhai::Array>() {
        array(&a, indent, streamed, out);
    } else {
        out.push_str(&scalar(v));
    }
}

fn scalar(v: &Dynamic) -> String {
    if v.is_string() {
        format!("{:?}", v.clone().into_string().unwrap_or_default())
    } else if v.is_unit() {
        "()".into()
    } else {
        v.to_string()
    }
}

/// One-line form, if the value has one that is short enough.
fn flat(v: &Dynamic) -> Option<String> {
    if let Some(m) = v.read_lock::<Map>() {
        if m.is_empty() {
            return Some("#{}".into());
        }
        if m.values().any(|x| x.is_map() || x.is_array()) {
            return None;
        }
        let s = format!(
            "#{{ {} }}",
            m.iter()
                .map(|(k, x)| format!("{k}: {}", scalar(x)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return (s.len() <= WIDE && !s.contains('\n')).then_some(s);
    }
    if let Some(a) = v.read_lock::<rhai::Array>() {
        let parts: Option<Vec<String>> = a.iter().map(flat).collect();
        let s = format!("[{}]", parts?.join(", "));
        return (s.len() <= WIDE && !s.contains('\n')).then_some(s);
    }
    let s = scalar(v);
    (!s.contains("\\n") || s.len() <= WIDE).then_some(s)
}

fn pad(indent: usize) -> String {
    "  ".repeat(indent)
}

fn map(m: &Map, indent: usize, streamed: bool, out: &mut String) {
    if m.is_empty() {
        out.push_str("#{}");
        return;
    }
    out.push_str("#{\n");
    for (k, v) in m {
        out.push_str(&pad(indent + 1));
        out.push_str(k);
        out.push_str(": ");
        match flat(v) {
            Some(s) => out.push_str(&s),
            None => value(v, indent + 1, streamed, out),
        }
        out.push_str(",\n");
    }
    out.push_str(&pad(indent));
    out.push('}');
}

fn array(a: &rhai::Array, indent: usize, streamed: bool, out: &mut String) {
    if let Some(s) = flat(&Dynamic::from_array(a.clone())) {
        out.push_str(&s);
        return;
    }
    out.push_str("[\n");
    for v in a {
        out.push_str(&pad(indent + 1));
        value(v, indent + 1, streamed, out);
        out.push_str(",\n");
    }
    out.push_str(&pad(indent));
    out.push(']');
}

/// The map `step()` returns.
fn is_step_result(m: &Map) -> bool {
    ["exit", "stdout", "stderr", "duration_ms", "attempts", "ok"]
        .iter()
        .all(|k| m.contains_key(*k))
}

fn step_result(m: &Map, indent: usize, streamed: bool, out: &mut String) {
    let get = |k: &str| m.get(k).cloned().unwrap_or(Dynamic::UNIT);
    let exit = get("exit");
    let exit = if exit.is_unit() {
        "no exit code".to_string()
    } else {
        format!("exit {exit}")
    };
    let attempts = get("attempts").as_int().unwrap_or(1);
    let timed_out = get("timed_out").as_bool().unwrap_or(false);
    out.push_str(&format!(
        "step {}: {exit}, {} ms{}{}",
        if get("ok").as_bool().unwrap_or(false) {
            "ok"
        } else {
            "failed"
        },
        get("duration_ms"),
        if attempts > 1 {
            format!(", {attempts} attempts")
        } else {
            String::new()
        },
        if timed_out { ", timed out" } else { "" },
    ));
    if streamed {
        return;
    }
    for stream in ["stdout", "stderr"] {
        let text = get(stream).into_string().unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            continue;
        }
        out.push('\n');
        out.push_str(&pad(indent + 1));
        out.push_str(stream);
        out.push(':');
        for l in lines.iter().take(OUTPUT_LINES) {
            out.push('\n');
            out.push_str(&pad(indent + 2));
            out.push_str(l);
        }
        if lines.len() > OUTPUT_LINES {
            out.push('\n');
            out.push_str(&pad(indent + 2));
            out.push_str(&format!("… {} more lines", lines.len() - OUTPUT_LINES));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_all(v: &Dynamic) -> String {
        render(v, false)
    }

    #[test]
    fn a_step_result_whose_output_was_streamed_shows_no_output() {
        let v = eval(
            r#"[#{ exit: 0, ok: true, stdout: "out\n", stderr: "err\n", duration_ms: 3, attempts: 1, timed_out: false }]"#,
        );
        assert_eq!(render(&v, true), "[\n  step ok: exit 0, 3 ms,\n]");
    }

    fn eval(src: &str) -> Dynamic {
        rhai::Engine::new().eval::<Dynamic>(src).unwrap()
    }

    #[test]
    fn maps_show_one_field_a_line() {
        let s = render_all(&eval(
            r#"#{ a: 1, b: "two", c: [1, 2], d: #{ e: () , f: [#{g: 1}] } }"#,
        ));
        assert_eq!(
            s,
            "#{\n  a: 1,\n  b: \"two\",\n  c: [1, 2],\n  d: #{\n    e: (),\n    f: [#{ g: 1 }],\n  },\n}"
        );
    }

    #[test]
    fn step_results_show_exit_duration_and_first_output_lines() {
        let s = render_all(&eval(
            r#"#{ exit: 3, ok: false, stdout: "1\n2\n3\n4\n5\n6\n7\n", stderr: "", duration_ms: 12, attempts: 2, timed_out: false }"#,
        ));
        assert_eq!(
            s,
            "step failed: exit 3, 12 ms, 2 attempts\n  stdout:\n    1\n    2\n    3\n    4\n    5\n    … 2 more lines"
        );
    }

    #[test]
    fn scalars_print_as_literals() {
        assert_eq!(render_all(&eval(r#""a\nb""#)), "\"a\\nb\"");
        assert_eq!(render_all(&eval("42")), "42");
        assert_eq!(render_all(&eval("true")), "true");
    }
}
