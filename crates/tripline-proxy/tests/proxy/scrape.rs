//! Reading the admin listener's metrics in tests.

use crate::support::*;

/// The text exposition of the proxy's admin listener.
pub async fn scrape(running: &tripline_proxy::Running) -> String {
    let admin = running.admin_addr().expect("an admin listener");
    send(admin, "GET", "/metrics", &[("accept", "text/plain")])
        .await
        .body
}

/// The value of the series whose line starts with `series`.
pub fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// The admin section to append to a config.
pub const ADMIN: &str = "\n[admin]\naddress = \"127.0.0.1:0\"\n";
