//! The task that appends queued lines to the log's file (or stdout).

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

/// The running writer; [`finish`](Writer::finish) it on drain.
#[derive(Debug)]
pub(crate) struct Writer {
    pub(super) stop: oneshot::Sender<()>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Writer {
    /// Writes what is queued, flushes, and ends the writer.
    pub(crate) async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

pub(super) async fn write_lines(
    mut lines: mpsc::Receiver<String>,
    out: Box<dyn AsyncWrite + Send + Unpin>,
    mut stop: oneshot::Receiver<()>,
    dropped: Counter,
) {
    let mut out = BufWriter::new(out);
    loop {
        tokio::select! {
            // Lines first: the stop is seen only once the queue is empty.
            biased;
            line = lines.recv() => match line {
                Some(line) => {
                    write_line(&mut out, line, &dropped).await;
                    if lines.is_empty() {
                        flush(&mut out).await;
                    }
                }
                None => break,
            },
            _ = &mut stop => break,
        }
    }
    while let Ok(line) = lines.try_recv() {
        write_line(&mut out, line, &dropped).await;
    }
    flush(&mut out).await;
}

async fn write_line<W: AsyncWrite + Unpin>(out: &mut W, mut line: String, dropped: &Counter) {
    line.push('\n');
    if let Err(e) = out.write_all(line.as_bytes()).await {
        dropped.inc();
        tracing::warn!(error = %e, "access log write failed");
    }
}

async fn flush<W: AsyncWrite + Unpin>(out: &mut W) {
    if let Err(e) = out.flush().await {
        tracing::warn!(error = %e, "access log flush failed");
    }
}
