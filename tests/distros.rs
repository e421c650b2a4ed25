//! Every distribution's node layout (issue 48): the same containerd data (`meta.db` with a
//! container whose env holds a Secret's value, its task bundle's spec) and the same pod's
//! Secret volume, laid out as kubeadm, k3s (also with its data dir moved by its config and
//! by a drop-in), RKE2, MicroK8s and k0s (also moved by its systemd unit) lay them out,
//! found by a plain `scan` with the same attribution everywhere; a data dir a config names
//! that is missing is an `errors` entry; the distribution is named by the report.

use serde_json::json;

use crate::runtime::{id, meta_db, POD_UID};
use crate::util::*;

/// A node layout: its name as the report gives it, kubelet's dir, containerd's root and
/// state, and the files that move them.
struct Case {
    distro: &'static str,
    kubelet: &'static str,
    root: &'static str,
    state: &'static str,
    files: &'static [(&'static str, &'static str)],
}

const CASES: &[Case] = &[
    Case {
        distro: "",
        kubelet: "/var/lib/kubelet",
        root: "/var/lib/containerd",
        state: "/run/containerd",
        files: &[],
    },
    Case {
        distro: "k3s",
        kubelet: "/var/lib/kubelet",
        root: "/var/lib/rancher/k3s/agent/containerd",
        state: "/run/k3s/containerd",
        files: &[],
    },
    Case {
        distro: "k3s",
        kubelet: "/var/lib/kubelet",
        root: "/data/k3s/agent/containerd",
        state: "/run/k3s/containerd",
        files: &[(
            "/etc/rancher/k3s/config.yaml",
            "write-kubeconfig-mode: \"0644\"\ndata-dir: /data/k3s # moved\nnode-label:\n  - a=b\n",
        )],
    },
    Case {
        distro: "k3s",
        kubelet: "/var/lib/kubelet",
        root: "/srv/k3s-d/agent/containerd",
        state: "/run/k3s/containerd",
        files: &[
            ("/etc/rancher/k3s/config.yaml", "data-dir: /data/k3s\n"),
            ("/etc/rancher/k3s/config.yaml.d/50-data.yml", "data-dir: '/srv/k3s-d'\n"),
        ],
    },
    Case {
        distro: "rke2",
        kubelet: "/var/lib/kubelet",
        root: "/var/lib/rancher/rke2/agent/containerd",
        state: "/run/k3s/containerd",
        files: &[],
    },
    Case {
        distro: "microk8s",
        kubelet: "/var/snap/microk8s/common/var/lib/kubelet",
        root: "/var/snap/microk8s/common/var/lib/containerd",
        state: "/var/snap/microk8s/common/run/containerd",
        files: &[],
    },
    Case {
        distro: "microk8s",
        kubelet: "/data/mk8s/kubelet",
        root: "/data/mk8s/containerd",
        state: "/var/snap/microk8s/common/run/containerd",
        files: &[
            ("/var/snap/microk8s/current/args/kubelet", "--kubeconfig=${SNAP_DATA}/credentials/kubelet.config\n--root-dir=/data/mk8s/kubelet\n"),
            ("/var/snap/microk8s/current/args/containerd", "--config ${SNAP_DATA}/args/containerd.toml\n--root /data/mk8s/containerd\n--state ${SNAP_COMMON}/run/containerd\n"),
        ],
    },
    Case {
        distro: "k0s",
        kubelet: "/var/lib/k0s/kubelet",
        root: "/var/lib/k0s/containerd",
        state: "/run/k0s/containerd",
        files: &[],
    },
    Case {
        distro: "k0s",
        kubelet: "/srv/k0s/kubelet",
        root: "/srv/k0s/containerd",
        state: "/run/k0s/containerd",
        files: &[(
            "/etc/systemd/system/k0scontroller.service",
            "[Service]\nExecStart=/usr/local/bin/k0s controller --data-dir=/srv/k0s --single=true\n",
        )],
    },
];

/// What a finding is, as the layouts must agree on it: site, category, container id, pod
/// uid, container name.
type Seen = (String, String, String, String, String);

/// The node of `case`, with the value `value` in the container's env (`meta.db` and its
/// bundle's spec) and in the pod's Secret volume; scanned with `--no-cri`.
fn scanned(case: &Case, value: &str, freed: &str, extra: &[&str]) -> (Vec<Seen>, Out) {
    let tree = NodeTree::with_kubelet_dir(case.kubelet);
    let secrets = [
        Secret::opaque("shop", "db", &[("password", value.as_bytes())]),
        Secret::opaque("ops", "api", &[("token", freed.as_bytes())]),
    ];
    tree.guard_secrets(&secrets);
    tree.write(
        format!("{}/io.containerd.metadata.v1.bolt/meta.db", case.root),
        &meta_db(value, freed),
    );
    let spec = json!({
        "ociVersion": "1.0.2",
        "process": {"env": [format!("DB_PASSWORD={value}")]},
        "annotations": {
            "io.kubernetes.cri.container-name": "app",
            "io.kubernetes.cri.sandbox-uid": POD_UID,
            "io.kubernetes.cri.sandbox-namespace": "shop",
            "io.kubernetes.cri.sandbox-name": "web-0",
        },
    });
    let bundle =
        format!("{}/io.containerd.runtime.v2.task/k8s.io/{}/config.json", case.state, id(1));
    tree.write(bundle, &serde_json::to_vec(&spec).unwrap());
    tree.pod(POD_UID).secret_volume("db").key("password", value.as_bytes());
    for (path, text) in case.files {
        tree.write(path, text.as_bytes());
    }
    let file = tree.secrets_file("secrets.json", &secrets);
    let args = [&["--secrets", path_arg(&file), "--format", "json", "-v"][..], extra].concat();
    let out = tree.scan(&args);
    out.assert_code(1);
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_owned();
    let mut seen: Vec<Seen> = out
        .findings()
        .iter()
        .map(|f| {
            let c = &f.raw["container"];
            (
                f.site.clone(),
                f.category.clone(),
                s(&c["id"]),
                s(&f.raw["pod"]["uid"]),
                s(&c["name"]),
            )
        })
        .collect();
    seen.sort();
    for f in out.findings() {
        let under = [case.kubelet, case.root, case.state].iter().any(|d| f.path.starts_with(d));
        assert!(under, "{}: {} is under none of its dirs", case.distro, f.path);
    }
    (seen, out)
}

/// Every layout finds what kubeadm's finds, attributed alike, and names its distribution.
#[test]
fn every_distribution_is_scanned_as_kubeadm_is() {
    let value = String::from_utf8(fake_secret(4801)).unwrap();
    let freed = String::from_utf8(fake_secret(4802)).unwrap();
    let (want, _) = scanned(&CASES[0], &value, &freed, &[]);
    let sites: Vec<&str> = want.iter().map(|s| s.0.as_str()).collect();
    for site in ["containerd-metadata", "oci-bundle", "kubelet-secret-volume"] {
        assert!(sites.contains(&site), "kubeadm: {want:?}");
    }
    assert!(want.iter().any(|s| s.0 == "containerd-metadata" && s.2 == id(1) && s.3 == POD_UID));
    assert!(want.iter().any(|s| s.0 == "oci-bundle" && s.2 == id(1) && s.3 == POD_UID));
    for case in &CASES[1..] {
        let (got, out) = scanned(case, &value, &freed, &[]);
        assert_eq!(got, want, "{} at {}", case.distro, case.root);
        // `--path /` reads the node once more as `other`, but for what a site owns.
        let (whole, _) = scanned(case, &value, &freed, &["--path", "/"]);
        let config_files = whole.iter().filter(|s| s.0 == "other").count();
        let owned: Vec<Seen> = whole.into_iter().filter(|s| s.0 != "other").collect();
        assert_eq!(owned, want, "{} with --path /", case.distro);
        assert_eq!(config_files, 0, "{}: a site's file read as other", case.distro);
        let report = out.json.as_ref().unwrap();
        assert!(report["errors"].as_array().unwrap().is_empty(), "{}: {report}", case.distro);
        let named = report["summary"]["distributions"].as_array().unwrap();
        assert!(named.iter().any(|d| d == case.distro), "{}: {named:?}", case.distro);
        let err = out.stderr_str();
        assert!(err.contains(&format!("distribution {}", case.distro)), "{err}");
        assert!(err.contains(case.root), "-v names the containerd root: {err}");
    }
}

/// A data dir (or kubelet dir, containerd root) a configuration names that is not there is
/// an `errors` entry saying who named it: the node's runtime data was never seen.
#[test]
fn a_missing_data_dir_a_config_names_is_an_error() {
    for (config, text, dir, by) in [
        (
            "/etc/rancher/k3s/config.yaml",
            "data-dir: /gone/k3s\n",
            "/gone/k3s",
            "data-dir in /etc/rancher/k3s/config.yaml",
        ),
        (
            "/etc/rancher/rke2/config.yaml.d/10.yaml",
            "data-dir: /gone/rke2\n",
            "/gone/rke2",
            "data-dir in /etc/rancher/rke2/config.yaml.d/10.yaml",
        ),
        (
            "/etc/systemd/system/k0sworker.service",
            "ExecStart=/usr/bin/k0s worker --data-dir /gone/k0s\n",
            "/gone/k0s",
            "--data-dir in /etc/systemd/system/k0sworker.service",
        ),
        (
            "/var/snap/microk8s/current/args/kubelet",
            "--root-dir=${SNAP_COMMON}/gone/kubelet\n",
            "/var/snap/microk8s/common/gone/kubelet",
            "--root-dir in /var/snap/microk8s/current/args/kubelet",
        ),
        (
            "/var/snap/microk8s/current/args/containerd",
            "--root /gone/containerd\n",
            "/gone/containerd",
            "--root in /var/snap/microk8s/current/args/containerd",
        ),
    ] {
        let tree = NodeTree::new();
        tree.write(config, text.as_bytes());
        // MicroK8s is recognised by its snap's dir.
        tree.mkdir("/var/snap/microk8s/common");
        let secrets = [Secret::opaque("shop", "db", &[("password", fake_secret(4803))])];
        tree.guard_secrets(&secrets);
        let file = tree.secrets_file("s.json", &secrets);
        let out = tree.scan(&["--format", "json", "--secrets", path_arg(&file)]);
        let errors = out.json.as_ref().unwrap()["errors"].as_array().unwrap().clone();
        let entry = errors.iter().find(|e| e["path"] == dir);
        let entry = entry.unwrap_or_else(|| panic!("{config}: {errors:?}"));
        assert!(entry["error"].as_str().unwrap().contains(by), "{entry}");
    }
}

/// MicroK8s keeps its earlier snap revisions' data beside the current one: a credential in
/// an old revision's dir is found, noted as an earlier version's copy; the current
/// revision's dir and `common` are not read as such.
#[test]
fn microk8s_old_revisions_are_read() {
    let tree = NodeTree::with_kubelet_dir("/var/snap/microk8s/common/var/lib/kubelet");
    let value = String::from_utf8(fake_secret(4821)).unwrap();
    let secrets = [Secret::opaque("kube-system", "token", &[("token", value.as_bytes())])];
    tree.guard_secrets(&secrets);
    let token = format!("{value},admin,admin,\"system:masters\"\n");
    for rev in ["6001", "6364"] {
        tree.write(
            format!("/var/snap/microk8s/{rev}/credentials/known_tokens.csv"),
            token.as_bytes(),
        );
    }
    tree.symlink("/var/snap/microk8s/current", "6364");
    tree.write("/var/snap/microk8s/common/var/lib/kubelet/x", b"");
    let file = tree.secrets_file("secrets.json", &secrets);
    for extra in [&[][..], &["--path", "/"]] {
        let args = [&["--secrets", path_arg(&file), "--format", "json"][..], extra].concat();
        let out = tree.scan(&args);
        out.assert_code(1);
        let found: Vec<(String, bool)> = out
            .findings()
            .iter()
            .map(|f| {
                let old = f.raw["note"].as_str().is_some_and(|n| n.contains("earlier version"));
                (f.path.clone(), old)
            })
            .collect();
        let old = ("/var/snap/microk8s/6001/credentials/known_tokens.csv".to_owned(), true);
        assert!(found.contains(&old), "{extra:?}: {found:?}");
        assert!(!found.iter().any(|(p, old)| p.contains("/6364/") && *old), "{found:?}");
    }
}
