//! What goes on the wire: one Authorization header, Basic auth from URL credentials, the
//! user's Content-Type instead of servelab's, and a base URL without the password.

use crate::common;

use std::sync::{Arc, Mutex};

use common::*;

/// A server that records each request's head and answers a valid one-token stream.
async fn recording() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    let addr = hostile(move |mut s, head| {
        seen.lock().unwrap().push(head);
        async move {
            let body = format!("{}data: [DONE]\n\n", text_event("ok"));
            write_all(&mut s, &[SSE_HEAD, &chunk(body.as_bytes()), LAST_CHUNK]).await;
        }
    })
    .await;
    (addr, heads)
}

/// The values of header `name` in a request head.
fn values<'a>(head: &'a str, name: &str) -> Vec<&'a str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_authorization_header_is_the_only_one_sent() {
    let (addr, heads) = recording().await;
    let mut t = target(&format!("http://user:pw@{addr}")).await;
    t.set_api_key("sk-from-env").unwrap();
    t.add_header("Authorization: Bearer explicit").unwrap();
    t.add_header("Content-Type: application/json; charset=utf-8").unwrap();
    assert_eq!(t.base_url, format!("http://{addr}"));
    let (records, _, _) = run_all(config(t, 2)).await;
    assert!(records.iter().all(|r| r.is_success()), "{records:?}");
    for head in heads.lock().unwrap().iter() {
        assert_eq!(values(head, "authorization"), ["Bearer explicit"], "{head}");
        assert_eq!(values(head, "content-type"), ["application/json; charset=utf-8"], "{head}");
        assert_eq!(values(head, "accept"), ["text/event-stream"], "{head}");
        assert_eq!(values(head, "host"), [addr.to_string()], "{head}");
        assert!(!head.contains("pw"), "{head}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_credentials_are_sent_as_basic_auth() {
    let (addr, heads) = recording().await;
    let t = target(&format!("http://user:pw@{addr}/")).await;
    let (records, _, _) = run_all(config(t, 1)).await;
    assert!(records[0].is_success(), "{records:?}");
    let heads = heads.lock().unwrap();
    // base64("user:pw")
    assert_eq!(values(&heads[0], "authorization"), ["Basic dXNlcjpwdw=="]);
}
