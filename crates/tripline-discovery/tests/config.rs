//! The discovery section: read from TOML and YAML, refused naming the field.

use std::time::Duration;

use tripline_discovery::{Protocol, ZooKeeperDiscovery};

#[test]
fn reads_from_toml_and_yaml_alike() {
    let toml: ZooKeeperDiscovery = toml::from_str(
        r#"
        zookeeper = "10.0.0.1:2181,10.0.0.2:2181"
        path = "/dubbo/com.example.OrderService/providers"
        protocol = "tri"
        grace = "30s"
        session_timeout = "6s"
        "#,
    )
    .unwrap();
    let yaml: ZooKeeperDiscovery = serde_yaml_ng::from_str(
        "zookeeper: 10.0.0.1:2181,10.0.0.2:2181\n\
         path: /dubbo/com.example.OrderService/providers\n\
         protocol: tri\n\
         grace: 30s\n\
         session_timeout: 6s\n",
    )
    .unwrap();
    assert_eq!(toml, yaml);
    assert_eq!(toml.protocol, Protocol::Tri);
    assert_eq!(toml.grace, Some(Duration::from_secs(30)));
    toml.validate().unwrap();
}

#[test]
fn defaults_and_unknown_fields() {
    let d: ZooKeeperDiscovery = toml::from_str(
        "zookeeper = \"zk:2181\"\npath = \"/dubbo/a.B/providers\"\nprotocol = \"grpc\"",
    )
    .unwrap();
    assert_eq!(d.grace, None);
    assert_eq!(d.session_timeout, Duration::from_secs(10));
    let e = toml::from_str::<ZooKeeperDiscovery>(
        "zookeeper = \"zk:2181\"\npath = \"/dubbo/a.B/providers\"",
    )
    .unwrap_err();
    assert!(e.to_string().contains("protocol"), "{e}");
    let e = toml::from_str::<ZooKeeperDiscovery>(
        "zookeeper = \"zk:2181\"\npath = \"/dubbo/a.B/providers\"\nprotocol = \"http\"",
    )
    .unwrap_err();
    assert!(e.to_string().contains("tri"), "{e}");
    let e = toml::from_str::<ZooKeeperDiscovery>(
        "zookeeper = \"zk:2181\"\npath = \"/dubbo/a.B/providers\"\nprotocol = \"tri\"\nttl = 3",
    )
    .unwrap_err();
    assert!(e.to_string().contains("ttl"), "{e}");
}

#[test]
fn refusals_name_the_field_and_the_constraint() {
    let ok = ZooKeeperDiscovery::new(
        "127.0.0.1:2181",
        "/dubbo/com.example.OrderService/providers",
    );
    let cases: Vec<(ZooKeeperDiscovery, &str)> = vec![
        (
            ZooKeeperDiscovery {
                zookeeper: "zk".into(),
                ..ok.clone()
            },
            "discovery.zookeeper: expected host:port",
        ),
        (
            ZooKeeperDiscovery {
                zookeeper: "zk:2181,".into(),
                ..ok.clone()
            },
            "discovery.zookeeper: expected host:port",
        ),
        (
            ZooKeeperDiscovery {
                zookeeper: "zk:0".into(),
                ..ok.clone()
            },
            "discovery.zookeeper: expected host:port",
        ),
        (
            ZooKeeperDiscovery {
                path: "/dubbo/x/consumers".into(),
                ..ok.clone()
            },
            "discovery.path: expected a providers path",
        ),
        (
            ZooKeeperDiscovery {
                path: "dubbo/x/providers".into(),
                ..ok.clone()
            },
            "discovery.path: expected a providers path",
        ),
        (
            ZooKeeperDiscovery {
                path: "//providers".into(),
                ..ok.clone()
            },
            "discovery.path: expected a providers path",
        ),
        (
            ZooKeeperDiscovery {
                grace: Some(Duration::from_secs(90_000)),
                ..ok.clone()
            },
            "discovery.grace: must be at most 24h",
        ),
        (
            ZooKeeperDiscovery {
                session_timeout: Duration::from_millis(10),
                ..ok.clone()
            },
            "discovery.session_timeout",
        ),
    ];
    ok.validate().unwrap();
    for (config, expected) in cases {
        let e = config.validate().unwrap_err();
        assert!(e.to_string().starts_with(expected), "{config:?}: {e}");
        assert!(
            tripline_discovery::spawn(&config).is_err(),
            "spawn validates too"
        );
    }
}
