//! One Connect unary call over HTTP: the request message encoded in
//! protobuf's binary form (`Content-Type: application/proto`), the answer
//! decoded the same way, and the Connect error an unsuccessful call answers
//! with (a JSON body whose details carry the binary `google.rpc.ErrorInfo`)
//! turned into an [`Error`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde::Deserialize;

use crate::error::{Error, ErrorDetail, Result, TransportError};
use crate::pb::google_rpc::ErrorInfo;
use crate::pb::sepp_v1::Reason;

/// The HTTP side of a client: its connection pool, the server's address and
/// the bearer token. Shared by the client and its batcher's send function.
pub(crate) struct Transport {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) auth: Option<HeaderValue>,
    /// Bounds each call unless the call says otherwise.
    pub(crate) timeout: Duration,
}

impl Transport {
    /// Calls `method` (`"sepp.v1.JobService/Enqueue"`) with the client's
    /// timeout.
    pub(crate) async fn unary<Req: Message, Resp: Message + Default>(&self, method: &str, req: &Req) -> Result<Resp> {
        self.unary_timeout(method, req, self.timeout).await
    }

    /// Calls `method` bounded by `timeout`: for calls that wait on the
    /// server (a reserve or an effect claim with a wait).
    pub(crate) async fn unary_timeout<Req: Message, Resp: Message + Default>(
        &self,
        method: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp> {
        let body = self.post(method, Bytes::from(req.encode_to_vec()), timeout).await?;
        Resp::decode(body).map_err(|e| {
            Error::new(
                Reason::Internal,
                "internal",
                format!("the answer of {} to {method} is not the protobuf message this client expects: {e}", self.base),
            )
        })
    }

    /// POSTs one Connect unary call and returns the response body, or the
    /// error the server (or the transport) gave.
    async fn post(&self, method: &str, body: Bytes, timeout: Duration) -> Result<Bytes> {
        let mut rb = self
            .http
            .post(format!("{}/{}", self.base, method))
            .header(CONTENT_TYPE, "application/proto")
            .header("Connect-Protocol-Version", "1")
            .header("Connect-Timeout-Ms", ms(timeout).max(1).to_string())
            // The server's deadline answer should arrive before ours cuts in.
            .timeout(timeout + Duration::from_secs(2))
            .body(body);
        if let Some(a) = &self.auth {
            rb = rb.header(AUTHORIZATION, a.clone());
        }
        let resp = rb.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(e))?;
        if status.is_success() {
            Ok(bytes)
        } else {
            Err(self.connect_error(status, &bytes))
        }
    }

    fn transport_error(&self, e: reqwest::Error) -> Error {
        let mut cause = String::new();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            let m = s.to_string();
            if !cause.contains(&m) {
                if !cause.is_empty() {
                    cause.push_str(": ");
                }
                cause.push_str(&m);
            }
            src = s.source();
        }
        if cause.is_empty() {
            cause = e.to_string();
        }
        let message = if e.is_timeout() {
            format!(
                "no answer from the server at {} in time (timeout {:?}); its outcome is unknown: resend with the same idempotency key",
                self.base, self.timeout
            )
        } else if e.is_connect() {
            format!("cannot reach the server at {}: {cause}; is `sepp serve` running there?", self.base)
        } else {
            format!("the call to {} got no answer: {cause}; its outcome is unknown: resend with the same idempotency key", self.base)
        };
        Error::Transport(TransportError::new(message, e.is_timeout(), Some(Arc::new(e))))
    }

    /// Decodes a Connect error body; falls back on the HTTP status for bodies
    /// that are not one (a proxy's error page).
    fn connect_error(&self, status: reqwest::StatusCode, body: &[u8]) -> Error {
        let parsed: Option<ConnectError> = serde_json::from_slice(body).ok().filter(|w: &ConnectError| !w.code.is_empty());
        let w = match parsed {
            Some(w) => w,
            None => {
                let code = match status.as_u16() {
                    400 => "internal",
                    401 => "unauthenticated",
                    403 => "permission_denied",
                    404 => "unimplemented",
                    408 => "deadline_exceeded",
                    429 | 502 | 503 | 504 => "unavailable",
                    _ => "unknown",
                };
                let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
                let mut message = format!("HTTP {status} from {}", self.base);
                if !text.trim().is_empty() {
                    message.push_str(": ");
                    message.push_str(text.trim());
                }
                ConnectError { code: code.into(), message, details: Vec::new() }
            }
        };
        let info = w.details.iter().filter(|d| d.type_ == "google.rpc.ErrorInfo").find_map(|d| decode_error_info(&d.value));
        let (reason, metadata) = match info {
            Some(info) => (info.reason, info.metadata),
            None => (String::new(), Default::default()),
        };
        let reason = if !reason.is_empty() {
            reason
        } else {
            match w.code.as_str() {
                "unavailable" | "deadline_exceeded" => Reason::Unavailable,
                "unauthenticated" => Reason::Unauthenticated,
                "permission_denied" => Reason::PermissionDenied,
                "internal" | "unknown" | "data_loss" => Reason::Internal,
                // No Sepp reason (an RPC-layer error such as a message the
                // server cannot decode): the code, as a reason, in Other.
                code => {
                    return Error::from_detail(ErrorDetail {
                        reason: code.to_ascii_uppercase(),
                        code: w.code.clone(),
                        message: w.message,
                        index: None,
                        metadata,
                    })
                }
            }
            .as_str_name()
            .to_string()
        };
        let index = metadata.get("index").and_then(|i| i.parse().ok());
        Error::from_detail(ErrorDetail { reason, code: w.code, message: w.message, index, metadata })
    }
}

/// The Connect protocol's error body (JSON, whatever the message codec).
#[derive(Deserialize, Default)]
#[serde(default)]
struct ConnectError {
    code: String,
    message: String,
    details: Vec<ConnectErrorDetail>,
}

/// One detail of a Connect error: a protobuf message's type name and its
/// binary encoding in base64.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ConnectErrorDetail {
    #[serde(rename = "type")]
    type_: String,
    value: String,
}

/// Decodes a detail's base64 value (unpadded, as Connect writes it; padded
/// or URL-safe, as other writers may) as a `google.rpc.ErrorInfo`.
fn decode_error_info(value: &str) -> Option<ErrorInfo> {
    let t = value.trim_end_matches('=');
    let raw = base64::decode_config(t, base64::STANDARD_NO_PAD).or_else(|_| base64::decode_config(t, base64::URL_SAFE_NO_PAD)).ok()?;
    ErrorInfo::decode(raw.as_slice()).ok()
}

pub(crate) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> Transport {
        Transport { http: reqwest::Client::new(), base: "http://sepp.test".into(), auth: None, timeout: Duration::from_secs(1) }
    }

    #[test]
    fn decodes_error_info_with_metadata() {
        // From docs/errors.md: IDEMPOTENCY_KEY_EMPTY, domain sepp.dev, index=1.
        let info = decode_error_info("ChVJREVNUE9URU5DWV9LRVlfRU1QVFkSCHNlcHAuZGV2GgoKBWluZGV4EgEx").unwrap();
        assert_eq!((info.reason.as_str(), info.domain.as_str()), ("IDEMPOTENCY_KEY_EMPTY", "sepp.dev"));
        assert_eq!(info.metadata.get("index").map(String::as_str), Some("1"));
    }

    #[test]
    fn connect_error_bodies() {
        let body = br#"{"code":"invalid_argument","message":"jobs[1]: idempotency key is empty","details":[{"type":"google.rpc.ErrorInfo","value":"ChVJREVNUE9URU5DWV9LRVlfRU1QVFkSCHNlcHAuZGV2GgoKBWluZGV4EgEx"}]}"#;
        let e = transport().connect_error(reqwest::StatusCode::BAD_REQUEST, body);
        assert!(matches!(e, Error::IdempotencyKeyEmpty(_)), "{e:?}");
        assert_eq!((e.code(), e.index()), ("invalid_argument", Some(1)));

        // No ErrorInfo: the code decides, or names an Other.
        let e = transport().connect_error(reqwest::StatusCode::SERVICE_UNAVAILABLE, br#"{"code":"unavailable","message":"shutting down"}"#);
        assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
        let e = transport().connect_error(reqwest::StatusCode::NOT_FOUND, br#"{"code":"unimplemented","message":"no such method"}"#);
        assert!(matches!(&e, Error::Other(d) if d.reason == "UNIMPLEMENTED"), "{e:?}");

        // Not a Connect error at all: a proxy's page, by its status.
        let e = transport().connect_error(reqwest::StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
        assert!(e.message().starts_with("HTTP 502 Bad Gateway from http://sepp.test: <html>"), "{e}");
    }
}
