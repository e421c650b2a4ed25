//! dpkg's record of what each package installed and in which state: the
//! `/var/lib/dpkg/info/<package>[:<arch>].md5sums` files, one line a file: its MD5 in
//! 32 hex digits, two spaces, its path without the leading `/` (dpkg
//! `src/main/unpack.c` checks them with `dpkg --verify`; `dh_md5sums` writes them at
//! build time). Conffiles are not in them (an admin edits those).

/// Each well-formed line of an `.md5sums` file: the file's MD5 and its path, without the
/// leading `/`. A line of another shape is skipped.
pub fn md5sums(text: &[u8]) -> impl Iterator<Item = ([u8; 16], &[u8])> {
    text.split(|&b| b == b'\n').filter_map(|line| {
        let (hex, rest) = (line.get(..32)?, line.get(32..)?);
        let path = rest.strip_prefix(b"  ")?;
        let mut md5 = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16);
            md5[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        (!path.is_empty()).then_some((md5, path))
    })
}

/// The package an `.md5sums` file's name `name` is of: the name without `.md5sums` and
/// without the `:<arch>` of a multi-arch package.
pub fn package_of(name: &str) -> Option<&str> {
    let package = name.strip_suffix(".md5sums")?;
    let package = package.split(':').next().unwrap_or(package);
    (!package.is_empty()).then_some(package)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_md5sums() {
        let text = b"d41d8cd98f00b204e9800998ecf8427e  usr/share/doc/a b/copyright\n\
            short  usr/x\n\
            d41d8cd98f00b204e9800998ecf8427g  usr/bad-hex\n\
            0123456789abcdef0123456789ABCDEF  usr/bin/tool";
        let got: Vec<_> = md5sums(text).map(|(m, p)| (m[0], m[15], p.to_vec())).collect();
        assert_eq!(
            got,
            [
                (0xd4, 0x7e, b"usr/share/doc/a b/copyright".to_vec()),
                (0x01, 0xef, b"usr/bin/tool".to_vec())
            ]
        );
        assert_eq!(package_of("libssl3:amd64.md5sums"), Some("libssl3"));
        assert_eq!(package_of("python3-oauthlib.md5sums"), Some("python3-oauthlib"));
        assert_eq!(package_of("python3-oauthlib.list"), None);
    }
}
