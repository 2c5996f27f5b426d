//! WebSocket connections to the toolbox (PTY connect, log follow): the
//! toolbox URL with `http`→`ws`, the same credential and version headers
//! as every other toolbox call, rustls, a bounded connect.

use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::http::{REQUEST_TIMEOUT, SDK_VERSION};
use super::Api;
use crate::provider::{ProviderError, ProviderResult};

/// An open toolbox WebSocket.
pub(super) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl Api {
    /// Connect to the toolbox URL `url` for `op` in sandbox `id`; the
    /// error names the operation and the sandbox, and nothing secret (the
    /// credential is redacted).
    pub async fn ws_connect(&self, op: &str, id: &str, url: &str) -> ProviderResult<Ws> {
        let fail =
            |why: &str| ProviderError::Api(format!("daytona: {op} (sandbox {id}) failed: {why}"));
        let ws_url = url
            .replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1);
        let mut request = ws_url
            .as_str()
            .into_client_request()
            .map_err(|e| fail(&format!("the URL {ws_url} is invalid: {e}")))?;
        let mut auth = HeaderValue::from_str(&self.http.config().bearer())
            .map_err(|_| fail("the Daytona credential is not a valid header"))?;
        auth.set_sensitive(true);
        let headers = request.headers_mut();
        headers.insert("Authorization", auth);
        headers.insert(
            "X-Daytona-SDK-Version",
            HeaderValue::from_static(SDK_VERSION),
        );
        if let Some(org) = self.http.config().organization() {
            if let Ok(v) = HeaderValue::from_str(org) {
                headers.insert("X-Daytona-Organization-ID", v);
            }
        }
        let connect = tokio_tungstenite::connect_async(request);
        match tokio::time::timeout(REQUEST_TIMEOUT, connect).await {
            Ok(Ok((ws, _))) => Ok(ws),
            Ok(Err(e)) => Err(fail(&self.http.config().redact(&e.to_string()))),
            Err(_) => Err(fail("no answer in time")),
        }
    }
}
