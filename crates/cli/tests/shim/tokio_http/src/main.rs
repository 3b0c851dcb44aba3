//! `tokio-http PORT SECONDS`: a hyper HTTP/1 server on Tokio's multi-thread runtime (4 worker
//! threads), answering every request with 1 MiB of `x`; prints `serving` once listening and
//! exits after SECONDS.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{server::conn::http1, service::service_fn, Request, Response};
use hyper_util::rt::TokioIo;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(7402);
    let secs: u64 = args.next().and_then(|p| p.parse().ok()).unwrap_or(30);
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port))
        .await
        .expect("bind");
    println!("serving");
    let body = Bytes::from(vec![b'x'; 1 << 20]);
    let serve = async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let body = body.clone();
                    async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
                });
                let io = TokioIo::new(stream);
                let _ = http1::Builder::new().serve_connection(io, svc).await;
            });
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(secs), serve).await;
    println!("done");
}
