//! The task that formats queued records and appends their lines to the
//! log's file (or stdout).

use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

use super::{Format, Record};

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
    mut records: mpsc::Receiver<Record>,
    format: Format,
    out: Box<dyn AsyncWrite + Send + Unpin>,
    mut stop: oneshot::Receiver<()>,
    dropped: Counter,
) {
    let mut out = BufWriter::new(out);
    // One buffer for every line: formatting allocates only while a line
    // is longer than any before it.
    let mut line = Vec::with_capacity(512);
    loop {
        tokio::select! {
            // Records first: the stop is seen only once the queue is empty.
            biased;
            record = records.recv() => match record {
                Some(record) => {
                    write_line(&mut out, &format, &record, &mut line, &dropped).await;
                    if records.is_empty() {
                        flush(&mut out).await;
                    }
                }
                None => break,
            },
            _ = &mut stop => break,
        }
    }
    while let Ok(record) = records.try_recv() {
        write_line(&mut out, &format, &record, &mut line, &dropped).await;
    }
    flush(&mut out).await;
}

async fn write_line<W: AsyncWrite + Unpin>(
    out: &mut W,
    format: &Format,
    record: &Record,
    line: &mut Vec<u8>,
    dropped: &Counter,
) {
    line.clear();
    if let Err(e) = format.render(record, line) {
        dropped.inc();
        tracing::warn!(error = %e, "access log line could not be formatted");
        return;
    }
    line.push(b'\n');
    if let Err(e) = out.write_all(line).await {
        dropped.inc();
        tracing::warn!(error = %e, "access log write failed");
    }
}

async fn flush<W: AsyncWrite + Unpin>(out: &mut W) {
    if let Err(e) = out.flush().await {
        tracing::warn!(error = %e, "access log flush failed");
    }
}
