//! A local SNTP server whose clock runs a set amount ahead: the reference of the clock tests
//! (here and, through `#[path]`, in the CLI's tests).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::UdpSocket;

/// NTP time of `t` (seconds since 1900 and a 32-bit fraction), as 8 big-endian bytes.
fn ntp_time(t: SystemTime) -> [u8; 8] {
    let d = t.duration_since(UNIX_EPOCH).unwrap();
    let secs = d.as_secs() + 2_208_988_800;
    let frac = ((d.subsec_nanos() as u64) << 32) / 1_000_000_000;
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&(secs as u32).to_be_bytes());
    out[4..].copy_from_slice(&(frac as u32).to_be_bytes());
    out
}

/// An SNTP server on 127.0.0.1 whose clock is `ahead_ms` ahead: stratum 2, version 4.
pub async fn ntp_server(ahead_ms: u64) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 48];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else { return };
            if n < 48 {
                continue;
            }
            let received = SystemTime::now() + Duration::from_millis(ahead_ms);
            let mut reply = [0u8; 48];
            reply[0] = 0b00_100_100; // no leap warning, version 4, mode 4 (server)
            reply[1] = 2; // stratum
            reply[12..16].copy_from_slice(b"TEST");
            reply[16..24].copy_from_slice(&ntp_time(received - Duration::from_secs(60)));
            reply[24..32].copy_from_slice(&buf[40..48]); // originate = the client's transmit
            reply[32..40].copy_from_slice(&ntp_time(received));
            let sent = SystemTime::now() + Duration::from_millis(ahead_ms);
            reply[40..48].copy_from_slice(&ntp_time(sent));
            let _ = socket.send_to(&reply, from).await;
        }
    });
    addr
}
