use super::*;

fn activity_line(observations: &[&str]) -> Vec<u8> {
    let obs: Vec<String> = observations
        .iter()
        .map(|h| format!("{{\"kind\": \"page\", \"ref\": \"r\", \"content_hash\": \"{h}\"}}"))
        .collect();
    format!(
        "{{\"index\": 0, \"event\": \"activity.result\", \"stage_id\": \"s\", \"observations\": [{}]}}\n",
        obs.join(", ")
    )
    .into_bytes()
}

fn reattach_of(observations: &[&str], store: &StoreIndex) -> Reattach {
    let report = verify_journal_with(&activity_line(observations), Some(store));
    report.activities[0].reattach.clone()
}

#[test]
fn observations_reattach_against_the_store_index_in_row_order() {
    let a = "sha256:aa";
    let b = "sha256:bb";
    let mut store = StoreIndex::default();
    store.insert(a.as_bytes(), a.as_bytes());
    store.insert(b.as_bytes(), b"sha256:other");
    assert_eq!(reattach_of(&[a], &store), Reattach::Ok);
    assert_eq!(reattach_of(&[a, b], &store), Reattach::Mismatch(1));
    assert_eq!(
        reattach_of(&[a, "sha256:cc", b], &store),
        Reattach::Missing(1)
    );
    assert_eq!(
        reattach_of(&["sha256:../x"], &store),
        Reattach::Unresolved(0)
    );
}

#[test]
fn without_a_store_index_nothing_is_reattached() {
    let report = verify_journal(&activity_line(&["sha256:aa"]));
    assert_eq!(report.activities[0].reattach, Reattach::NotChecked);
    assert_eq!(report.activities[0].artifact_stored, None);
}
