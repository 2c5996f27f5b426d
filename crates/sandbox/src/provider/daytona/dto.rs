//! The parts of Daytona's sandbox objects and list pages rfs reads.

use serde::Deserialize;

use crate::provider::Labels;

/// The parts of Daytona's `Sandbox` / `SandboxListItem` rfs reads; every
/// other field is ignored and unknown states are kept as text.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SandboxDto {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub labels: Option<Labels>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub desired_state: Option<String>,
    #[serde(default)]
    pub error_reason: Option<String>,
    #[serde(default)]
    pub toolbox_proxy_url: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub network_block_all: Option<bool>,
    #[serde(default)]
    pub network_allow_list: Option<String>,
    /// Names the sandbox may reach (since v0.190.0). `SandboxListItem`
    /// carries none of the three network fields: read them from a `GET`.
    #[serde(default)]
    pub domain_allow_list: Option<String>,
    /// `container` (Daytona's default snapshots), `linux-vm`, `windows`,
    /// `android`: its snapshot's. Only `linux-vm` and `windows` fork.
    #[serde(default)]
    pub sandbox_class: Option<String>,
    /// Cpus reserved for it (a JSON number; kept as sent, so an
    /// unexpected value never breaks reading the sandbox).
    #[serde(default)]
    pub cpu: Option<serde_json::Value>,
    /// GiB of memory reserved for it.
    #[serde(default)]
    pub memory: Option<serde_json::Value>,
    /// GiB of disk.
    #[serde(default)]
    pub disk: Option<serde_json::Value>,
}

impl SandboxDto {
    pub fn state(&self) -> &str {
        self.state.as_deref().unwrap_or("unknown")
    }
    pub fn labels(&self) -> Labels {
        self.labels.clone().unwrap_or_default()
    }
    /// Whether Daytona forks it (`sandbox.service.ts` :1093-1094: only
    /// `linux-vm` and `windows`; an absent class is the default,
    /// `container`).
    pub fn forks(&self) -> bool {
        matches!(self.sandbox_class.as_deref(), Some("linux-vm" | "windows"))
    }
}

/// One page of `GET /sandbox`: `{items, nextCursor}` (v0.180+, also with
/// `total/page/totalPages`), or a bare array (older servers).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ListPage {
    Paged {
        items: Vec<SandboxDto>,
        #[serde(default, rename = "nextCursor")]
        next_cursor: Option<String>,
        #[serde(default)]
        page: Option<u64>,
        #[serde(default, rename = "totalPages")]
        total_pages: Option<u64>,
    },
    Bare(Vec<SandboxDto>),
}

/// Where the next page is, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Cursor(String),
    Page(u64),
    Done,
}

impl ListPage {
    /// The page's items and where to go next.
    pub fn split(self) -> (Vec<SandboxDto>, Next) {
        match self {
            ListPage::Bare(items) => (items, Next::Done),
            ListPage::Paged {
                items,
                next_cursor,
                page,
                total_pages,
            } => {
                let next = match (next_cursor.filter(|c| !c.is_empty()), page, total_pages) {
                    _ if items.is_empty() => Next::Done,
                    (Some(c), _, _) => Next::Cursor(c),
                    (None, Some(p), Some(t)) if p < t => Next::Page(p + 1),
                    _ => Next::Done,
                };
                (items, next)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> (Vec<String>, Next) {
        let p: ListPage = serde_json::from_str(s).unwrap();
        let (items, next) = p.split();
        (items.into_iter().map(|i| i.id).collect(), next)
    }

    #[test]
    fn both_list_shapes_parse_with_paging() {
        assert_eq!(
            parse(
                r#"{"items":[{"id":"a","state":"started","labels":{"k":"v"}}],"nextCursor":"c2"}"#
            ),
            (vec!["a".into()], Next::Cursor("c2".into()))
        );
        assert_eq!(
            parse(r#"{"items":[{"id":"a"}],"nextCursor":null}"#),
            (vec!["a".into()], Next::Done)
        );
        assert_eq!(
            parse(r#"{"items":[{"id":"a"}],"total":3,"page":1,"totalPages":3}"#),
            (vec!["a".into()], Next::Page(2))
        );
        assert_eq!(
            parse(r#"{"items":[{"id":"a"}],"total":3,"page":3,"totalPages":3}"#),
            (vec!["a".into()], Next::Done)
        );
        assert_eq!(
            parse(r#"{"items":[],"nextCursor":"loop"}"#),
            (vec![], Next::Done)
        );
        assert_eq!(
            parse(r#"[{"id":"a","labels":null,"state":"some_future_state"},{"id":"b"}]"#),
            (vec!["a".into(), "b".into()], Next::Done)
        );
    }
}
