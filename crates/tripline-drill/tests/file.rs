//! Drill files: what is accepted, and what is refused naming the field.

use std::path::Path;

use tripline_drill::Drill;
use tripline_drill::file::Target;

const LOAD_AND_EXPECT: &str = "[load]\nrate = 10.0\nduration = \"5s\"\n[expect]\nfalse_trips = 0\n";

fn parse(text: &str, dir: &Path) -> Result<Drill, String> {
    Drill::from_toml("drill.toml", text, dir).map_err(|e| e.to_string())
}

#[test]
fn an_in_process_config_file_is_read_relative_to_the_drill() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    std::fs::write(dir.join("proxy.toml"), "[[routes]]\n").unwrap();
    let drill = parse(
        &format!("[target]\nin_process = \"proxy.toml\"\nupstreams = {{ a = {{ latency = \"5ms\" }} }}\n{LOAD_AND_EXPECT}"),
        dir,
    )
    .unwrap();
    let Target::InProcess {
        config, upstreams, ..
    } = &drill.target
    else {
        panic!("in-process target: {:?}", drill.target);
    };
    assert_eq!(config, "[[routes]]\n");
    assert_eq!(upstreams["a"].latency, std::time::Duration::from_millis(5));
    assert_eq!(drill.name, "drill.toml", "the file names an unnamed drill");
}

#[test]
fn contradictions_are_refused_naming_the_field_and_line() {
    let dir = Path::new(".");
    for (text, needle) in [
        (
            format!("[target]\nadmin = \"http://127.0.0.1:1\"\nproxy = \"\"\n{LOAD_AND_EXPECT}"),
            "drill.toml:1: target: names both a running proxy",
        ),
        (
            format!("[target]\nadmin = \"http://127.0.0.1:1\"\n{LOAD_AND_EXPECT}"),
            "target.url: required with a running proxy",
        ),
        (
            format!("[target]\nadmin = \"127.0.0.1:1\"\nurl = \"http://127.0.0.1:2\"\n{LOAD_AND_EXPECT}"),
            "target.admin: must be an http:// URL",
        ),
        (
            format!("[target]\nin_process = \"missing.toml\"\n{LOAD_AND_EXPECT}"),
            "target.in_process: cannot read",
        ),
        (
            "[target]\nproxy = \"\"\n[load]\nrate = 0.0\nduration = \"5s\"\n[expect]\nfalse_trips = 0\n".to_owned(),
            "drill.toml:3: load.rate: must be within (0, 10000]",
        ),
        (
            format!("[target]\nproxy = \"\"\n{LOAD_AND_EXPECT}[abort]\nerror_rate_above = 0.5\nfor = \"1.5s\"\n"),
            "drill.toml:8: abort.for: must be whole seconds",
        ),
        (
            format!("[target]\nproxy = \"\"\n{LOAD_AND_EXPECT}[[phase]]\nfrom = \"1s\"\nto = \"3s\"\nroute = \"r\"\nabort = {{ status = 503 }}\n[[phase]]\nfrom = \"2s\"\nto = \"4s\"\nroute = \"r\"\ndelay = {{ duration = \"1s\" }}\n"),
            "drill.toml:13: phase[2].from: phases must be in time order and not overlap",
        ),
        (
            format!("[target]\nproxy = \"\"\n{LOAD_AND_EXPECT}[[phase]]\nfrom = \"1s\"\nto = \"9s\"\nroute = \"r\"\nabort = {{ status = 503 }}\n"),
            "phase[1].to: must be within load.duration",
        ),
        (
            "[target]\nproxy = \"\"\n[load]\nrate = 1.0\nduration = \"5s\"\n[expect]\ntrip_within = \"1s\"\n".to_owned(),
            "need a [[phase]] with a fault",
        ),
    ] {
        let err = parse(&text, dir).expect_err(&text);
        assert!(err.contains(needle), "{needle:?} not in {err:?}");
    }
}
