//! Picking a few strings out of a runtime's JSON records (an OCI spec's annotations,
//! CRI-O's `containers.json`, Docker's `config.v2.json`) as the parser reads them, without
//! building the document: everything not picked is skipped by the parser unheld, so a
//! 64 MiB record file costs a read buffer and the strings picked, not gigabytes of
//! `serde_json::Value`.
//!
//! What is picked reads as indexing a `Value` would: the string (or the boolean, as
//! `true` or `false`) at a path of object keys (the last of duplicate keys wins), or
//! nothing when the value there is another type, a key on the way is missing or not an
//! object.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// Longest string kept: ids, uids, names and labels are far shorter (a pod name is at most
/// 253 bytes); a longer value is not one of them, and keeping it would let a crafted file
/// make each pick as large as the file.
pub const MAX_TEXT: usize = 4096;

/// A path of object keys from a value to a string inside it.
pub type Path<'p> = &'p [&'p str];

/// The strings at `paths` in the JSON value `d` reads, in the order of `paths`.
pub struct Pick<'p> {
    /// Where the strings are.
    pub paths: &'p [Path<'p>],
}

impl<'de> DeserializeSeed<'de> for Pick<'_> {
    type Value = Vec<Option<String>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// Drops a sequence's or an object's remaining parts unheld.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    skipped(&mut seq).map(|_| ())
}

/// Skips the rest of a list; whether there was any.
fn skipped<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<bool, A::Error> {
    let mut any = false;
    while seq.next_element::<IgnoredAny>()?.is_some() {
        any = true;
    }
    Ok(any)
}

/// The elements a capped list reader kept, and whether it left some out (the list had
/// more than its cap).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capped<T> {
    /// The elements kept, in order.
    pub items: Vec<T>,
    /// Whether elements past the cap were parsed and dropped.
    pub cut: bool,
}

impl<'de> Visitor<'de> for Pick<'_> {
    type Value = Vec<Option<String>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        // A string is what a path ends at (an empty path).
        let keep = (v.len() <= MAX_TEXT).then(|| v.to_owned());
        Ok(self.paths.iter().map(|p| if p.is_empty() { keep.clone() } else { None }).collect())
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        // A boolean too (Docker's `State.Running`), as `true` or `false`.
        let keep = Some(v.to_string());
        Ok(self.paths.iter().map(|p| if p.is_empty() { keep.clone() } else { None }).collect())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(vec![None; self.paths.len()])
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(vec![None; self.paths.len()])
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(vec![None; self.paths.len()])
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(vec![None; self.paths.len()])
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq)?;
        Ok(vec![None; self.paths.len()])
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = vec![None; self.paths.len()];
        while let Some(key) = map.next_key_seed(Key { paths: self.paths })? {
            let Some(key) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            // The paths through this key, continued below it.
            let (at, rest): (Vec<usize>, Vec<Path<'_>>) = self
                .paths
                .iter()
                .enumerate()
                .filter(|(_, p)| p.first() == Some(&key))
                .map(|(i, p)| (i, &p[1..]))
                .unzip();
            let found = map.next_value_seed(Pick { paths: &rest })?;
            for (i, v) in at.into_iter().zip(found) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// An object key, compared with the first keys of the paths as the parser reads it: the
/// one it is, or `None` for a key no path takes (nothing is kept of it).
struct Key<'p> {
    paths: &'p [Path<'p>],
}

impl<'de, 'p> DeserializeSeed<'de> for Key<'p> {
    type Value = Option<&'p str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'p> Visitor<'_> for Key<'p> {
    type Value = Option<&'p str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.paths.iter().filter_map(|p| p.first().copied()).find(|k| *k == v))
    }
}

/// The strings at `paths` in the JSON document `json`; `None` when it is not JSON.
pub fn pick_slice(json: &[u8], paths: &[Path<'_>]) -> Option<Vec<Option<String>>> {
    let mut d = serde_json::Deserializer::from_slice(json);
    let picked = Pick { paths }.deserialize(&mut d).ok()?;
    d.end().ok()?;
    Some(picked)
}

/// The strings at `paths` in the JSON document read from `json`, parsed as it is read;
/// `None` when it is not JSON.
pub fn pick_reader(
    json: &mut dyn std::io::Read,
    paths: &[Path<'_>],
) -> Option<Vec<Option<String>>> {
    let mut d = serde_json::Deserializer::from_reader(json);
    let picked = Pick { paths }.deserialize(&mut d).ok()?;
    d.end().ok()?;
    Some(picked)
}

/// The strings at `paths` in each element of the JSON list read from `json` (parsed as it
/// is read), for at most `max` elements (the rest are parsed and skipped); `None` when
/// it is not a JSON list.
pub fn pick_each(
    json: &mut dyn std::io::Read,
    paths: &[Path<'_>],
    max: usize,
) -> Option<Capped<Vec<Option<String>>>> {
    struct Each<'p> {
        paths: &'p [Path<'p>],
        max: usize,
    }
    impl<'de> Visitor<'de> for Each<'_> {
        type Value = Capped<Vec<Option<String>>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while items.len() < self.max {
                match seq.next_element_seed(Pick { paths: self.paths })? {
                    Some(picked) => items.push(picked),
                    None => return Ok(Capped { items, cut: false }),
                }
            }
            Ok(Capped { items, cut: skipped(&mut seq)? })
        }
    }
    let mut d = serde_json::Deserializer::from_reader(json);
    let picked = d.deserialize_seq(Each { paths, max }).ok()?;
    d.end().ok()?;
    Some(picked)
}

/// The `visit_*` methods of the JSON values a visitor takes no part of (booleans,
/// numbers, null), each giving `$value` of type `$ty`.
macro_rules! other_values_give {
    ($ty:ty, $value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<$ty, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<$ty, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<$ty, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<$ty, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> Result<$ty, E> {
            Ok($value)
        }
    };
}

/// The `visit_*` methods of every JSON value but an object (lists skipped unheld), each
/// giving `$value` of type `$ty`: for a visitor that looks into objects only.
macro_rules! non_objects_give {
    ($ty:ty, $value:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<$ty, A::Error> {
            skip_seq(seq)?;
            Ok($value)
        }
        fn visit_str<E>(self, _: &str) -> Result<$ty, E> {
            Ok($value)
        }
        other_values_give!($ty, $value);
    };
}

/// At most `max` strings, each at most [`MAX_TEXT`] bytes (longer ones are dropped),
/// from a JSON value that is a string, or (when `max` > 1) a list of strings; anything
/// else gives none.
struct Strings {
    max: usize,
}

impl<'de> DeserializeSeed<'de> for Strings {
    type Value = Vec<String>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strings {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("strings")
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((v.len() <= MAX_TEXT && self.max > 0).then(|| v.to_owned()).into_iter().collect())
    }

    other_values_give!(Self::Value, Vec::new());

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        // An element is a string or nothing: a list in the list is skipped.
        while self.max > 1 && out.len() < self.max {
            match seq.next_element_seed(Strings { max: 1 })? {
                Some(one) => out.extend(one),
                None => return Ok(out),
            }
        }
        skip_seq(seq)?;
        Ok(out)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Vec::new())
    }
}

/// The `(key, string)` pairs of the objects that are the values of the object at key `at`
/// of the JSON object read from `json` (Docker's `repositories.json`: `Repositories` →
/// repository → reference → image id), at most `max` of them, each part at most
/// [`MAX_TEXT`] bytes, and whether there were more; `None` when it is not JSON.
pub fn pick_nested_pairs(
    json: &mut dyn std::io::Read,
    at: &str,
    max: usize,
) -> Option<Capped<(String, String)>> {
    /// The top object: finds `at`.
    struct Top<'a> {
        at: &'a str,
        max: usize,
    }
    /// An object of objects: the pairs of each inner one.
    struct Outer {
        max: usize,
    }
    /// One inner object's pairs, appended to `out` up to `max` in all.
    struct Inner<'o> {
        out: &'o mut Capped<(String, String)>,
        max: usize,
    }
    impl<'de> Visitor<'de> for Top<'_> {
        type Value = Capped<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Capped::default();
            while let Some(key) = map.next_key::<String>()? {
                if key == self.at {
                    out = map.next_value_seed(Outer { max: self.max })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(out)
        }
    }
    impl<'de> DeserializeSeed<'de> for Outer {
        type Value = Capped<(String, String)>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Outer {
        type Value = Capped<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of objects")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Capped::default();
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value_seed(Inner { out: &mut out, max: self.max })?;
            }
            Ok(out)
        }
        non_objects_give!(Self::Value, Capped::default());
    }
    impl<'de> DeserializeSeed<'de> for Inner<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Inner<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(Strings { max: 1 })?;
                let Some(value) = value.into_iter().next() else { continue };
                if key.len() > MAX_TEXT {
                    continue;
                }
                match self.out.items.len() < self.max {
                    true => self.out.items.push((key, value)),
                    false => self.out.cut = true,
                }
            }
            Ok(())
        }
        non_objects_give!((), ());
    }
    let mut d = serde_json::Deserializer::from_reader(json);
    let pairs = d.deserialize_any(Top { at, max }).ok()?;
    d.end().ok()?;
    Some(pairs)
}

/// At most `per` strings of the list (or the string) at `path`, a path of object keys, in
/// the JSON document read from `json` (an image config's `rootfs.diff_ids`); none when
/// there is none there, `None` when it is not JSON.
pub fn pick_list_at(
    json: &mut dyn std::io::Read,
    path: Path<'_>,
    per: usize,
) -> Option<Vec<String>> {
    struct At<'p> {
        path: Path<'p>,
        per: usize,
    }
    impl<'de> DeserializeSeed<'de> for At<'_> {
        type Value = Vec<String>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            match self.path {
                [] => Strings { max: self.per }.deserialize(d),
                _ => d.deserialize_any(self),
            }
        }
    }
    impl<'de> Visitor<'de> for At<'_> {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                if key == self.path[0] {
                    // The last of duplicate keys wins.
                    out = map.next_value_seed(At { path: &self.path[1..], per: self.per })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(out)
        }
        non_objects_give!(Self::Value, Vec::new());
    }
    let mut d = serde_json::Deserializer::from_reader(json);
    let picked = At { path, per }.deserialize(&mut d).ok()?;
    d.end().ok()?;
    Some(picked)
}

/// In each element of the JSON list read from `json` (at most `max` elements; the rest
/// are parsed and skipped): for each `(key, per)` of `keys`, at most `per` strings at that
/// key, the string there or (when `per` > 1) those of the list there
/// (containers/storage's `images.json`: `id`, `layer`, `names`); `None` when it is not a
/// JSON list.
pub fn pick_each_keys(
    json: &mut dyn std::io::Read,
    keys: &[(&str, usize)],
    max: usize,
) -> Option<Capped<Vec<Vec<String>>>> {
    struct Each<'k> {
        keys: &'k [(&'k str, usize)],
        max: usize,
    }
    struct One<'k> {
        keys: &'k [(&'k str, usize)],
    }
    impl<'de> Visitor<'de> for Each<'_> {
        type Value = Capped<Vec<Vec<String>>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while items.len() < self.max {
                match seq.next_element_seed(One { keys: self.keys })? {
                    Some(picked) => items.push(picked),
                    None => return Ok(Capped { items, cut: false }),
                }
            }
            Ok(Capped { items, cut: skipped(&mut seq)? })
        }
    }
    impl<'de> DeserializeSeed<'de> for One<'_> {
        type Value = Vec<Vec<String>>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for One<'_> {
        type Value = Vec<Vec<String>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = vec![Vec::new(); self.keys.len()];
            while let Some(key) = map.next_key::<String>()? {
                // The last of duplicate keys wins, as indexing a `Value` gives.
                match self.keys.iter().position(|(k, _)| *k == key) {
                    Some(i) => out[i] = map.next_value_seed(Strings { max: self.keys[i].1 })?,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(out)
        }
        // An element that is no object picks nothing (padded below).
        non_objects_give!(Self::Value, Vec::new());
    }
    let mut d = serde_json::Deserializer::from_reader(json);
    let mut picked = d.deserialize_seq(Each { keys, max }).ok()?;
    d.end().ok()?;
    for p in &mut picked.items {
        p.resize(keys.len(), Vec::new());
    }
    Some(picked)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What indexing a `serde_json::Value` gives, for comparison.
    fn by_value(json: &[u8], paths: &[Path<'_>]) -> Option<Vec<Option<String>>> {
        let v: serde_json::Value = serde_json::from_slice(json).ok()?;
        Some(
            paths
                .iter()
                .map(|p| {
                    let mut at = &v;
                    for k in *p {
                        at = &at[*k];
                    }
                    let text = at.as_bool().map(|b| b.to_string());
                    text.or_else(|| at.as_str().filter(|s| s.len() <= MAX_TEXT).map(str::to_owned))
                })
                .collect(),
        )
    }

    #[test]
    fn picks_as_value_indexing_does() {
        let paths: &[Path<'_>] =
            &[&["a"], &["b", "c"], &["b", "d"], &["e"], &["b", "c", "x"], &["f"]];
        for json in [
            &br#"{"a":"1","b":{"c":"2","d":3,"z":[1,{"c":"no"}]},"e":null,"f":"\u0041\n"}"#[..],
            br#"{"a":"1","a":"2","b":"flat"}"#,
            br#"{"a":true,"b":{"c":false,"d":null}}"#,
            br#"{"b":{"c":{"x":"deep"}},"e":[],"f":{}}"#,
            br#"[{"a":"in a list"}]"#,
            br#""top""#,
            br#"{"a":"1"} trailing"#,
            br#"{"a":"1""#,
            b"",
        ] {
            let want = by_value(json, paths);
            assert_eq!(pick_slice(json, paths), want, "{}", String::from_utf8_lossy(json));
            assert_eq!(pick_reader(&mut &json[..], paths), want);
        }
        let long = format!(r#"{{"a":"{}"}}"#, "x".repeat(MAX_TEXT + 1));
        assert_eq!(pick_slice(long.as_bytes(), &[&["a"]]), Some(vec![None]));
    }

    #[test]
    fn picks_each_element_up_to_max() {
        let json = br#"[{"id":"a"},7,{"id":"b","x":{"id":"no"}},{"id":"c"}]"#;
        let each = pick_each(&mut &json[..], &[&["id"]], 3).unwrap();
        assert_eq!(each.items, vec![vec![Some("a".into())], vec![None], vec![Some("b".into())]]);
        assert!(each.cut, "a fourth element was left out");
        assert!(!pick_each(&mut &json[..], &[&["id"]], 4).unwrap().cut);
        assert!(pick_each(&mut &b"{}"[..], &[&["id"]], 3).is_none());
        assert!(pick_each(&mut &b"[1,"[..], &[&["id"]], 1).is_none(), "damaged past the max");
    }

    #[test]
    fn picks_nested_pairs_up_to_max() {
        let json = br#"{"x":{"r":{"no":"1"}},"Repositories":{"a":{"a:1":"i1","a:2":"i2","n":3},
            "b":"flat","c":[{"c:1":"no"}],"d":{"d:1":"i3"}}}"#;
        let all = pick_nested_pairs(&mut &json[..], "Repositories", 10).unwrap();
        let s = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(all.items, vec![s("a:1", "i1"), s("a:2", "i2"), s("d:1", "i3")]);
        assert!(!all.cut);
        let cut = pick_nested_pairs(&mut &json[..], "Repositories", 2).unwrap();
        assert_eq!((cut.items.len(), cut.cut), (2, true));
        let exact = pick_nested_pairs(&mut &json[..], "Repositories", 3).unwrap();
        assert_eq!((exact.items.len(), exact.cut), (3, false));
        assert_eq!(pick_nested_pairs(&mut &b"{}"[..], "Repositories", 2), Some(Capped::default()));
        assert_eq!(pick_nested_pairs(&mut &b"[1]"[..], "Repositories", 2), None);
        assert_eq!(pick_nested_pairs(&mut &b"{\"Repositories\":{"[..], "Repositories", 2), None);
    }

    #[test]
    fn picks_a_list_at_a_path() {
        let at = |j: &[u8], per| pick_list_at(&mut &j[..], &["rootfs", "diff_ids"], per);
        let v = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let config =
            br#"{"history":[{"a":1}],"rootfs":{"type":"layers","diff_ids":["d1",2,"d2","d3"]}}"#;
        assert_eq!(at(config, 2), Some(v(&["d1", "d2"])));
        assert_eq!(at(config, 9), Some(v(&["d1", "d2", "d3"])));
        assert_eq!(at(br#"{"rootfs":{"diff_ids":"one"}}"#, 9), Some(v(&["one"])));
        assert_eq!(at(br#"{"rootfs":["diff_ids"]}"#, 9), Some(vec![]));
        assert_eq!(at(br#"{"rootfs":{"diff_ids":["a"]},"rootfs":{}}"#, 9), Some(vec![]));
        assert_eq!(at(br#"[1]"#, 9), Some(vec![]));
        assert_eq!(at(br#"{"rootfs":"#, 9), None);
    }

    #[test]
    fn picks_each_keys_up_to_max() {
        let json = br#"[{"id":"a","names":[["x"],"n1",{"y":"z"},"n2",3,"n3"],"layer":"l1"},
            {"names":"solo","id":7},5,{"id":"c","names":{"x":"y"},"id":"c2"},{"id":"d"}]"#;
        let keys = [("id", 1), ("names", 2), ("layer", 1)];
        let got = pick_each_keys(&mut &json[..], &keys, 4).unwrap();
        let v = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(got.cut);
        assert_eq!(
            got.items,
            vec![
                vec![v(&["a"]), v(&["n1", "n2"]), v(&["l1"])],
                vec![vec![], v(&["solo"]), vec![]],
                vec![vec![], vec![], vec![]],
                vec![v(&["c2"]), vec![], vec![]],
            ]
        );
        assert!(pick_each_keys(&mut &b"{}"[..], &keys, 4).is_none());
    }
}
