//! A one-file HTTP server on 127.0.0.1 for hub tests: answers every GET with a fixed status
//! and body, records the requests, and stops after `max_requests` or when dropped.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Server {
    pub endpoint: String,
    /// Request head (request line and headers) of each request served.
    pub requests: Arc<Mutex<Vec<String>>>,
}

/// Serve `body` with `status` (e.g. "200 OK") and an `X-Repo-Commit` header.
pub fn serve(status: &'static str, body: Vec<u8>, max_requests: usize) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(max_requests) {
            let Ok(mut stream) = stream else { return };
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            seen.lock().unwrap().push(head);
            let header = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nX-Repo-Commit: 0123abcd\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(header.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    Server { endpoint, requests }
}

pub fn fixture_tokenizer() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/smollm2-tokenizer.json");
    std::fs::read(path).unwrap()
}
