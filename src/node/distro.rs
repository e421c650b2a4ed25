//! The settings that move a distribution's places (see [`crate::distros`]): a top-level
//! key of a flat YAML file of flags (k3s's and RKE2's `config.yaml`), and a command-line
//! flag in a systemd unit or an args file (k0s's unit, MicroK8s's `args/`). Both read
//! only what they need: a value that is not a plain path (a YAML list or map, a flag value
//! with a variable no one defines) names nothing.

/// The longest value kept: a path.
const MAX_VALUE: usize = 4096;

/// The scalar of the top-level `key` in the YAML text `text` (`key: value`, the value
/// plain, single- or double-quoted, a plain one ended by ` #`): the last one when the
/// document repeats it, as YAML loaders that allow duplicates keep. `None` when the key is
/// not there, or its value is not a scalar on the key's line (a list, a map, a block).
/// k3s reads its config as a map of flag names to values (`pkg/configfilearg`); a flat
/// file is all it takes.
pub fn yaml_scalar(text: &[u8], key: &str) -> Option<String> {
    let text = String::from_utf8_lossy(text);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(key) else { continue };
        // The key, then blanks, then `:` and a blank or the end (YAML's mapping indicator).
        let Some(rest) = rest.trim_start_matches([' ', '\t']).strip_prefix(':') else {
            continue;
        };
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        found = scalar(rest.trim_matches([' ', '\t', '\r']));
    }
    found.filter(|v: &String| !v.is_empty() && v.len() <= MAX_VALUE)
}

/// A YAML scalar written on one line: quoted, or plain up to a comment.
fn scalar(v: &str) -> Option<String> {
    if let Some(inner) = v.strip_prefix('"') {
        let end = inner.find('"')?;
        let s = &inner[..end];
        // An escape is no path kresidue can tell: named nothing.
        return (!s.contains('\\')).then(|| s.to_owned());
    }
    if let Some(inner) = v.strip_prefix('\'') {
        return Some(inner.split_once('\'')?.0.replace("''", "'"));
    }
    let plain = v.split([' ', '\t']).take_while(|w| !w.starts_with('#'));
    let plain = plain.collect::<Vec<_>>().join(" ");
    // A flow collection, an alias, a block scalar, a tag or null names no path.
    let refused = plain.starts_with(['[', '{', '&', '*', '!', '|', '>', '#'])
        || ["~", "null", "Null", "NULL"].contains(&plain.as_str());
    (!refused && !plain.is_empty()).then(|| plain.to_owned())
}

/// The value of the command-line `flag` (with its dashes) in `text`, a systemd unit or an
/// args file: `--flag=value` or `--flag value`, the last one given winning, as a command
/// line's flags do; quotes around the value removed; `${VAR}` and `$VAR` replaced by
/// `vars`. `None` when it is not there, or its value holds a variable `vars` does not
/// define. A line ended by `\` goes on on the next.
pub fn flag_value(text: &[u8], flag: &str, vars: &[(&str, &str)]) -> Option<String> {
    let text = String::from_utf8_lossy(text).replace("\\\r\n", " ").replace("\\\n", " ");
    let mut found = None;
    // A comment line (systemd's `#` and `;`) gives no flag.
    let lines = text.lines().filter(|l| !l.trim_start().starts_with(['#', ';']));
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let value = match w.strip_prefix(flag) {
                Some(v) if v.starts_with('=') => Some(&v[1..]),
                Some("") => words.get(i + 1).copied(),
                _ => None,
            };
            if let Some(v) = value {
                found = Some(expand(v.trim_matches(['"', '\'']), vars));
            }
        }
    }
    found.flatten().filter(|v| !v.is_empty() && v.len() <= MAX_VALUE)
}

/// `v` with its `${VAR}` and `$VAR` replaced by `vars`; `None` when one is not defined.
fn expand(v: &str, vars: &[(&str, &str)]) -> Option<String> {
    let mut out = String::new();
    let mut rest = v;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(inner) => {
                let end = inner.find('}')?;
                (&inner[..end], &inner[end + 1..])
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        let value = vars.iter().find(|(n, _)| *n == name)?.1;
        out.push_str(value);
        rest = tail;
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_scalars_of_a_flat_config() {
        let doc = b"# k3s\nwrite-kubeconfig-mode: \"0644\"\ndata-dir: /data/k3s # moved\n\
            node-label:\n  - a=b\n  data-dir: /nested\n";
        assert_eq!(yaml_scalar(doc, "data-dir").as_deref(), Some("/data/k3s"));
        assert_eq!(yaml_scalar(b"data-dir: '/x y'\n", "data-dir").as_deref(), Some("/x y"));
        assert_eq!(yaml_scalar(b"data-dir: \"/q\"\r\n", "data-dir").as_deref(), Some("/q"));
        assert_eq!(yaml_scalar(b"data-dir: /t\t# c\n", "data-dir").as_deref(), Some("/t"));
        assert_eq!(
            yaml_scalar("\u{feff}data-dir: /b\n".as_bytes(), "data-dir").as_deref(),
            Some("/b")
        );
        assert_eq!(yaml_scalar(b"data-dir: /a\ndata-dir: /b\n", "data-dir").as_deref(), Some("/b"));
        for none in [
            &b"data-dir:\n  - /x\n"[..],
            b"data-dir: [/x]\n",
            b"data-dirs: /x\n",
            b"data-dir:/x\n",
            b"data-dir: \"/x\\n\"\n",
            b"data-dir: *a\n",
            b"data-dir: ~\n",
            b"",
        ] {
            assert_eq!(yaml_scalar(none, "data-dir"), None, "{}", String::from_utf8_lossy(none));
        }
    }

    #[test]
    fn flags_of_a_unit_and_an_args_file() {
        let unit = b"[Service]\nExecStart=/usr/local/bin/k0s controller \\\n  --data-dir=/srv/k0s \
            --single=true\n";
        assert_eq!(flag_value(unit, "--data-dir", &[]).as_deref(), Some("/srv/k0s"));
        let args = b"--root ${SNAP_COMMON}/var/lib/containerd\n--state \"$SNAP_COMMON/run/c\"\n";
        let vars = [("SNAP_COMMON", "/var/snap/microk8s/common")];
        assert_eq!(
            flag_value(args, "--root", &vars).as_deref(),
            Some("/var/snap/microk8s/common/var/lib/containerd")
        );
        assert_eq!(
            flag_value(args, "--state", &vars).as_deref(),
            Some("/var/snap/microk8s/common/run/c")
        );
        assert_eq!(flag_value(args, "--root", &[]), None, "an undefined variable");
        assert_eq!(flag_value(b"--root-dir=/a\n", "--root", &[]), None, "another flag");
        assert_eq!(flag_value(b"--root=/a --root=/b\n", "--root", &[]).as_deref(), Some("/b"));
        let commented = b"--root=/a\n# --root=/old\n";
        assert_eq!(flag_value(commented, "--root", &[]).as_deref(), Some("/a"));
        let crlf = b"ExecStart=/k0s \\\r\n --data-dir=/d\r\n";
        assert_eq!(flag_value(crlf, "--data-dir", &[]).as_deref(), Some("/d"));
    }
}
