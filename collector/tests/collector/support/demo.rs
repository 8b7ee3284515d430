//! The demo's services run in the test process, exporting to a `budget-top` of the test.

use std::path::Path;
use std::time::Duration;

use budget_demo::{Demo, DemoConfig, LoadPlan, Scenario, Timing};

use super::{listen, runtime};

/// The demo's `runs` (a scenario and its load, one after the other) at `scale` of the
/// workshop's times, as `budget-top record` received them at `path`: one export request a line.
#[track_caller]
pub fn record_demo(path: &Path, scale: f64, runs: &[(Scenario, LoadPlan)]) {
    let recorder = listen(&["record", "--output", path.to_str().unwrap()]);
    runtime().block_on(async {
        for (scenario, load) in runs {
            let mut config = DemoConfig::new(*scenario, recorder.grpc.to_string());
            config.timing = Timing::new(scale);
            config.load = load.clone();
            let demo = Demo::start(config).await.unwrap();
            tokio::time::timeout(Duration::from_secs(60), demo.load_finished())
                .await
                .expect("the load finishes");
            tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
                .await
                .expect("the demo shuts down");
        }
    });
    let finished = recorder.terminate(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
}
