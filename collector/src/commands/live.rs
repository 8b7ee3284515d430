//! Plain `budget-top`: the receivers feeding the live screen. `d` on the empty screen starts
//! the demo services exporting to these receivers (with the `demo` feature).

use std::sync::Arc;

use deadline_budget::carrier::Carriers;

use crate::cli::Listen;
use crate::ingest;
use crate::screen::{Controls, LiveConfig, Mode, Refused, run_live};
use crate::store::Retention;
use crate::view_model::trace_url::TraceUrl;

/// Plain `budget-top`: starts the receivers and hands their batches and refusal count to the
/// screen; `d` on the empty screen starts the demo services exporting to these receivers.
pub async fn run(
    listen: Listen,
    retention: Retention,
    max_attribute_bytes: usize,
    carriers: Arc<Carriers>,
    links: Option<TraceUrl>,
) -> anyhow::Result<()> {
    let mut config = listen.ingest_config();
    config.carriers = carriers;
    // What may wait in the channel is bounded like what the store holds.
    config.max_queued_attribute_bytes = max_attribute_bytes;
    // ... and in bytes, spans and their attributes together: what waits is decoded on the
    // runtime's workers, whose malloc arenas keep their high-water mark.
    config.max_queued_bytes = ingest::SCREEN_MAX_QUEUED_BYTES;
    let ingest = ingest::start(config).await?;
    let stats = ingest.stats.clone();
    #[cfg(feature = "demo")]
    let (demo, start_demo, driver) = {
        // The demo's exporters carry no token: with one required, `d` is not offered.
        let demo_target = ingest.grpc_addr.filter(|_| !ingest.token_required);
        match super::demo::for_live_screen(demo_target) {
            Some(d) => (Some(d.control), Some(d.start), Some(d.driver)),
            None => (None, None, None),
        }
    };
    #[cfg(not(feature = "demo"))]
    let (demo, start_demo) = (None, None);
    let controls = Controls {
        demo,
        start_demo,
        refused: Some(Box::new(move || Refused::of(&stats))),
        ..Controls::default()
    };
    let config = LiveConfig {
        mode: Mode::Live,
        grpc_addr: ingest.grpc_addr,
        http_addr: ingest.http_addr,
        protection: Some(ingest.protection()),
        open_to_anyone: ingest.open_to_network().is_some(),
        retention,
        max_attribute_bytes,
        links,
    };
    // The warnings (a token file others can read, anyone on the network can send) stay on
    // the terminal under the screen, and are there when it closes.
    for line in ingest.protection_lines() {
        if line.starts_with("warning:") {
            crate::stderr_line!("budget-top: {line}");
        }
    }
    let result = run_live(config, ingest.receiver, controls).await;
    ingest.shutdown_token.cancel();
    #[cfg(feature = "demo")]
    if let Some(driver) = driver {
        driver.stop().await;
    }
    result
}
