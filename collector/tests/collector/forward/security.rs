//! The way to the backend: TLS and mTLS to Jaeger, the token to a backend that checks it, and
//! the flags refused at start.

use std::time::Duration;

use budget_top::ingest::decode::count_spans;

use super::{chain, forward_to, forward_when, post, read_report, settled, until_held_whole};
use crate::jaeger::{Jaeger, JaegerTls, Ports, jaeger_or_skip};
use crate::support::{assert_serve_refuses, scratch, serve};

#[test]
fn tls_and_mtls_reach_jaeger_over_grpc_and_http() {
    let Some(bin) = jaeger_or_skip("forward: tls_and_mtls_reach_jaeger") else {
        return;
    };
    let dir = scratch("forward/tls");
    let authority = crate::tls::ca();
    let (server_cert, server_key) = crate::tls::issue(&authority, &["localhost"], false);
    let (client_cert, client_key) = crate::tls::issue(&authority, &["budget-top"], false);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca = write("ca.pem", &authority.pem());
    let (cert, key) = (
        write("server.pem", &server_cert),
        write("server.key", &server_key),
    );
    let (ccert, ckey) = (
        write("client.pem", &client_cert),
        write("client.key", &client_key),
    );
    let tls = JaegerTls {
        cert: &cert,
        key: &key,
        client_ca: Some(&ca),
    };
    let jaeger = Jaeger::start_on(&bin, Ports::free(), Some(&tls));
    let endpoints = [
        format!("grpcs://localhost:{}", jaeger.otlp_grpc.port()),
        format!("https://localhost:{}/v1/traces", jaeger.otlp_http.port()),
    ];
    for (i, url) in endpoints.iter().enumerate() {
        let serving = forward_to(
            url,
            "200ms",
            "0",
            &[
                "--forward-ca",
                ca.to_str().unwrap(),
                "--forward-cert",
                ccert.to_str().unwrap(),
                "--forward-key",
                ckey.to_str().unwrap(),
            ],
        );
        let request = chain(0xd1, i as u32, true);
        post(serving.http, &request);
        let forward = forward_when(serving.api, Duration::from_secs(30), settled);
        assert_eq!(
            forward["spans"]["sent"],
            count_spans(&request),
            "{url}: {forward:#}"
        );
        until_held_whole(&jaeger, &request, Duration::from_secs(30));
        serving.terminate(Duration::from_secs(30));
    }
    // Without the client certificate, Jaeger refuses the handshake: nothing is sent.
    let serving = forward_to(
        &endpoints[0],
        "200ms",
        "0",
        &[
            "--forward-ca",
            ca.to_str().unwrap(),
            "--forward-retry-for",
            "2s",
        ],
    );
    post(serving.http, &chain(0xd1, 9, true));
    let forward = forward_when(serving.api, Duration::from_secs(30), settled);
    assert_eq!(forward["spans"]["sent"], 0, "{forward:#}");
    assert!(
        forward["spans"]["failed"].as_u64().unwrap() > 0,
        "{forward:#}"
    );
    serving.terminate(Duration::from_secs(30));
    jaeger.stop();
}

#[test]
fn the_token_reaches_a_backend_that_checks_it_and_a_wrong_one_is_not_retried() {
    let dir = scratch("forward/token");
    let authority = crate::tls::ca();
    let (server_cert, server_key) = crate::tls::issue(&authority, &["localhost"], false);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let ca = write("ca.pem", &authority.pem());
    let (cert, key) = (
        write("server.pem", &server_cert),
        write("server.key", &server_key),
    );
    let token = write("token", "s3cret-token\n");
    let wrong = write("wrong", "not-the-token\n");
    let backend_report = dir.join("backend.json");
    // The backend: a budget-top whose receivers want TLS and the token (§7).
    let backend = serve(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--bearer-token-file",
        &token,
        "--settle",
        "200ms",
        "--report",
        backend_report.to_str().unwrap(),
    ]);
    for (file, accepted) in [(&token, true), (&wrong, false)] {
        let url = format!("grpcs://localhost:{}", backend.grpc.port());
        let front = forward_to(
            &url,
            "200ms",
            "0",
            &["--forward-ca", &ca, "--forward-token-file", file],
        );
        let request = chain(0xe1, u32::from(accepted), true);
        post(front.http, &request);
        let forward = forward_when(front.api, Duration::from_secs(30), settled);
        if accepted {
            assert_eq!(
                forward["spans"]["sent"],
                count_spans(&request),
                "{forward:#}"
            );
        } else {
            assert_eq!(
                forward["spans"]["failed"],
                count_spans(&request),
                "{forward:#}"
            );
            assert_eq!(forward["spans"]["retried"], 0, "{forward:#}");
            let error = forward["last_error"].as_str().unwrap();
            assert!(error.contains("Unauthenticated"), "{error}");
        }
        front.terminate(Duration::from_secs(30));
    }
    let (code, _) = backend.terminate(Duration::from_secs(30));
    assert_eq!(code, Some(0));
    let report = read_report(&backend_report);
    let ingest = &report["ingest"];
    assert_eq!(
        ingest["spans_accepted"],
        count_spans(&chain(0xe1, 1, true)),
        "{ingest:#}"
    );
    assert_eq!(ingest["requests_unauthenticated"], 1, "{ingest:#}");
}

#[test]
fn bad_forward_flags_are_refused_at_start_and_an_unreachable_backend_is_not() {
    let dir = scratch("forward/refusals");
    let empty = dir.join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let missing = dir.join("missing");
    let (garbage, missing, empty) = (
        garbage.to_str().unwrap(),
        missing.to_str().unwrap(),
        empty.to_str().unwrap(),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--forward", "ftp://x:1"], "unknown scheme"),
        (vec!["--forward", "grpc://backend"], "needs its port"),
        (
            vec!["--forward", "http://x:4318/v1/traces?x=1"],
            "no user, query",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-sample", "2"],
            "a share from 0 to 1",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-sample", "0.00001"],
            "at least 1/16384",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-on", "fatal"],
            "invalid value",
        ),
        (vec!["--forward-sample", "0.5"], "--forward <URL>"),
        (
            vec!["--forward", "grpcs://x:4317", "--forward-ca", missing],
            "(--forward-ca)",
        ),
        (
            vec!["--forward", "grpcs://x:4317", "--forward-ca", garbage],
            "(--forward-ca)",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-ca", garbage],
            "is plain",
        ),
        (
            vec!["--forward", "grpcs://x:4317", "--forward-cert", garbage],
            "--forward-key",
        ),
        (
            vec![
                "--forward",
                "grpcs://x:4317",
                "--forward-cert",
                garbage,
                "--forward-key",
                garbage,
            ],
            "(--forward-cert)",
        ),
        (
            vec![
                "--forward",
                "grpc://x:4317",
                "--forward-token-file",
                missing,
            ],
            "cannot read the bearer token file",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-token-file", empty],
            "is empty (--forward-token-file)",
        ),
    ];
    for (args, sentence) in cases {
        assert_serve_refuses(&args, sentence);
    }
    // Nobody listens there: serve starts all the same, and says where it forwards.
    let nowhere = crate::otelcol_tier1::free_port();
    let serving = serve(&["--forward", &format!("grpc://{nowhere}")]);
    let said = serving.stderr_until("forwarding to", Duration::from_secs(10));
    assert!(
        said.contains(&format!("forwarding to grpc://{nowhere} (plain, no token)")),
        "{said}"
    );
    let (code, _) = serving.terminate(Duration::from_secs(30));
    assert_eq!(code, Some(0));
}
