//! Container image archives scanned without root or a runtime (issue 50): an OCI image
//! layout (a directory, and a tar of it) and a `docker save` archive (the legacy layout:
//! `manifest.json`, `ID/layer.tar`, `HEX.json`), built here from layer trees GNU tar packs,
//! gzip-, zstd- or not compressed; two images sharing a layer; a file deleted by a later
//! layer's whiteout (and an opaque directory); values in a config's ENV and history.
//! Then hostile archives: traversal names, links, a gzip bomb, a cut blob, a tar of ten
//! million members.

use crate::util::*;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

fn sha256(b: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(b)))
}

fn gz(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zst(b: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(b, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A tar (GNU tar) of the files `files` (path, bytes) laid out in a temp dir, in records
/// of one block (it ends with its two zero blocks, not padded to 10 KiB).
fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    for (p, data) in files {
        let path = dir.path().join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, data).unwrap();
    }
    let out = Command::new("tar")
        .args(["--sort=name", "--owner=0", "--group=0", "--blocking-factor=1", "-C"])
        .arg(dir.path())
        .args(["-cf", "-", "."])
        .output()
        .unwrap();
    assert!(out.status.success(), "tar: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// What the test plants, and where it should be found.
struct Planted {
    /// In layer 1 (gzip), shared by both images: found, no note.
    token: Vec<u8>,
    /// In layer 1, deleted by layer 2's whiteout in image A only.
    deleted_in_a: Vec<u8>,
    /// In layer 2 (zstd, image A only), hidden by layer 3's opaque dir.
    hidden: Vec<u8>,
    /// In image A's config ENV.
    env: Vec<u8>,
    /// In image A's history (a build argument).
    build_arg: Vec<u8>,
}

/// The blobs of two images: A = [L1 gzip, L2 zstd, L3 plain], B = [L1]; and their configs.
struct Images {
    layers: Vec<(Vec<u8>, Vec<u8>)>,
    configs: Vec<Vec<u8>>,
    planted: Planted,
}

fn images(tree: &NodeTree) -> Images {
    let p = Planted {
        token: fake_secret(5001),
        deleted_in_a: fake_secret(5002),
        hidden: fake_secret(5003),
        env: fake_secret(5004),
        build_arg: fake_secret(5005),
    };
    for v in [&p.token, &p.deleted_in_a, &p.hidden, &p.env, &p.build_arg] {
        tree.guard(v);
    }
    let filler = filler(7, 300_000);
    let t1 = tar_of(&[
        ("etc/app/token", &[b"token=".as_slice(), &p.token, b"\n"].concat()),
        ("etc/app/old", &[b"pw: ".as_slice(), &p.deleted_in_a].concat()),
        ("usr/share/big", &filler),
    ]);
    let t2 = tar_of(&[("etc/app/.wh.old", b""), ("opt/cache/k", &p.hidden)]);
    let t3 = tar_of(&[("opt/cache/.wh..wh..opq", b""), ("opt/cache/fresh", b"nothing")]);
    let layers: Vec<(Vec<u8>, Vec<u8>)> =
        vec![(t1.clone(), gz(&t1)), (t2.clone(), zst(&t2)), (t3.clone(), t3)];
    let diff_ids: Vec<String> = layers.iter().map(|(raw, _)| sha256(raw)).collect();
    let env = String::from_utf8(p.env.clone()).unwrap();
    let arg = String::from_utf8(p.build_arg.clone()).unwrap();
    let config_a = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": [format!("API_TOKEN={env}"), "PATH=/usr/bin"]},
        "history": [{"created_by": format!("RUN |1 DB_PASSWORD={arg} /bin/sh -c make")}],
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .unwrap();
    let config_b = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [diff_ids[0]]},
    }))
    .unwrap();
    Images { layers, configs: vec![config_a, config_b], planted: p }
}

/// Stores `b` as a blob of the OCI layout at `dir`; its digest.
fn put_blob(dir: &Path, b: &[u8]) -> String {
    let d = sha256(b);
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    fs::write(blobs.join(&d[7..]), b).unwrap();
    d
}

/// The OCI layout `dir` of one unnamed image whose one layer is the blob `layer`.
fn one_layer_image(dir: &Path, layer: &[u8]) {
    let l = put_blob(dir, layer);
    let c = put_blob(dir, br#"{"rootfs":{"diff_ids":[]}}"#);
    let m = json!({"config": {"digest": c}, "layers": [{"digest": l}]});
    let m = put_blob(dir, &serde_json::to_vec(&m).unwrap());
    let index = json!({"manifests": [{"digest": m}]});
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
}

/// Writes an OCI layout of `imgs` under `dir`: image A as `img-a:1` (containerd's name
/// annotation), B as `img-b:2`.
fn oci_layout(imgs: &Images, dir: &Path) {
    let put = |b: &[u8]| put_blob(dir, b);
    let media = [
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.v1.tar",
    ];
    let descs: Vec<Value> = imgs
        .layers
        .iter()
        .zip(media)
        .map(|((_, blob), m)| json!({"mediaType": m, "digest": put(blob), "size": blob.len()}))
        .collect();
    let mut index = Vec::new();
    for (i, (name, layers)) in
        [("docker.io/library/img-a:1", &descs[..]), ("docker.io/library/img-b:2", &descs[..1])]
            .into_iter()
            .enumerate()
    {
        let config = put(&imgs.configs[i]);
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": imgs.configs[i].len()},
            "layers": layers,
        }))
        .unwrap();
        let d = put(&manifest);
        index.push(json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": manifest.len(),
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(':').next().unwrap()},
        }));
    }
    fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": index})).unwrap(),
    )
    .unwrap();
}

/// Writes a legacy `docker save` archive's tree of `imgs` under `dir` (uncompressed
/// layers as `ID/layer.tar`, configs as `HEX.json`, names in `manifest.json`).
fn docker_save_tree(imgs: &Images, dir: &Path) {
    let mut ids = Vec::new();
    for (i, (raw, _)) in imgs.layers.iter().enumerate() {
        let id = hex(&Sha256::digest(format!("layer-id-{i}")));
        fs::create_dir_all(dir.join(&id)).unwrap();
        fs::write(dir.join(&id).join("layer.tar"), raw).unwrap();
        ids.push(format!("{id}/layer.tar"));
    }
    let mut manifest = Vec::new();
    for (i, (tags, n)) in
        [(vec!["img-a:1"], 3), (vec!["img-b:2", "img-b:latest"], 1)].into_iter().enumerate()
    {
        let c = &imgs.configs[i];
        let name = format!("{}.json", &sha256(c)[7..]);
        fs::write(dir.join(&name), c).unwrap();
        manifest.push(json!({"Config": name, "RepoTags": tags, "Layers": ids[..n]}));
    }
    fs::write(dir.join("manifest.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();
}

/// A tar of the directory `dir`, as `docker save` or `skopeo` write one.
fn tar_dir(dir: &Path, out: &Path) {
    let ok = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .args(["-cf"])
        .arg(out)
        .arg(".")
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn scan_image(tree: &NodeTree, image: &Path, extra: &[&str]) -> Out {
    let mut args = vec!["scan", "--image", path_arg(image), "--format", "json"];
    args.extend_from_slice(extra);
    tree.run(&args)
}

/// The findings of the Secret key `name` among `found`.
fn of<'a>(found: &'a [Finding], name: &str) -> Vec<&'a Finding> {
    found.iter().filter(|f| f.key == name).collect()
}

/// Every form of the archive: OCI layout dir, tar and zstd-compressed tar, docker save
/// dir, tar and gzip-compressed tar. Each
/// planted value is found once, at its layer's digest and path, with the images that
/// hold the layer, the whiteout-deleted ones noted; exit 1; the archive unchanged.
#[test]
fn image_archives_are_scanned_layer_by_layer() {
    let tree = NodeTree::new();
    let imgs = images(&tree);
    let p = &imgs.planted;
    let secret = Secret::opaque(
        "app",
        "s",
        &[
            ("token", &p.token),
            ("old", &p.deleted_in_a),
            ("hidden", &p.hidden),
            ("env", &p.env),
            ("arg", &p.build_arg),
        ],
    );
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let l = |i: usize| sha256(&imgs.layers[i].1);
    let diff = |i: usize| sha256(&imgs.layers[i].0);
    let oci_dir = tree.work("oci");
    oci_layout(&imgs, &oci_dir);
    let oci_tar = tree.work("oci.tar");
    tar_dir(&oci_dir, &oci_tar);
    let save_dir = tree.work("save");
    docker_save_tree(&imgs, &save_dir);
    let save_tar = tree.work("save.tar");
    tar_dir(&save_dir, &save_tar);
    // `docker save | gzip` and an OCI tar by zstd: read in place as well.
    let save_gz = tree.work("save.tar.gz");
    fs::write(&save_gz, gz(&fs::read(&save_tar).unwrap())).unwrap();
    let oci_zst = tree.work("oci.tar.zst");
    fs::write(&oci_zst, zst(&fs::read(&oci_tar).unwrap())).unwrap();
    let config_a = sha256(&imgs.configs[0]);
    for (input, oci) in [
        (&oci_dir, true),
        (&oci_tar, true),
        (&oci_zst, true),
        (&save_dir, false),
        (&save_tar, false),
        (&save_gz, false),
    ] {
        let before = fs::read(input).ok();
        let out = scan_image(&tree, input, &["--secrets", path_arg(&secrets), "--no-rules"]);
        out.assert_code(1);
        let found = out.findings();
        let ctx = input.display().to_string();
        // A layer's digest: the blob's in an OCI layout, the uncompressed one (the
        // config's diff_ids) in a legacy docker save.
        let layer = |i| if oci { l(i) } else { diff(i) };
        let (a, b) = if oci {
            ("docker.io/library/img-a:1", "docker.io/library/img-b:2")
        } else {
            ("img-a:1", "img-b:2")
        };
        let token = of(&found, "token");
        assert_eq!(token.len(), 1, "{ctx}: {found:#?}");
        assert_eq!(token[0].path, format!("{}/etc/app/token", layer(0)), "{ctx}");
        assert_eq!(token[0].site, "image-archive");
        assert_eq!(token[0].category, "image-layer");
        let names: Vec<&str> = token[0].raw["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(names.contains(&a) && names.contains(&b), "{ctx}: {names:?}");
        assert!(token[0].raw.get("note").is_none(), "{ctx}");
        let old = of(&found, "old");
        assert_eq!(old.len(), 1, "{ctx}");
        assert_eq!(old[0].path, format!("{}/etc/app/old", layer(0)));
        assert!(
            old[0].raw["note"].as_str().unwrap().contains("in some of the images"),
            "{ctx}: {:?}",
            old[0].raw
        );
        let hidden = of(&found, "hidden");
        assert_eq!(hidden[0].path, format!("{}/opt/cache/k", layer(1)), "{ctx}");
        assert!(
            hidden[0].raw["note"].as_str().unwrap().starts_with("deleted by a later layer"),
            "{ctx}"
        );
        let names: Vec<&str> = hidden[0].raw["images"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(names, [a], "{ctx}");
        for key in ["env", "arg"] {
            let f = of(&found, key);
            assert_eq!(f.len(), 1, "{ctx}: {key}");
            assert_eq!(
                (f[0].path.as_str(), f[0].category.as_str()),
                (config_a.as_str(), "image-config"),
                "{ctx}"
            );
        }
        assert_eq!(found.len(), 5, "{ctx}: {found:#?}");
        assert_eq!(out.json()["root"], path_arg(input), "{ctx}");
        assert_eq!(out.json()["cri"]["status"], "disabled");
        assert_eq!(fs::read(input).ok(), before, "{ctx}: the archive is unchanged");
        // The table names the layer, and the exit status follows --fail-on.
        let table = tree.run(&[
            "scan",
            "--image",
            path_arg(input),
            "--secrets",
            path_arg(&secrets),
            "--fail-on",
            "critical",
        ]);
        table.assert_code(0);
    }
}

/// Hostile archives: a layer whose member names climb out (`../../`), absolute names,
/// symlinks and hard links pointing at the host's files, a gzip bomb with a value at its
/// end, a blob cut short, a digest that names a path outside `blobs/`: the value is
/// found where it is, nothing is written or followed, problems are errors in the report.
#[test]
fn hostile_image_archives() {
    let tree = NodeTree::new();
    let value = fake_secret(5100);
    let late = fake_secret(5101);
    tree.guard(&value);
    tree.guard(&late);
    let named = [fake_secret_len(5102, 24), fake_secret_len(5103, 24)];
    for n in &named {
        tree.guard(n);
    }
    let secret = Secret::opaque(
        "app",
        "h",
        &[("value", &value), ("late", &late), ("dir", &named[0]), ("file", &named[1])],
    );
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    // A layer of hand-made members: traversal names, a symlink to /etc/shadow, a hard
    // link, a value under a traversal name.
    let member = |name: &[u8], typ: u8, link: &[u8], data: &[u8]| {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name);
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
        h[156] = typ;
        h[157..157 + link.len()].copy_from_slice(link);
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let mut out = h.to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    };
    let mut layer = Vec::new();
    layer.extend(member(b"../../../../tmp/kresidue-escape", b'0', b"", &value));
    layer.extend(member(b"/etc/cron.d/x", b'0', b"", b"nothing"));
    layer.extend(member(b"shadow", b'2', b"/etc/shadow", b""));
    layer.extend(member(b"hard", b'1', b"/etc/passwd", b""));
    // A directory and a file named by values: each a finding once, the names withheld.
    let dir_name = [b"cfg-".as_slice(), &named[0]].concat();
    layer.extend(member(&[dir_name.as_slice(), b"/"].concat(), b'5', b"", b""));
    for f in [b"a".as_slice(), &named[1]] {
        layer.extend(member(&[dir_name.as_slice(), b"/", f].concat(), b'0', b"", b"x"));
    }
    layer.extend([0u8; 1024]);
    // A gzip bomb: 512 MiB of zeros in a member, then the late value.
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = 512u64 << 20;
    let mut h = member(b"zeros", b'0', b"", b"");
    h[124..135].copy_from_slice(format!("{zeros:011o}").as_bytes());
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h[..512].iter().map(|&b| u64::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    bomb.write_all(&h[..512]).unwrap();
    let block = vec![0u8; 1 << 20];
    for _ in 0..512 {
        bomb.write_all(&block).unwrap();
    }
    bomb.write_all(&member(b"late", b'0', b"", &late)).unwrap();
    bomb.write_all(&[0u8; 1024]).unwrap();
    let bomb = bomb.finish().unwrap();
    assert!(bomb.len() < 2 << 20, "a bomb: {} bytes", bomb.len());
    // A cut blob: a gzip layer missing its second half.
    let whole = gz(&tar_of(&[("a", &filler(3, 200_000))]));
    let cut = whole[..whole.len() / 2].to_vec();
    let dir = tree.work("hostile");
    let put = |b: &[u8]| put_blob(&dir, b);
    // The cut blob is stored under the whole one's digest.
    let whole_digest = put(&whole);
    fs::write(dir.join("blobs/sha256").join(&whole_digest[7..]), &cut).unwrap();
    let layers = json!([
        {"digest": put(&layer), "mediaType": "application/vnd.oci.image.layer.v1.tar"},
        {"digest": put(&bomb), "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"},
        {"digest": sha256(&whole), "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"},
        {"digest": "sha256:../../../../etc/passwd"},
    ]);
    let config = put(br#"{"rootfs":{"diff_ids":[]}}"#);
    let manifest = serde_json::to_vec(
        &json!({"schemaVersion": 2, "config": {"digest": config}, "layers": layers}),
    )
    .unwrap();
    let m = put(&manifest);
    // A manifest whose layers are a string (a value): the error says where, never what.
    let late_text = String::from_utf8(late.clone()).unwrap();
    let odd =
        put(&serde_json::to_vec(&json!({"config": {"digest": config}, "layers": late_text}))
            .unwrap());
    let index = json!({"manifests": [
        {"digest": m, "annotations": {"io.containerd.image.name": "hostile:1"}},
        {"digest": odd},
    ]});
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();

    let out = tree.kr().measure_rss().run(&[
        "scan",
        "--image",
        path_arg(&dir),
        "--secrets",
        path_arg(&secrets),
        "--no-rules",
        "--format",
        "json",
    ]);
    out.assert_code(1);
    let found = out.findings();
    let v = of(&found, "value");
    assert_eq!(v.len(), 1, "{found:#?}");
    assert!(v[0].path.ends_with("/../../../../tmp/kresidue-escape"), "{}", v[0].path);
    assert!(!Path::new("/tmp/kresidue-escape").exists(), "nothing is written");
    let l = of(&found, "late");
    assert_eq!(l.len(), 1, "the value after the bomb's zeros is found");
    for key in ["dir", "file"] {
        let f = of(&found, key);
        assert_eq!(f.len(), 1, "{key}: {found:#?}");
        assert_eq!(f[0].raw["in"], "name");
        assert!(f[0].path.contains("<withheld>"), "{}", f[0].path);
    }
    assert_eq!(found.len(), 4, "{found:#?}");
    let errors = out.json()["errors"].to_string();
    assert!(errors.contains("cut short") || errors.contains("damaged"), "{errors}");
    assert!(errors.contains("malformed digest"), "{errors}");
    assert!(errors.contains("is not the JSON expected (line 1"), "{errors}");
    let rss = out.peak_rss_kb.expect("measured") / 1024;
    assert!(rss < 200, "peak RSS {rss} MiB over a 512 MiB bomb");
}

/// The archives the real runtimes write: `docker save` (Docker 20's legacy layout, or an
/// OCI layout beside `manifest.json` from Docker 25 on), `podman save` as a docker archive
/// and as an OCI archive, and `podman save --format oci-dir`. An image built with a value
/// baked by `RUN`, a value written then deleted by a later `RUN` (a whiteout), an `ENV`
/// and a build argument: each found once, where it is, with the image's tag.
#[test]
fn archives_the_runtimes_save() {
    use crate::util::docker::{self, Dockerd, BASE};
    use crate::util::podman::{self, Podman};
    let tree = NodeTree::new();
    let values: Vec<Vec<u8>> = (0..4).map(|i| fake_secret(5200 + i)).collect();
    for v in &values {
        tree.guard(v);
    }
    let s = |i: usize| String::from_utf8(values[i].clone()).unwrap();
    let secret = Secret::opaque(
        "app",
        "r",
        &[("baked", &values[0]), ("gone", &values[1]), ("env", &values[2]), ("arg", &values[3])],
    );
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let dockerfile = format!(
        "FROM {BASE}\nARG TOKEN\nENV APIKEY={}\nRUN printf '%s\\n' '{}' > /baked && printf '%s' '{}' > /gone\nRUN rm /gone && echo $TOKEN > /dev/null\n",
        s(2),
        s(0),
        s(1)
    );
    let check = |archive: &Path, tag: &str, ctx: &str| {
        let out = scan_image(&tree, archive, &["--secrets", path_arg(&secrets), "--no-rules"]);
        out.assert_code(1);
        let found = out.findings();
        // The RUN lines that wrote the values are in the config's history too.
        let one = |key: &str| {
            let f: Vec<&Finding> =
                of(&found, key).into_iter().filter(|f| f.category == "image-layer").collect();
            assert_eq!(f.len(), 1, "{ctx}: {key}: {found:#?}");
            f[0].clone()
        };
        let baked = one("baked");
        assert!(
            baked.path.ends_with("/baked") && baked.path.starts_with("sha256:"),
            "{ctx}: {}",
            baked.path
        );
        let images = baked.raw["images"].to_string();
        assert!(images.contains(tag), "{ctx}: {images}");
        let gone = one("gone");
        assert!(
            gone.raw["note"].as_str().unwrap_or("").starts_with("deleted by a later layer"),
            "{ctx}: {:?}",
            gone.raw
        );
        for key in ["baked", "gone", "env", "arg"] {
            let config = of(&found, key).into_iter().filter(|f| f.category == "image-config");
            assert_eq!(config.count(), 1, "{ctx}: {key} in the config: {found:#?}");
        }
    };
    if docker::available("archives_the_runtimes_save (Docker)") {
        let d = Dockerd::start("/var/lib/docker");
        d.import_base();
        d.build("kr-saved:1", &dockerfile, &[("TOKEN", &s(3))]);
        let out = d.scratch("save").join("saved.tar");
        d.must(&["save", "-o", out.to_str().unwrap(), "kr-saved:1"]);
        check(&out, "kr-saved:1", "docker save");
    }
    if podman::available("archives_the_runtimes_save (Podman)") {
        let p = Podman::new("/var/lib/containers/storage");
        p.import_base();
        p.build("localhost/kr-saved:2", &dockerfile, &[("TOKEN", &s(3))]);
        for format in ["docker-archive", "oci-archive", "oci-dir"] {
            let out = p.scratch("save").join(format);
            p.must(&[
                "save",
                "--format",
                format,
                "-o",
                out.to_str().unwrap(),
                "localhost/kr-saved:2",
            ]);
            check(&out, "kr-saved:2", &format!("podman save --format {format}"));
        }
    }
}

/// A layer of ten million members (gzip members of identical headers, concatenated:
/// 5 GB of tar in a few megabytes), a value in the first member: the scan reads until its
/// `--timeout`, says the report is incomplete, finds the value, and stays small.
#[test]
fn a_layer_of_ten_million_members_is_bounded() {
    let tree = NodeTree::new();
    let value = fake_secret(5300);
    tree.guard(&value);
    let secret = Secret::opaque("app", "m", &[("value", &value)]);
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let first = tar_of(&[("first", &value)]);
    let first = &first[..first.len() - 1024]; // without its end-of-archive blocks
    let empty = tar_of(&[("f", b"")]);
    let header = &empty[512..1024]; // `./f` (after `./`)
    let batch: Vec<u8> = header.repeat(10_000);
    let batch = gz(&batch);
    let mut layer = gz(first);
    for _ in 0..1000 {
        layer.extend_from_slice(&batch);
    }
    layer.extend(gz(&[0u8; 1024]));
    let dir = tree.work("many");
    one_layer_image(&dir, &layer);
    let started = std::time::Instant::now();
    let out = tree.kr().measure_rss().run(&[
        "scan",
        "--image",
        path_arg(&dir),
        "--secrets",
        path_arg(&secrets),
        "--format",
        "json",
        "--timeout",
        "10s",
    ]);
    out.assert_code(1);
    assert!(started.elapsed() < std::time::Duration::from_secs(90), "{:?}", started.elapsed());
    assert_eq!(out.json()["summary"]["incomplete"], true);
    assert_eq!(of(&out.findings(), "value").len(), 1);
    let rss = out.peak_rss_kb.expect("measured") / 1024;
    assert!(rss < 120, "peak RSS {rss} MiB");
}

/// Makes `disk` (raw) and `disk.qcow2`: a GPT disk whose first partition is an empty EFI
/// system partition and whose second is a filesystem made unprivileged from `root`: ext4
/// with `mkfs.ext4 -d`, or XFS (`xfs`) with `mkfs.xfs -p` (scripts/xfs-image.sh).
fn node_disk(root: &Path, disk: &Path, kind: &str) -> std::path::PathBuf {
    let run = |c: &mut Command| {
        let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(out.status.success(), "{c:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let fs = disk.with_extension(kind);
    match kind {
        "xfs" => run(Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/xfs-image.sh"))
            .arg(root)
            .arg(&fs)
            .arg("96M")),
        _ => run(Command::new("mkfs.ext4").args(["-q", "-F", "-d"]).arg(root).arg(&fs).arg("96M")),
    }
    run(Command::new("truncate").args(["-s", "104M"]).arg(disk));
    let table = "label: gpt\nstart=2048, size=8192, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B\nstart=10240, size=196608, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n";
    let mut sf = Command::new("sfdisk");
    sf.arg("-q").arg(disk).stdin(std::process::Stdio::piped());
    let mut child = sf.spawn().unwrap();
    child.stdin.take().unwrap().write_all(table.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    run(Command::new("dd")
        .arg(format!("if={}", fs.display()))
        .arg(format!("of={}", disk.display()))
        .args(["bs=1M", "seek=5", "conv=notrunc,sparse", "status=none"]));
    fs::remove_file(&fs).unwrap();
    let qcow = disk.with_extension("qcow2");
    run(Command::new("qemu-img").args(["convert", "-O", "qcow2"]).arg(disk).arg(&qcow));
    qcow
}

/// A finding as [`same`] sees it: path (partition left out), id, site, category,
/// severity, count, record.
type Same = (String, String, String, String, String, u64, String);

/// The findings as [`same`] sees them.
fn same_set(found: &[Finding]) -> std::collections::BTreeSet<Same> {
    found.iter().map(same).collect()
}

/// What a finding is, but for where its path says it is: compared between a scan of the
/// tree and of its disk image.
fn same(f: &Finding) -> Same {
    let path = f.path.strip_prefix("p2:").unwrap_or(&f.path).to_owned();
    let record = f.raw.get("record").map(|r| r.to_string()).unwrap_or_default();
    let id = f.id.clone().unwrap_or_default();
    (
        path,
        id,
        f.site.clone(),
        f.category.clone(),
        f.severity.clone(),
        f.raw["count"].as_u64().unwrap_or(0),
        record,
    )
}

/// A node's disk: kubelet's Secret volume (atomic writer, and a stale copy), a subPath
/// copy, an emptyDir, a pod log and its rotated `.gz`, kine's database and its log where
/// k3s keeps them (values split across overflow pages), as an ext4 filesystem in the
/// second partition of a GPT disk, raw and qcow2, the same with XFS, and as a root
/// filesystem tarball. `scan --image` of each finds exactly what
/// `scan --root` finds over the tree (ids, sites, categories, severities, counts, records),
/// its paths named `p2:`; the empty EFI partition is an `errors` entry; nothing is
/// written beside the image, and the image is unchanged. As root, the ext4 and XFS
/// partitions loop-mounted by the kernel and scanned with `--root` find the same.
#[test]
fn node_disk_images_are_scanned_as_mounted() {
    let made = crate::datastores::make_db();
    let tree = crate::datastores::node_with(made.dir.path(), "/var/lib/rancher/k3s/server/db");
    let mut secrets = made.secrets.clone();
    let vals: Vec<Vec<u8>> = (0..5).map(|i| fake_secret(5400 + i)).collect();
    secrets.push(Secret::opaque(
        "app",
        "disk",
        &[
            ("vol", &vals[0]),
            ("stale", &vals[1]),
            ("sub", &vals[2]),
            ("log", &vals[3]),
            ("gz", &vals[4]),
        ],
    ));
    let pod = tree.pod("0d15c0de-0000-4000-8000-000000000001");
    pod.secret_volume("creds").key("vol", &vals[0]).stale_copy(
        "..2024_01_01_00_00_00.1",
        "vol",
        &vals[1],
    );
    pod.subpath("creds", "app", 0, &vals[2]);
    pod.empty_dir_file("scratch", "note", b"nothing here");
    pod.log(
        "app",
        "web",
        "main",
        "0.log",
        &[b"2024-01-01T00:00:00Z stdout F token=".as_slice(), &vals[3], b"\n"].concat(),
    );
    pod.log(
        "app",
        "web",
        "main",
        "0.log.20240101-000000.gz",
        &gz(&[b"2024-01-01T00:00:00Z stdout F pw=".as_slice(), &vals[4], b"\n"].concat()),
    );
    tree.write("/etc/hostname", b"node-7\n");
    let file = tree.secrets_file("secrets.json", &secrets);
    let mounted = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    mounted.assert_code(1);
    let want = same_set(&mounted.findings());
    assert!(want.len() >= 60, "{}", want.len());
    let disk = tree.work("node.img");
    let qcow = node_disk(tree.root(), &disk, "ext4");
    let xfs = tree.work("xfs.img");
    let xfs_qcow = node_disk(tree.root(), &xfs, "xfs");
    // The same tree as a root filesystem tarball (GNU tar; read in place, not unpacked).
    let rootfs = tree.work("root.tar");
    let mut tar = Command::new("tar");
    assert!(tar
        .arg("-C")
        .arg(tree.root())
        .arg("-cf")
        .arg(&rootfs)
        .arg(".")
        .status()
        .unwrap()
        .success());
    // And compressed, by gzip and by zstd (read in place too: inflated once to index it,
    // then from checkpoints).
    let rootfs_gz = tree.work("root.tar.gz");
    fs::write(&rootfs_gz, gz(&fs::read(&rootfs).unwrap())).unwrap();
    let rootfs_zst = tree.work("root.tar.zst");
    fs::write(&rootfs_zst, zst(&fs::read(&rootfs).unwrap())).unwrap();
    for image in [&disk, &qcow, &xfs, &xfs_qcow, &rootfs, &rootfs_gz, &rootfs_zst] {
        let before = fs::metadata(image).unwrap().len();
        let out = scan_image(&tree, image, &["--secrets", path_arg(&file)]);
        out.assert_code(1);
        let found = out.findings();
        if [&rootfs, &rootfs_gz, &rootfs_zst].contains(&image) {
            assert!(found.iter().all(|f| f.path.starts_with('/')), "{}", image.display());
            let got = same_set(&found);
            assert_eq!(got, want, "{}", image.display());
            continue;
        }
        assert!(found.iter().all(|f| f.path.starts_with("p2:/")), "{}", image.display());
        let got = same_set(&found);
        let missing: Vec<_> = want.difference(&got).collect();
        let extra: Vec<_> = got.difference(&want).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{}: missing {missing:#?}\nextra {extra:#?}",
            image.display()
        );
        let errors = out.json()["errors"].to_string();
        assert!(errors.contains("p1") && errors.contains("no filesystem"), "{errors}");
        assert_eq!(out.json()["summary"]["distributions"], json!(["k3s"]));
        assert_eq!(fs::metadata(image).unwrap().len(), before);
    }
    // As root (CI): the kernel's reading of each filesystem, its partition loop-mounted
    // read-only and scanned with `--root`, finds the same.
    if is_root() {
        for image in [&disk, &xfs] {
            let stem = image.file_stem().unwrap().to_str().unwrap();
            let at = tree.work(&format!("mnt-{stem}"));
            let mounted =
                crate::cri::mount(&["-o", "ro,loop,offset=5242880", path_arg(image)], &at);
            let out = tree.kr().run(&[
                "scan",
                "--root",
                path_arg(&at),
                "--no-cri",
                "--secrets",
                path_arg(&file),
                "--format",
                "json",
            ]);
            drop(mounted);
            out.assert_code(1);
            let got = same_set(&out.findings());
            assert_eq!(got, want, "{} mounted", image.display());
        }
    }
}

/// The bundled example node (`fixtures/node`) as images: a gzip root filesystem
/// tarball, and ext4 and XFS disks (raw and qcow2): `scan --image` of each finds exactly
/// what the README's `scan --root fixtures/node` finds.
#[test]
fn the_example_node_as_images() {
    let tree = NodeTree::new();
    let node = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/node");
    let secrets = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/secrets.json");
    let args = ["--secrets", path_arg(&secrets), "--no-cri", "--format", "json"];
    let mounted = tree.run(&[&["scan", "--root", path_arg(&node)][..], &args].concat());
    mounted.assert_code(1);
    let want = same_set(&mounted.findings());
    assert!(want.len() >= 5, "{want:?}");
    let tgz = tree.work("node.tar.gz");
    let mut tar = Command::new("tar");
    tar.arg("-C").arg(&node).arg("-czf").arg(&tgz).arg(".");
    assert!(tar.status().unwrap().success());
    let ext4 = tree.work("ext4.img");
    let ext4_qcow = node_disk(&node, &ext4, "ext4");
    let xfs = tree.work("xfs.img");
    let xfs_qcow = node_disk(&node, &xfs, "xfs");
    for image in [&tgz, &ext4, &ext4_qcow, &xfs, &xfs_qcow] {
        let out = scan_image(&tree, image, &args[..2]);
        out.assert_code(1);
        let got = same_set(&out.findings());
        assert_eq!(got, want, "{}", image.display());
    }
}

/// Hostile disk images: kubelet's dir a symlink to another dir of the image (followed
/// inside the image, as on a node), a symlink loop, a directory nested 300 deep, a disk
/// cut short in the middle of its filesystem, a disk of nothing kresidue reads (one line,
/// exit 2), an LVM physical volume named: no panic, no hang, the image unchanged.
#[test]
fn hostile_disk_images() {
    let tree = NodeTree::new();
    let v = fake_secret(5500);
    tree.guard(&v);
    let secret = Secret::opaque("app", "h", &[("v", &v)]);
    let file = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    // The kubelet dir moved to /data and linked back, as some nodes do.
    tree.write("/data/kubelet/pods/0d15c0de-0000-4000-8000-000000000002/volumes/kubernetes.io~secret/s/..2024_01_01_00_00_00.1/v", &v);
    tree.symlink("/data/kubelet/pods/0d15c0de-0000-4000-8000-000000000002/volumes/kubernetes.io~secret/s/..data", "..2024_01_01_00_00_00.1");
    tree.symlink(
        "/data/kubelet/pods/0d15c0de-0000-4000-8000-000000000002/volumes/kubernetes.io~secret/s/v",
        "..data/v",
    );
    for p in ["/var/lib/kubelet", "/var/log/pods"] {
        let _ = fs::remove_dir_all(tree.host(p));
    }
    tree.symlink("/var/lib/kubelet", "../../data/kubelet");
    tree.symlink("/var/log/pods", "/var/log/pods");
    let deep: String = (0..300).map(|i| format!("d{i}/")).collect();
    tree.write(format!("/var/lib/rancher/k3s/{deep}f"), b"x");
    let mounted = tree.scan(&["--secrets", path_arg(&file), "--format", "json"]);
    let want = same_set(&mounted.findings());
    assert_eq!(want.len(), 1, "{want:?}");
    let disk = tree.work("node.img");
    let qcow = node_disk(tree.root(), &disk, "ext4");
    let xfs = node_disk(tree.root(), &tree.work("xfs.img"), "xfs");
    for image in [&qcow, &xfs] {
        let out = scan_image(&tree, image, &["--secrets", path_arg(&file)]);
        let got = same_set(&out.findings());
        assert_eq!(got, want, "{}", image.display());
    }
    // Cut in the middle of the filesystem: what can be read is, the rest is in `errors`.
    let cut = tree.work("cut.img");
    let bytes = fs::read(&disk).unwrap();
    fs::write(&cut, &bytes[..(10 << 20)]).unwrap();
    let out = scan_image(&tree, &cut, &["--secrets", path_arg(&file)]);
    assert!(out.code == 0 || out.code == 1 || out.code == 2, "{}", out.code);
    if out.code == 2 {
        out.assert_one_line_error();
    }
    // Nothing readable: one line, exit 2, naming what was found.
    let lvm = tree.work("lvm.img");
    let mut img = vec![0u8; 4 << 20];
    img[512..520].copy_from_slice(b"LABELONE");
    fs::write(&lvm, &img).unwrap();
    let out = scan_image(&tree, &lvm, &["--secrets", path_arg(&file)]);
    out.assert_one_line_error();
    assert!(out.stderr_str().contains("LVM"), "{}", out.stderr_str());
    // Compressed, and no tar inside; or cut short: one line, naming the compression.
    let tgz = tree.work("root.tar.gz");
    let mut not_tar = vec![7u8; 4096];
    not_tar.extend_from_slice(&v);
    fs::write(&tgz, gz(&not_tar)).unwrap();
    let out = scan_image(&tree, &tgz, &["--secrets", path_arg(&file)]);
    out.assert_one_line_error();
    assert!(out.stderr_str().contains("gzip-compressed: "), "{}", out.stderr_str());
    let whole = zst(&tar_of(&[("etc/hostname", b"n"), ("var/lib/kubelet/x", &v)]));
    fs::write(&tgz, &whole[..whole.len() / 2]).unwrap();
    let out = scan_image(&tree, &tgz, &["--secrets", path_arg(&file)]);
    out.assert_one_line_error();
    assert!(out.stderr_str().contains("zstd-compressed: "), "{}", out.stderr_str());
    let empty = tree.work("zeros.img");
    fs::write(&empty, vec![0u8; 1 << 20]).unwrap();
    scan_image(&tree, &empty, &["--secrets", path_arg(&file)]).assert_one_line_error();
}

/// A layer of one member of 6 GiB of zeros (repeated gzip members: 6 MiB on disk) over
/// `--max-file-size`: skipping it stops at `--timeout`, far before it is all inflated;
/// and indexing it as a compressed root filesystem tarball too.
#[test]
fn skipping_a_huge_member_stops_at_the_deadline() {
    let tree = NodeTree::new();
    let secret = Secret::opaque("app", "k", &[("v", fake_secret(5600))]);
    let secrets = tree.secrets_file("secrets.json", std::slice::from_ref(&secret));
    let size = 6u64 << 30;
    let mut h = tar_of(&[("x", b"")])[512..1024].to_vec();
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let zeros = gz(&vec![0u8; 64 << 20]);
    let mut layer = gz(&h);
    for _ in 0..(size >> 26) {
        layer.extend_from_slice(&zeros);
    }
    let dir = tree.work("huge");
    one_layer_image(&dir, &layer);
    let started = std::time::Instant::now();
    let out = tree.run(&[
        "scan",
        "--image",
        path_arg(&dir),
        "--secrets",
        path_arg(&secrets),
        "--format",
        "json",
        "--max-file-size",
        "1M",
        "--timeout",
        "3s",
    ]);
    out.assert_code(0);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    assert_eq!(out.json()["summary"]["incomplete"], true);
    // A root filesystem tarball of one such member of 64 GiB (a gzip bomb: 64 MiB on
    // disk): its one indexing pass stops at `--timeout` too, in one line, in bounded
    // memory.
    let huge = 64u64 << 30;
    // GNU tar's base-256 size (past 8 GiB octal does not reach).
    h[124..136].fill(0);
    h[124] = 0x80;
    h[128..136].copy_from_slice(&huge.to_be_bytes());
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut bomb_gz = gz(&h);
    for _ in 0..(huge >> 26) {
        bomb_gz.extend_from_slice(&zeros);
    }
    let bomb = tree.work("bomb.tar.gz");
    fs::write(&bomb, &bomb_gz).unwrap();
    let started = std::time::Instant::now();
    let out = tree.kr().measure_rss().run(&[
        "scan",
        "--image",
        path_arg(&bomb),
        "--secrets",
        path_arg(&secrets),
        "--timeout",
        "3s",
    ]);
    out.assert_code(2).assert_one_line_error();
    assert!(out.stderr_str().contains("--timeout"), "{}", out.stderr_str());
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    let rss = out.peak_rss_kb.expect("measured") / 1024;
    assert!(rss < 150, "peak RSS {rss} MiB");
}
