//! Static checks of a compiled script, before anything runs (`rfs check`,
//! and `rfs run` before it provisions anything): calls of functions that
//! do not exist (with a "did you mean"), calls with a number of arguments
//! no overload takes, and misspelt keys in literal option maps of rfs's
//! primitives. Every problem carries the script position it is about.
//!
//! What is known: rfs's primitives ([`super::primitives`]), the engine's
//! functions (standard library), Rhai's keyword functions, the script's own
//! functions and the functions of imported stdlib modules. Calls through
//! variables (function pointers), imports of local files and methods
//! whose name is a key of some literal map (object-style maps) are not
//! judged.

use std::collections::{BTreeMap, BTreeSet};

use rhai::{ASTNode, Engine, Expr, Position, AST};

use super::primitives::PRIMITIVES;
use super::problem::Problem;

/// Rhai's keyword functions (not in the engine's signature list).
const KEYWORD_FNS: &[&str] = &[
    "print",
    "debug",
    "type_of",
    "Fn",
    "call",
    "curry",
    "is_def_var",
    "is_def_fn",
    "is_shared",
    "eval",
];

/// Which functions exist, with the argument counts they accept (`None`:
/// any count, e.g. keyword functions).
pub(crate) struct Known {
    fns: BTreeMap<String, Option<BTreeSet<usize>>>,
    /// Functions of stdlib modules by import name.
    modules: BTreeMap<String, BTreeMap<String, BTreeSet<usize>>>,
}

impl Known {
    /// What `engine` (the base engine: standard library) and rfs provide.
    pub(crate) fn new(engine: &Engine) -> Known {
        let mut fns: BTreeMap<String, Option<BTreeSet<usize>>> = BTreeMap::new();
        let mut add = |name: &str, n: Option<usize>| {
            let e = fns
                .entry(name.to_owned())
                .or_insert_with(|| Some(BTreeSet::new()));
            match (e, n) {
                (Some(set), Some(n)) => {
                    set.insert(n);
                }
                (e, None) => *e = None,
                _ => {}
            }
        };
        for sig in engine.gen_fn_signatures(true) {
            if let Some((name, n)) = parse_signature(&sig) {
                add(name, Some(n));
            }
        }
        for p in PRIMITIVES {
            for n in p.arities {
                add(p.name, Some(*n));
            }
        }
        for k in KEYWORD_FNS {
            add(k, None);
        }
        let mut modules = BTreeMap::new();
        for (name, src) in super::resolver::STDLIB {
            if let Ok(ast) = engine.compile(src) {
                let mut m: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
                for f in ast.iter_functions() {
                    m.entry(f.name.to_owned())
                        .or_default()
                        .insert(f.params.len());
                }
                modules.insert(name.to_string(), m);
            }
        }
        Known { fns, modules }
    }
}

/// "name(a: T, b: U) -> R" → ("name", 2).
fn parse_signature(sig: &str) -> Option<(&str, usize)> {
    let (name, rest) = sig.split_once('(')?;
    let name = name.rsplit("::").next()?.trim();
    if !is_ident(name) {
        return None;
    }
    let params = rest.rsplit_once(')')?.0;
    let mut depth = 0;
    let mut n = if params.trim().is_empty() { 0 } else { 1 };
    for c in params.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => n += 1,
            _ => {}
        }
    }
    Some((name, n))
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Check `source` (which compiles). It is parsed again without
/// optimization: the optimizer folds literal maps into constants, and
/// their keys' positions are needed.
pub(crate) fn lint(known: &Known, source: &str) -> Vec<Problem> {
    let mut e = Engine::new_raw();
    super::allow_spawn(&mut e);
    e.set_optimization_level(rhai::OptimizationLevel::None);
    match e.compile(source) {
        Ok(ast) => check(known, &ast, source),
        Err(_) => vec![],
    }
}

/// Check `source` as the continuation of `prelude` (the REPL: what came
/// before defines functions, variables and imports), reporting only the
/// problems in `source`, at positions within it.
pub(crate) fn lint_after(known: &Known, prelude: &str, source: &str) -> Vec<Problem> {
    let prelude = prelude.trim_end();
    if prelude.is_empty() {
        return lint(known, source);
    }
    // `source` starts two lines below the prelude's last.
    let offset = prelude.lines().count() + 1;
    let whole = format!("{prelude}\n\n{source}");
    lint(known, &whole)
        .into_iter()
        .filter_map(|p| {
            let line = p.pos.line()?.checked_sub(offset).filter(|l| *l > 0)?;
            let line = u16::try_from(line).ok()?;
            let col = u16::try_from(p.pos.position().unwrap_or(0)).ok()?;
            Some(Problem {
                pos: Position::new(line, col),
                ..p
            })
        })
        .collect()
}

/// Check `ast` (compiled from `source` without optimization).
pub(crate) fn check(known: &Known, ast: &AST, source: &str) -> Vec<Problem> {
    let mut script_fns: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for f in ast.iter_functions() {
        script_fns
            .entry(f.name.to_owned())
            .or_default()
            .insert(f.params.len());
    }
    let names_in_scope = variable_names(source);
    let aliases = stdlib_aliases(source);
    let mut map_keys = BTreeSet::new();
    ast.walk(&mut |path: &[ASTNode]| {
        if let Some(ASTNode::Expr(Expr::Map(m, _))) = path.last() {
            for (k, _) in &m.0 {
                map_keys.insert(k.name.to_string());
            }
        }
        true
    });
    let mut problems = vec![];
    ast.walk(&mut |path: &[ASTNode]| {
        let (call, pos, method) = match path.last() {
            Some(ASTNode::Expr(Expr::FnCall(c, pos))) => (c, *pos, false),
            Some(ASTNode::Stmt(rhai::Stmt::FnCall(c, pos))) => (c, *pos, false),
            Some(ASTNode::Expr(Expr::MethodCall(c, pos))) => (c, *pos, true),
            _ => return true,
        };
        if call.op_token.is_some() || !is_ident(&call.name) {
            return true;
        }
        let name = call.name.as_str();
        let given = call.args.len() + usize::from(method);
        if !call.namespace.is_empty() {
            let root = call.namespace.root();
            if let Some(module) = aliases.get(root).and_then(|m| known.modules.get(m)) {
                let qualified = format!("{root}::{name}");
                match module.get(name) {
                    None => problems.push(unknown(
                        pos,
                        &qualified,
                        module.keys().map(|k| format!("{root}::{k}")),
                    )),
                    Some(ar) if !ar.contains(&call.args.len()) => {
                        problems.push(arity(pos, &qualified, ar, call.args.len()))
                    }
                    _ => {}
                }
            }
            return true;
        }
        let script = script_fns.get(name);
        let global = known.fns.get(name);
        match (script, global) {
            (None, None) => {
                let skip = names_in_scope.contains(name) || (method && map_keys.contains(name));
                if !skip {
                    let candidates = known.fns.keys().cloned().chain(script_fns.keys().cloned());
                    problems.push(unknown(pos, name, candidates));
                }
            }
            (_, Some(None)) => {}
            (s, g) => {
                let mut ok: BTreeSet<usize> = g.cloned().flatten().unwrap_or_default();
                if let Some(s) = s {
                    ok.extend(s.iter().copied());
                    if method {
                        // A script function called as a method: `this` is the receiver.
                        ok.extend(s.iter().map(|n| n + 1));
                    }
                }
                if !ok.contains(&given) {
                    problems.push(arity(pos, name, &ok, given));
                }
            }
        }
        option_problems(call, name, method, &mut problems);
        true
    });
    problems.sort_by_key(|p| (p.pos.line(), p.pos.position()));
    problems
}

/// The problems of the options map `call` (of primitive `name`) gives
/// literally: unknown options, and `sandbox()`'s limits and network.
fn option_problems(call: &rhai::FnCallExpr, name: &str, method: bool, problems: &mut Vec<Problem>) {
    for (f, idx, keys) in PRIMITIVES
        .iter()
        .filter_map(|p| p.options.map(|(i, k)| (p.name, i, k)))
    {
        if f != name {
            continue;
        }
        let arg = if method {
            idx.checked_sub(1)
        } else {
            Some(idx)
        };
        if let Some(Expr::Map(m, _)) = arg.and_then(|i| call.args.get(i)) {
            if name == "sandbox" {
                problems.extend(super::bindings::limit_literals(&m.0));
                problems.extend(super::network_option::network_literals(&m.0));
            }
            for (k, _) in &m.0 {
                if !keys.contains(&k.name.as_str()) {
                    problems.push(Problem {
                        pos: k.pos,
                        message: format!("{name}(): unknown option `{}`", k.name),
                        help: Some(match suggest(&k.name, keys.iter().map(|s| s.to_string())) {
                            Some(s) => {
                                format!("did you mean `{s}`? (options: {})", keys.join(", "))
                            }
                            None => format!("options: {}", keys.join(", ")),
                        }),
                    });
                }
            }
        }
    }
}

fn unknown(pos: Position, name: &str, candidates: impl Iterator<Item = String>) -> Problem {
    Problem {
        pos,
        message: format!("unknown function `{name}`"),
        help: suggest(name, candidates).map(|s| format!("did you mean `{s}`?")),
    }
}

fn arity(pos: Position, name: &str, ok: &BTreeSet<usize>, given: usize) -> Problem {
    let takes = ok
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(" or ");
    Problem {
        pos,
        message: format!(
            "`{name}` takes {takes} argument{}, not {given}",
            if ok.len() == 1 && ok.contains(&1) {
                ""
            } else {
                "s"
            }
        ),
        help: None,
    }
}

/// The closest candidate, if it is close enough to be a typo.
fn suggest(name: &str, candidates: impl Iterator<Item = String>) -> Option<String> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (levenshtein(name, &c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Edit distance counting a swap of neighbours as one edit (optimal
/// string alignment), so `stpe` is one typo away from `step`.
fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// Names bound by `let`, `const`, function and closure parameters (a call
/// of such a name may be a function-pointer call).
fn variable_names(source: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(
        r"(?:\blet|\bconst)\s+([A-Za-z_]\w*)|\bfn\s+\w+\s*\(([^)]*)\)|\|([^|]*)\|",
    )
    .expect("valid regex");
    let mut out = BTreeSet::new();
    for c in re.captures_iter(source) {
        if let Some(n) = c.get(1) {
            out.insert(n.as_str().to_owned());
        }
        for g in [c.get(2), c.get(3)].into_iter().flatten() {
            for p in g.as_str().split(',') {
                let p = p.trim();
                if is_ident(p) {
                    out.insert(p.to_owned());
                }
            }
        }
    }
    out
}

/// `import "rfs/x" as alias` → alias → "rfs/x".
fn stdlib_aliases(source: &str) -> BTreeMap<String, String> {
    let re = regex::Regex::new(r#"\bimport\s+"(rfs/[^"]+)"\s+as\s+([A-Za-z_]\w*)"#)
        .expect("valid regex");
    re.captures_iter(source)
        .map(|c| (c[2].to_owned(), c[1].to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(src: &str) -> Vec<Problem> {
        let engine = crate::script::base_engine(std::path::Path::new(".")).unwrap();
        engine.compile(src).unwrap();
        super::lint(&Known::new(&engine), src)
    }

    #[test]
    fn lint_after_knows_the_prelude_and_reports_positions_in_the_input() {
        let engine = crate::script::base_engine(std::path::Path::new(".")).unwrap();
        let known = Known::new(&engine);
        let prelude = "fn twice(x) { x * 2 }\nlet f = Fn(\"twice\");\nimport \"rfs/poll\" as p;\n";
        assert_eq!(lint_after(&known, prelude, "twice(4)"), vec![]);
        assert_eq!(lint_after(&known, prelude, "f.call(1)"), vec![]);
        let p = lint_after(&known, prelude, "1;\n  twice(1, 2)");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!((p[0].pos.line(), p[0].pos.position()), (Some(2), Some(3)));
        let p = lint_after(&known, prelude, "p::nope()");
        assert_eq!(p[0].message, "unknown function `p::nope`");
        // Nothing before: as `rfs check`.
        let p = lint_after(&known, "", "twice(4)");
        assert_eq!(p[0].message, "unknown function `twice`");
    }

    #[test]
    fn a_swapped_pair_of_letters_is_one_typo() {
        assert_eq!(levenshtein("stpe", "step"), 1);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(
            suggest("stpe", ["step".to_string()].into_iter()).as_deref(),
            Some("step")
        );
    }

    #[test]
    fn unknown_functions_get_a_did_you_mean() {
        let p = problems("let r = stepp(\"a\", \"b\");\nsync_sorce();");
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].message, "unknown function `stepp`");
        assert_eq!(p[0].help.as_deref(), Some("did you mean `step`?"));
        assert_eq!((p[0].pos.line(), p[0].pos.position()), (Some(1), Some(9)));
        assert_eq!(p[1].help.as_deref(), Some("did you mean `sync_source`?"));
        assert_eq!(p[1].pos.line(), Some(2));
    }

    #[test]
    fn misspelt_option_keys_in_literal_maps_are_reported_at_the_key() {
        let p =
            problems("step(\"a\", \"b\", #{ timout: 5, cwd: \".\" });\nsandbox(#{ imag: \"x\" });");
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].message, "step(): unknown option `timout`");
        assert!(p[0]
            .help
            .as_deref()
            .unwrap()
            .starts_with("did you mean `timeout`?"));
        assert_eq!((p[0].pos.line(), p[0].pos.position()), (Some(1), Some(19)));
        assert_eq!(p[1].message, "sandbox(): unknown option `imag`");
    }

    #[test]
    fn wrong_arity_is_reported() {
        let p = problems("step(\"only-name\");\nfn f(a, b) { a + b }\nf(1);\n\"x\".trimmed(1);");
        let msgs: Vec<_> = p.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "`step` takes 2 or 3 arguments, not 1",
                "`f` takes 2 arguments, not 1",
                "`trimmed` takes 1 argument, not 2"
            ]
        );
    }

    #[test]
    fn valid_scripts_have_no_problems() {
        let src = r#"
            import "rfs/assert" as check;
            fn twice(x) { x * 2 }
            fn inc() { this += 1; }
            let n = 1; n.inc();
            let f = |x| x + 1; let g = Fn("twice");
            let r = step("a", "b", #{ cwd: ".", env: #{ A: 1 }, retries: 2 });
            check::eq(twice(2), 4);
            print(r.stdout.trimmed().len());
            let obj = #{ hello: |x| x }; obj.hello(1);
            let t = attach("sh", #{ cols: 80 }); t.assert_screen(#{ text: "$", timeout: 5 });
            debug(type_of(g.call(1)));
        "#;
        assert_eq!(problems(src), vec![]);
    }

    #[test]
    fn stdlib_module_functions_are_checked() {
        let p = problems("import \"rfs/assert\" as check;\ncheck::equal(1, 1);\ncheck::eq(1);");
        assert_eq!(p[0].message, "unknown function `check::equal`");
        assert_eq!(p[0].help.as_deref(), Some("did you mean `check::eq`?"));
        assert_eq!(p[1].message, "`check::eq` takes 2 arguments, not 1");
    }

    /// assert_screen's pattern map is a `PatternSpec` (read by serde, not
    /// by the option reader): its fields are the declared keys.
    #[test]
    fn assert_screen_keys_are_the_pattern_spec_fields() {
        let spec = include_str!("../../crates/evidence/src/terminal/pattern.rs");
        let s = &spec[spec.find("pub struct PatternSpec").unwrap()..];
        let s = &s[..s.find("\n}").unwrap()];
        let mut fields: Vec<&str> = regex::Regex::new(r"pub (\w+):")
            .unwrap()
            .captures_iter(s)
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        fields.sort();
        let mut table = super::super::primitives::option_keys("assert_screen").to_vec();
        table.sort();
        assert_eq!(fields, table);
    }
}
