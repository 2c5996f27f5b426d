//! The one declaration of rfs's script primitives: name, the argument
//! counts it takes, its option map (which argument, which keys), the keys
//! of the map it returns, and a line of docs. The option reader
//! ([`super::options::Opts`]) accepts exactly the declared keys, `rfs
//! check` judges calls and literal option maps by it, the REPL completes
//! from it, and a test holds the book to it. Adding a primitive is one row
//! here and its binding.

/// One script primitive.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Primitive {
    pub name: &'static str,
    /// The argument counts it takes (method-call form counts the
    /// receiver).
    pub arities: &'static [usize],
    /// Which argument is its option map, and the keys that map takes.
    pub options: Option<(usize, &'static [&'static str])>,
    /// Keys of the map it returns (completion after `name(…).`).
    pub returns: &'static [&'static str],
    pub summary: &'static str,
}

const fn plain(name: &'static str, arities: &'static [usize], summary: &'static str) -> Primitive {
    Primitive {
        name,
        arities,
        options: None,
        returns: &[],
        summary,
    }
}

/// Every primitive, as the script sees it.
pub(crate) const PRIMITIVES: &[Primitive] = &[
    Primitive {
        name: "sandbox",
        arities: &[0, 1],
        options: Some((
            0,
            &[
                "image",
                "snapshot",
                "labels",
                "isolation",
                "network",
                "pids",
                "memory",
                "cpus",
                "disk",
                "caches",
                "mount_ro",
            ],
        )),
        returns: &[],
        summary: "the run's one shared sandbox (provisioned on first use)",
    },
    Primitive {
        name: "sync_source",
        arities: &[0, 1],
        options: Some((
            0,
            &["repo", "rev", "path", "allow_dirty", "submodules", "dest"],
        )),
        returns: &[
            "commit",
            "tree_digest",
            "archive_sha256",
            "files",
            "workdir",
        ],
        summary: "ship one commit's tree into the sandbox, verified, and pin it",
    },
    Primitive {
        name: "step",
        arities: &[2, 3],
        options: Some((2, &["cwd", "env", "timeout", "retries", "allow_failure"])),
        returns: &[
            "exit",
            "stdout",
            "stderr",
            "duration_ms",
            "attempts",
            "timed_out",
            "ok",
        ],
        summary: "run a command in the sandbox, in the synced root",
    },
    Primitive {
        name: "attach",
        arities: &[1, 2],
        options: Some((1, &["cols", "rows", "env", "cwd", "term"])),
        returns: &[],
        summary: "open a terminal session in the sandbox",
    },
    Primitive {
        name: "assert_screen",
        arities: &[2],
        options: Some((
            1,
            &[
                "text",
                "regex",
                "row",
                "region",
                "cursor",
                "absent",
                "stable_ms",
                "timeout",
            ],
        )),
        returns: &[],
        summary: "wait until a terminal's screen shows a pattern",
    },
    Primitive {
        name: "collect",
        arities: &[1, 2],
        options: Some((1, &["max_bytes", "junit", "optional"])),
        returns: &["files", "bytes", "path", "absent"],
        summary: "copy a file or folder of the synced root into the bundle's artifacts/",
    },
    Primitive {
        name: "put",
        arities: &[2],
        options: None,
        returns: &["sha256", "bytes", "path"],
        summary: "ship a file of the working tree into the synced root, kept in the bundle",
    },
    plain(
        "checkpoint",
        &[1],
        "keep the sandbox's state after the steps so far (a suite's proofs start from it)",
    ),
    Primitive {
        name: "spawn",
        arities: &[2, 3],
        options: Some((2, &["cwd", "env"])),
        returns: &[],
        summary: "start a background process in the sandbox, with a handle",
    },
    Primitive {
        name: "wait_for",
        arities: &[2],
        options: Some((1, &["port", "line", "timeout"])),
        returns: &[],
        summary: "wait until a background process prints a line or listens on a port",
    },
    Primitive {
        name: "service",
        arities: &[2],
        options: Some((1, &["image", "env", "ready", "cmd"])),
        returns: &[],
        summary: "start a service container sharing the sandbox's network (docker), with a handle",
    },
    plain(
        "alive",
        &[1],
        "whether a background process or service still runs",
    ),
    plain(
        "logs",
        &[1],
        "a background process's or service's output so far",
    ),
    plain(
        "stop",
        &[1],
        "end a background process's group or remove a service, verified",
    ),
    plain("assert", &[1, 2], "fail the run unless a condition holds"),
    plain("fail", &[1], "fail the run with a message"),
    plain("arg", &[1, 2], "a `--var` value (or a default)"),
    plain("trimmed", &[1], "a string without surrounding white space"),
    plain("send", &[2], "type text into a terminal"),
    plain("press", &[2], "press a named key in a terminal"),
    plain("resize", &[3], "resize a terminal"),
    plain("screen", &[1], "a terminal's screen as text"),
    plain("line", &[2], "one row of a terminal's screen"),
    plain("cursor", &[1], "a terminal's cursor position"),
    plain("wait_exit", &[2], "wait for a terminal's program to end"),
    plain("close", &[1], "end a terminal session"),
    plain(
        "to_string",
        &[1],
        "a sandbox, terminal, process or service handle as text",
    ),
];

/// The primitive called `name`.
pub(crate) fn find(name: &str) -> Option<&'static Primitive> {
    PRIMITIVES.iter().find(|p| p.name == name)
}

/// The option keys of primitive `name` (none when it takes no map).
pub(crate) fn option_keys(name: &str) -> &'static [&'static str] {
    find(name).and_then(|p| p.options).map_or(&[], |o| o.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book documents every primitive and every option it takes.
    #[test]
    fn the_book_documents_every_primitive_and_option() {
        let book = [
            include_str!("../../book/src/primitives.md"),
            include_str!("../../book/src/terminal.md"),
        ]
        .concat();
        for p in PRIMITIVES {
            assert!(
                book.contains(&format!("{}(", p.name)),
                "the book never shows `{}(`",
                p.name
            );
            for key in p.options.map_or(&[][..], |o| o.1) {
                assert!(
                    book.contains(&format!("`{key}`")) || book.contains(&format!("{key}:")),
                    "the book never names {}()'s option `{key}`",
                    p.name
                );
            }
        }
    }

    #[test]
    fn names_are_unique_and_option_maps_are_an_argument() {
        for (i, p) in PRIMITIVES.iter().enumerate() {
            assert!(
                PRIMITIVES[..i].iter().all(|q| q.name != p.name),
                "{}",
                p.name
            );
            if let Some((idx, keys)) = p.options {
                assert!(p.arities.iter().any(|&n| n > idx), "{}", p.name);
                assert!(!keys.is_empty());
            }
        }
    }
}
