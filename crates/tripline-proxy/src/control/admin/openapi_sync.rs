//! Keeps `docs/admin-api.yaml` and [`ROUTES`](super::ROUTES) in step: every
//! route the listener serves is documented, and every documented route is
//! one it serves (the integration tests check each is answered).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

fn documented() -> BTreeSet<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/admin-api.yaml");
    let text = std::fs::read_to_string(path).expect("docs/admin-api.yaml is readable");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("valid YAML");
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with("3.")),
        Some(true),
        "an OpenAPI 3 document"
    );
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_mapping().expect("paths") {
        for (method, _) in item.as_mapping().expect("a path item") {
            let method = method.as_str().unwrap();
            if matches!(method, "get" | "put" | "post" | "delete" | "patch" | "head") {
                routes.insert((
                    method.to_ascii_uppercase(),
                    path.as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    routes
}

#[test]
fn the_openapi_file_documents_exactly_the_routes_served() {
    let served: BTreeSet<(String, String)> = super::ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let documented = documented();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty(),
        "served but not in docs/admin-api.yaml: {undocumented:?}"
    );
    assert!(
        unserved.is_empty(),
        "in docs/admin-api.yaml but not served: {unserved:?}"
    );
}

#[test]
fn every_breaker_action_has_its_route() {
    for action in super::breakers::Action::ALL {
        let path = format!("/api/breakers/{{name}}/{}", action.segment());
        assert!(
            super::ROUTES.contains(&("POST", path.as_str())),
            "{path} is in ROUTES"
        );
    }
}
