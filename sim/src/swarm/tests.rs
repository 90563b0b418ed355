use super::*;

#[test]
fn the_point_list_is_every_fault_point_in_the_source() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = std::collections::BTreeSet::new();
    let mut stack = vec![root.join("broker/src"), root.join("vfs/src")];
    #[allow(clippy::disallowed_methods)] // the repository's source, not a volume
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for part in text.split("fault_point!(").skip(1) {
                    if let Some(name) = part.split('"').nth(1) {
                        if part.find('"') < part.find(')') {
                            found.insert(name.to_owned());
                        }
                    }
                }
            }
        }
    }
    found.remove("<change>.<step done>");
    let listed: std::collections::BTreeSet<String> =
        POINTS.iter().map(|p| (*p).to_owned()).collect();
    assert_eq!(found, listed);
}

#[test]
fn families_name_only_real_points() {
    for (family, steps) in FAMILIES {
        for p in *steps {
            assert!(POINTS.contains(p), "{family}: {p} is not a fault point");
        }
    }
}

#[test]
fn the_writes_failing_worlds_aim_at_are_real_points() {
    for p in points::WRITES {
        assert!(POINTS.contains(p), "{p} is not a fault point");
    }
    let profile = draw_in(3, "failing-writes").unwrap();
    let failing = profile.points.failing.clone().unwrap();
    assert!(failing.share > 0.5 && failing.max_acts > 3);
    assert!(profile.points.focus.len() >= 3);
}

#[test]
fn a_seed_always_draws_the_same_profile_and_seeds_draw_many_worlds() {
    assert_eq!(draw(7).describe(), draw(7).describe());
    let worlds: std::collections::BTreeSet<&str> = (0..400).map(|s| draw(s).world).collect();
    for (w, _) in WORLDS {
        assert!(worlds.contains(w), "{w} never drawn in 400 seeds");
    }
    assert!(worlds.contains("mix"));
    let calm = (0..400).filter(|s| draw(*s).faults.is_empty()).count();
    let brutal = (0..400).filter(|s| draw(*s).faults.len() >= 5).count();
    assert!(calm > 0 && brutal > 0, "calm {calm}, brutal {brutal}");
    for s in 0..400 {
        let p = draw(s);
        p.nfs.validate().unwrap();
        assert!(p.pace.lasts_ms.0 < p.pace.lasts_ms.1, "{}", p.describe());
        assert!(p.pace.gap_ms.0 < p.pace.gap_ms.1, "{}", p.describe());
    }
}
