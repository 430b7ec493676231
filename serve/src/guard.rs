//! Who may ask. Loopback is not a wall: any web page the user visits can send requests
//! to 127.0.0.1. Two checks, before any routing, keep other sites out:
//!
//! * **Host allow-list** (DNS rebinding). A page on `attacker.example` whose name is
//!   re-pointed at 127.0.0.1 becomes same-origin with this server, but its requests
//!   still say `Host: attacker.example`. Only the server's own names are answered —
//!   `127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`, the address it is bound to, and
//!   whatever `--allow-host` adds (for a deliberate reverse proxy) — the fix Jupyter,
//!   webpack-dev-server and Vite adopted for the same advisory.
//! * **Origin check** (cross-site writes). A POST, PUT, PATCH or DELETE that carries an
//!   `Origin` must come from one of those names; a request without one (curl, a
//!   script) is not a browser's cross-site request and passes.
//!
//! Both refusals are 403 with a one-line explanation. Invariant: an allowed name is
//! stored lowercase, as `host:port` or, from `--allow-host` without a port, `host`
//! (which then matches any port).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The names this server answers to.
#[derive(Clone, Debug)]
pub struct Allowed {
    hosts: Vec<String>,
}

impl Allowed {
    /// The loopback names at `bound`'s port, `bound` itself when it is not a wildcard,
    /// and `extra` (`--allow-host`).
    pub fn for_address(bound: SocketAddr, extra: &[String]) -> Allowed {
        let port = bound.port();
        let mut hosts = vec![format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")];
        if !bound.ip().is_unspecified() {
            let own = match bound {
                SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
                SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
            };
            if !hosts.contains(&own) {
                hosts.push(own);
            }
        }
        hosts.extend(extra.iter().map(|name| name.trim().to_ascii_lowercase()).filter(|n| !n.is_empty()));
        debug_assert!(hosts.iter().all(|h| *h == h.to_ascii_lowercase()));
        Allowed { hosts }
    }

    /// Whether a `Host` header value names this server.
    pub fn host(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let without_port = strip_port(&host);
        self.hosts.iter().any(|allowed| if has_port(allowed) { *allowed == host } else { allowed == without_port })
    }

    /// Whether an `Origin` header value is one of this server's own pages.
    pub fn origin(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        match origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) {
            Some(host) => !host.contains('/') && self.host(host),
            None => false, // "null" (a file:// page, a sandboxed frame) and anything else
        }
    }

    /// The names, for messages.
    pub fn names(&self) -> String {
        self.hosts.join(", ")
    }
}

/// `name:port` → `name`; `[::1]:port` → `[::1]`; a name without a port is itself.
fn strip_port(host: &str) -> &str {
    if let Some(end) = host.strip_prefix('[').and_then(|rest| rest.find(']')) {
        return &host[..end + 2];
    }
    host.rsplit_once(':')
        .map_or(host, |(name, port)| if port.bytes().all(|b| b.is_ascii_digit()) { name } else { host })
}

fn has_port(host: &str) -> bool {
    strip_port(host).len() != host.len()
}

/// The longest path and query answered: no page or API needs more.
const MAX_PATH_BYTES: usize = 2048;
const MAX_QUERY_BYTES: usize = 4096;

/// The middleware: refuses a foreign `Host`, a foreign `Origin` on a state change, and
/// an overlong path or query.
pub async fn check(State(allowed): State<Arc<Allowed>>, request: Request, next: Next) -> Response {
    let uri = request.uri();
    if uri.path().len() > MAX_PATH_BYTES || uri.query().is_some_and(|q| q.len() > MAX_QUERY_BYTES) {
        return (
            StatusCode::URI_TOO_LONG,
            format!("paths are at most {MAX_PATH_BYTES} bytes and queries {MAX_QUERY_BYTES}\n"),
        )
            .into_response();
    }
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !allowed.host(host) {
        let shown = if host.is_empty() { "no host".to_string() } else { format!("host {host:?}") };
        return refuse(format!(
            "stampede serve answers only its own names ({}); this request was for {shown}. Behind a reverse \
             proxy, start it with --allow-host NAME.",
            allowed.names()
        ));
    }
    let changes_state = matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
    if changes_state {
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !allowed.origin(origin) {
                return refuse(format!(
                    "stampede serve takes changes only from its own pages ({}); this request came from {origin:?}.",
                    allowed.names()
                ));
            }
        }
    }
    next.run(request).await
}

fn refuse(message: String) -> Response {
    (StatusCode::FORBIDDEN, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message + "\n").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(bound: &str, extra: &[&str]) -> Allowed {
        Allowed::for_address(bound.parse().unwrap(), &extra.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn only_the_servers_own_names_are_hosts() {
        let a = allowed("127.0.0.1:8350", &[]);
        for ok in ["127.0.0.1:8350", "localhost:8350", "LOCALHOST:8350", "[::1]:8350"] {
            assert!(a.host(ok), "{ok}");
        }
        for refused in
            ["evil.example.com", "evil.example.com:8350", "localhost", "127.0.0.1:8351", "", "localhost.:8350"]
        {
            assert!(!a.host(refused), "{refused}");
        }
        // Bound to a LAN address: that address too; a proxy's name at any port, or one port.
        let lan = allowed("192.168.1.5:9000", &["stampede.internal", "proxy.example:443"]);
        assert!(lan.host("192.168.1.5:9000") && lan.host("stampede.internal") && lan.host("stampede.internal:80"));
        assert!(lan.host("proxy.example:443") && !lan.host("proxy.example:80") && !lan.host("proxy.example"));
        assert!(!allowed("0.0.0.0:9000", &[]).host("0.0.0.0:9000"), "a wildcard is not a name");
    }

    #[test]
    fn origins_are_the_servers_own_pages() {
        let a = allowed("127.0.0.1:8350", &[]);
        assert!(a.origin("http://127.0.0.1:8350") && a.origin("http://localhost:8350"));
        for refused in ["http://evil.example", "null", "http://127.0.0.1:8351", "file://", "http://localhost:8350/x"] {
            assert!(!a.origin(refused), "{refused}");
        }
    }
}
