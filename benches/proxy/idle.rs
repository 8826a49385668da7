//! Opens `count` keep-alive connections to a proxy, sends one request on
//! each (so each is a served, pooled-on-the-client-side HTTP/1.1
//! connection), then holds them idle until killed: for measuring the
//! proxy's memory per idle connection (`benches/proxy/run.sh`).
//!
//! `cargo run --release -p tripline-benches --features proxy --example proxy-idle -- 127.0.0.1:18081 10000`

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:18081".to_owned());
    let count: usize = args
        .next()
        .map(|c| c.parse())
        .transpose()?
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut held = Vec::with_capacity(count);
        let request = b"GET / HTTP/1.1\r\nhost: bench\r\n\r\n";
        let mut buf = vec![0u8; 4096];
        let mut refused = 0usize;
        for _ in 0..count {
            // A proxy at its connection limit leaves the connection in the
            // accept queue unanswered: stop there, and say how many it held.
            let opened = tokio::time::timeout(Duration::from_secs(5), async {
                let mut stream = TcpStream::connect(&addr).await?;
                stream.write_all(request).await?;
                // The answer is small: one read holds all of it.
                match stream.read(&mut buf).await? {
                    0 => Err(std::io::Error::other("closed before answering")),
                    _ => Ok(stream),
                }
            })
            .await;
            match opened {
                Ok(Ok(stream)) => held.push(stream),
                Ok(Err(_)) | Err(_) => {
                    refused = count - held.len();
                    break;
                }
            }
        }
        if refused > 0 {
            println!("idle: {refused} connections not answered");
        }
        println!("idle: holding {} connections", held.len());
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    })
}
