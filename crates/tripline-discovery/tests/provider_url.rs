//! Provider URLs: never a panic on any input, and every URL Dubbo could
//! write reads back as itself.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tripline_discovery::{Protocol, ProviderUrl, Read, decode, encode};

fn provider_url() -> impl Strategy<Value = ProviderUrl> {
    let host = prop_oneof![
        "[a-z][a-z0-9-]{0,10}(\\.[a-z][a-z0-9-]{0,8}){0,2}",
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>())
            .prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
        any::<std::net::Ipv6Addr>().prop_map(|a| a.to_string()),
    ];
    let params = prop::collection::btree_map(
        "[a-z][a-z.\\-]{0,12}",
        "[A-Za-z0-9 ,.:/\\-_*+%é]{0,16}",
        0..6,
    );
    (
        prop_oneof![Just("tri"), Just("dubbo"), Just("grpc"), Just("rest")],
        host,
        1..=u16::MAX,
        "[a-z][a-zA-Z0-9.]{0,30}",
        params,
    )
        .prop_map(|(protocol, host, port, interface, params)| ProviderUrl {
            protocol: protocol.to_owned(),
            host,
            port,
            interface,
            params: params
                .into_iter()
                .filter(|(_, v)| !v.contains(['&', '=']))
                .collect::<BTreeMap<_, _>>(),
        })
}

proptest! {
    #[test]
    fn parsing_never_panics(text in any::<String>()) {
        let _ = ProviderUrl::parse(&text);
        let _ = ProviderUrl::parse_decoded(&text);
        let _ = Read::of(&[text], Protocol::Tri);
    }

    #[test]
    fn parsing_url_like_text_never_panics(text in "(tri|%74ri|)(:|%3A)?(/|%2F){0,2}[\\[\\]a-z0-9.:%@?&=/+]{0,40}") {
        if let Ok(url) = ProviderUrl::parse(&text) {
            prop_assert!(url.port > 0);
            let _ = url.weight();
        }
    }

    #[test]
    fn a_written_url_reads_back_as_itself(url in provider_url()) {
        let child = url.to_child();
        prop_assert!(!child.contains(['/', ':', '?', '&', '=']), "{child}");
        prop_assert_eq!(ProviderUrl::parse(&child), Ok(url));
    }

    #[test]
    fn decoding_undoes_encoding(text in any::<String>()) {
        prop_assert_eq!(decode(&encode(&text)), Ok(text));
    }
}

#[test]
fn a_child_as_dubbo_registers_it() {
    let child = "tri%3A%2F%2F10.0.0.5%3A50051%2Fcom.example.OrderService%3Fanyhost%3Dtrue\
                 %26application%3Dorders%26enabled%3Dtrue%26weight%3D200";
    let url = ProviderUrl::parse(child).unwrap();
    assert_eq!(url.address(), "10.0.0.5:50051");
    assert_eq!(url.interface, "com.example.OrderService");
    assert_eq!(url.weight(), Ok(200));
    assert!(url.is_enabled());
}

#[test]
fn protocol_disabled_weight_and_garbage_are_sorted_out() {
    let children: Vec<String> = [
        "tri://10.0.0.1:1/s?weight=7",
        "tri://10.0.0.2:1/s",
        "tri://10.0.0.3:1/s?enabled=false",
        "tri://10.0.0.4:1/s?disabled=true",
        "dubbo://10.0.0.5:1/s",
        "tri://10.0.0.6:1/s?weight=heavy",
        "tri://10.0.0.7/s",
        "%zz",
    ]
    .iter()
    .map(|u| encode(u))
    .chain(["%zz".to_owned()])
    .collect();
    let read = Read::of(&children, Protocol::Tri);
    let providers: Vec<(&str, u32)> = read
        .providers
        .iter()
        .map(|(a, w)| (a.as_str(), *w))
        .collect();
    assert_eq!(providers, [("10.0.0.1:1", 7), ("10.0.0.2:1", 100)]);
    assert_eq!(read.disabled, 2);
    assert_eq!(read.other_protocols.get("dubbo"), Some(&1));
    let reasons: Vec<&str> = read.skipped.iter().map(|(_, why)| why.as_str()).collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(reasons[0].contains("weight"), "{reasons:?}");
    assert!(reasons[1].contains("port"), "{reasons:?}");
    assert!(reasons[3].contains("hex digits"), "{reasons:?}");
}
