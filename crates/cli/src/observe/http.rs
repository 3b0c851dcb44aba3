//! The metrics HTTP server of `corestack run --metrics-listen ADDR:PORT`: `GET /metrics` on a
//! kernel TCP socket, answered from a thread of the daemon with [`super::prometheus::render`]
//! of this process's engine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};

use super::prometheus::{render, snapshots, CONTENT_TYPE};

/// `GET /metrics` served from a thread of the daemon on a kernel TCP
/// socket; stopped (and joined) when dropped.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves this process's engine's metrics at
    /// `/metrics` from a new thread.
    ///
    /// Errors: the address cannot be bound (in use, not local, no
    /// permission), described with what to do.
    pub fn start(addr: SocketAddr) -> Result<MetricsServer> {
        let server = tiny_http::Server::http(addr).map_err(|e| {
            anyhow!("--metrics-listen {addr}: cannot listen there ({e}); choose a free local address and port")
        })?;
        let server = Arc::new(server);
        let s = Arc::clone(&server);
        let pid = std::process::id();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for req in s.incoming_requests() {
                    let response = answer(req.method(), req.url(), pid);
                    let _ = req.respond(response);
                }
            })
            .context("starting the metrics thread")?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.server.server_addr().to_ip()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The response to `method url`: the metrics of process `pid`'s engines at
/// `/metrics` (GET or HEAD), 404 elsewhere, 405 for other methods.
fn answer(
    method: &tiny_http::Method,
    url: &str,
    pid: u32,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let text = |code: u16, body: String, ctype: &str| {
        let header =
            tiny_http::Header::from_bytes("Content-Type", ctype).expect("a valid static header");
        tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(header)
    };
    let path = url.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return text(
            404,
            "not found: the metrics are at /metrics\n".into(),
            "text/plain",
        );
    }
    if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
        return text(405, "use GET /metrics\n".into(), "text/plain");
    }
    match snapshots(pid) {
        Ok(s) => text(200, render(&s), CONTENT_TYPE),
        Err(e) => text(503, format!("{e:#}\n"), "text/plain"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_routes_and_refuses() {
        use std::io::Read;
        let body = |r: tiny_http::Response<std::io::Cursor<Vec<u8>>>| {
            let code = r.status_code().0;
            let mut s = String::new();
            r.into_reader().read_to_string(&mut s).unwrap();
            (code, s)
        };
        let (code, s) = body(answer(&tiny_http::Method::Get, "/nope", 1));
        assert_eq!(code, 404, "{s}");
        let (code, _) = body(answer(&tiny_http::Method::Post, "/metrics", 1));
        assert_eq!(code, 405);
        // No engine with this pid: 503 with the reason, not a panic.
        let (code, s) = body(answer(&tiny_http::Method::Get, "/metrics?x=1", u32::MAX));
        assert_eq!(code, 503);
        assert!(s.contains("no corestack engine statistics"), "{s}");
    }
}
