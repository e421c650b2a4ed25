//! Tar archives read as a stream, member by member, each member's data read through and
//! never held: image layers, `docker save` archives, OCI layouts in a tar, root
//! filesystem tarballs. A layer's bytes are sniffed for gzip (every member of a
//! multi-member stream) or zstd (every frame; skippable frames skipped; windows over
//! [`MAX_ZSTD_WINDOW`] refused) and inflated as they are read.
//!
//! Written here rather than with the `tar` crate: it reads GNU long names and PAX records
//! whole into memory whatever their size, and in its raw mode (the only way to bound
//! them) the size a PAX record gives is ignored, which misreads every later header. Here
//! ustar, GNU and PAX headers are read with extension records capped at
//! [`MAX_EXTENSION`]; headers are checked by their checksum; member data is skipped by
//! reading it through (the input may be a pipe or an inflating reader).

pub mod seekable;

use crate::sys::ReadError;
use std::io::{self, BufRead, BufReader, Read};

/// The largest GNU long name or link, or PAX record block, read (larger is an error: a
/// path is at most 4 KiB on Linux).
pub const MAX_EXTENSION: u64 = 64 << 10;

/// The largest zstd window decoded. Layers compressed at any standard level use at most
/// 8 MiB; `--long` uses 128 MiB, which would be held per reader.
pub const MAX_ZSTD_WINDOW: u64 = 32 << 20;

const BLOCK: u64 = 512;

/// The largest member read (Go's archive/tar refuses sizes past `i64::MAX` too).
const MAX_SIZE: u64 = i64::MAX as u64;

/// What a member is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file (data follows).
    File,
    /// A directory.
    Dir,
    /// A symbolic link to [`Member::link`].
    Symlink,
    /// A hard link to the member named [`Member::link`].
    Hardlink,
    /// A device, a FIFO or another type: no data to search.
    Other,
}

/// A member's header, as its extension records complete it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its name, as written (see [`clean_path`]).
    pub path: Vec<u8>,
    /// A link's target, as written.
    pub link: Vec<u8>,
    /// Its type.
    pub kind: Kind,
    /// Bytes of data that follow the header.
    pub size: u64,
}

/// A tar stream read member by member.
pub struct Reader<R> {
    r: R,
    /// Data bytes of the current member not yet read.
    left: u64,
    /// Padding after them, to the next block.
    pad: u64,
    /// Offset in the stream of the next byte.
    pos: u64,
    /// Asked between the pieces of data skipped: true stops the reading.
    stop: Option<Box<dyn Fn() -> bool>>,
}

/// Bytes skipped between two questions to [`Reader::with_stop`]'s check.
const SKIP_PIECE: u64 = 8 << 20;

/// The extension records gathered for the next member.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
}

impl<R: Read> Reader<R> {
    /// A reader of the tar stream `r`.
    pub fn new(r: R) -> Reader<R> {
        Reader { r, left: 0, pad: 0, pos: 0, stop: None }
    }

    /// This reader, asking `stop` between pieces of the data it skips (an inflated layer
    /// may skip terabytes): when it says so, reading ends with an error.
    pub fn with_stop(mut self, stop: Box<dyn Fn() -> bool>) -> Reader<R> {
        self.stop = Some(stop);
        self
    }

    /// Offset in the (inflated) stream of the next byte to read.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The next member, after what is left of the current one; `None` at the end of the
    /// archive (a zero block, or the end of the input between members).
    pub fn next_member(&mut self) -> Result<Option<Member>, ReadError> {
        // Both at most `MAX_SIZE` (below): no overflow.
        let rest = self.left + self.pad;
        self.skip(rest)?;
        self.left = 0;
        self.pad = 0;
        let mut pending = Pending::default();
        loop {
            let at = self.pos;
            let mut h = [0u8; BLOCK as usize];
            let n = self.fill(&mut h)?;
            let extended = pending.long_name.is_some()
                || pending.long_link.is_some()
                || pending.link.is_some()
                || pending.path.is_some()
                || pending.size.is_some();
            if n == 0 || h.iter().all(|&b| b == 0) {
                if extended {
                    return Err(err(at, "an extension header with no member after it"));
                }
                return Ok(None);
            }
            if n < h.len() {
                return Err(err(at, "cut short in a header"));
            }
            if !checksum_ok(&h) {
                return Err(err(at, "a header's checksum does not match (not a tar, or damaged)"));
            }
            let size =
                number(&h[124..136]).ok_or_else(|| err(at, "a header's size is not a number"))?;
            let typ = h[156];
            match typ {
                b'L' | b'K' | b'x' => {
                    if size > MAX_EXTENSION {
                        return Err(err(
                            at,
                            format!(
                                "an extension record of {size} bytes, more than {MAX_EXTENSION}"
                            ),
                        ));
                    }
                    let mut data = vec![0; size as usize];
                    if self.fill(&mut data)? < data.len() {
                        return Err(err(at, "cut short in an extension record"));
                    }
                    self.skip(padding(size))?;
                    match typ {
                        b'L' => pending.long_name = Some(until_nul(&data).to_vec()),
                        b'K' => pending.long_link = Some(until_nul(&data).to_vec()),
                        _ => pax(&data, &mut pending).map_err(|m| err(at, m))?,
                    }
                }
                // Global PAX records, Solaris extended headers, a volume label: nothing
                // here needs them.
                b'g' | b'X' | b'V' => {
                    let skip =
                        size.checked_add(padding(size)).ok_or_else(|| err(at, "size overflow"))?;
                    self.skip(skip)?;
                }
                _ => {
                    let size = pending.size.unwrap_or(size);
                    if size > MAX_SIZE {
                        return Err(err(at, format!("a member of {size} bytes")));
                    }
                    // A GNU long name or link is applied after the PAX records, as Go's
                    // archive/tar (containerd's and Docker's reader) does.
                    let path = pending.long_name.or(pending.path).unwrap_or_else(|| name(&h));
                    let link = pending
                        .long_link
                        .or(pending.link)
                        .unwrap_or_else(|| until_nul(&h[157..257]).to_vec());
                    let kind = match typ {
                        // An old-style regular file named with a trailing slash is a dir.
                        0 if path.ends_with(b"/") => Kind::Dir,
                        b'0' | 0 | b'7' | b'S' => Kind::File,
                        b'5' => Kind::Dir,
                        b'2' => Kind::Symlink,
                        b'1' => Kind::Hardlink,
                        _ => Kind::Other,
                    };
                    // Links, dirs, devices and FIFOs carry no data whatever their size
                    // field says (as Go's reader takes them): what follows is the next
                    // header. Other types' data is skipped as the header says.
                    let header_only = matches!(typ, b'1'..=b'6') || kind == Kind::Dir;
                    let size = if header_only { 0 } else { size };
                    self.left = size;
                    self.pad = padding(size);
                    return Ok(Some(Member { path, link, kind, size }));
                }
            }
        }
    }

    /// The current member's data, read through (what is not read is skipped by the next
    /// [`Reader::next_member`]).
    pub fn data(&mut self) -> Data<'_, R> {
        Data(self)
    }

    /// Reads into `buf` until it is full or the input ends; counts what was read.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        let mut n = 0;
        while n < buf.len() {
            match self.r.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err(self.pos + n as u64, e)),
            }
        }
        self.pos += n as u64;
        Ok(n)
    }

    /// Reads `n` bytes through; the input ending first is an error.
    fn skip(&mut self, n: u64) -> Result<(), ReadError> {
        let mut left = n;
        while left > 0 {
            if self.stop.as_ref().is_some_and(|stop| stop()) {
                return Err(err(self.pos, "stopped (a stop signal, or the deadline)"));
            }
            let at = self.pos;
            let piece = left.min(SKIP_PIECE);
            let copied = io::copy(&mut (&mut self.r).take(piece), &mut io::sink())
                .map_err(|e| err(at, e))?;
            self.pos += copied;
            if copied < piece {
                return Err(err(self.pos, "cut short in a member's data"));
            }
            left -= piece;
        }
        Ok(())
    }
}

/// A member's data (see [`Reader::data`]).
pub struct Data<'a, R>(&'a mut Reader<R>);

impl<R: Read> Read for Data<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rd = &mut *self.0;
        if rd.left == 0 {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(rd.left).unwrap_or(usize::MAX));
        let n = rd.r.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "cut short in a member's data",
            ));
        }
        rd.left -= n as u64;
        rd.pos += n as u64;
        Ok(n)
    }
}

fn err(at: u64, msg: impl std::fmt::Display) -> ReadError {
    ReadError::new("tar", format!("at byte {at}: {msg}"))
}

/// Bytes of padding after `size` bytes of data.
fn padding(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}

fn until_nul(b: &[u8]) -> &[u8] {
    &b[..memchr::memchr(0, b).unwrap_or(b.len())]
}

/// Whether `head` (a stream's first bytes) starts with a tar header: a block whose
/// checksum is right.
pub fn is_tar(head: &[u8]) -> bool {
    let Ok(h) = <&[u8; BLOCK as usize]>::try_from(head.get(..BLOCK as usize).unwrap_or(&[])) else {
        return false;
    };
    h.iter().any(|&b| b != 0) && checksum_ok(h)
}

/// The header's checksum: the sum of its bytes with the checksum field as spaces, as
/// unsigned bytes (POSIX) or signed ones (some old writers).
fn checksum_ok(h: &[u8; BLOCK as usize]) -> bool {
    let Some(want) = number(&h[148..156]) else { return false };
    let field = 8 * u64::from(b' ');
    let outside = |i: &usize| !(148..156).contains(i);
    let unsigned: u64 =
        h.iter().enumerate().filter(|(i, _)| outside(i)).map(|(_, &b)| u64::from(b)).sum();
    let signed: i64 =
        h.iter().enumerate().filter(|(i, _)| outside(i)).map(|(_, &b)| i64::from(b as i8)).sum();
    want == unsigned + field || i64::try_from(want).ok() == Some(signed + field as i64)
}

/// A numeric field: octal (NUL- or space-terminated, space-padded) or GNU's base-256
/// (high bit of the first byte set; a negative number is refused).
fn number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|&b| b & 0x80 != 0) {
        if field[0] & 0x40 != 0 {
            return None;
        }
        let mut v: u64 = u64::from(field[0] & 0x3f);
        for &b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(v);
    }
    let s = field.iter().skip_while(|&&b| b == b' ').take_while(|&&b| b != 0 && b != b' ');
    let mut v: u64 = 0;
    for &b in s {
        if !(b'0'..=b'7').contains(&b) {
            return None;
        }
        v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
    }
    // An empty field is zero (some writers leave a directory's size blank).
    Some(v)
}

/// The name a ustar header gives: its prefix, a slash and its name (GNU headers keep other
/// fields where the prefix would be).
fn name(h: &[u8; BLOCK as usize]) -> Vec<u8> {
    let name = until_nul(&h[0..100]);
    let ustar = &h[257..263] == b"ustar\0";
    let prefix = until_nul(&h[345..500]);
    if ustar && !prefix.is_empty() {
        [prefix, b"/", name].concat()
    } else {
        name.to_vec()
    }
}

/// Reads PAX records (`LEN KEY=VALUE\n`): `path`, `linkpath` and `size` are kept.
fn pax(mut data: &[u8], pending: &mut Pending) -> Result<(), String> {
    while !data.is_empty() {
        let sp = memchr::memchr(b' ', data).ok_or("a PAX record without a length")?;
        let len: usize = std::str::from_utf8(&data[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&l| l > sp + 1 && l <= data.len())
            .ok_or("a PAX record's length is wrong")?;
        let record = &data[sp + 1..len];
        let record = record.strip_suffix(b"\n").ok_or("a PAX record not ended by a newline")?;
        let eq = memchr::memchr(b'=', record).ok_or("a PAX record without =")?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"path" => pending.path = Some(value.to_vec()),
            b"linkpath" => pending.link = Some(value.to_vec()),
            b"size" => {
                let size = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
                pending.size = Some(size.ok_or("a PAX size that is not a number")?);
            }
            _ => {}
        }
        data = &data[len..];
    }
    Ok(())
}

/// A member's path as a relative path: leading `/` and `./` dropped, empty and `.`
/// components dropped. `..` is kept as written (nothing is ever written at these paths;
/// they are shown).
pub fn clean_path(p: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len());
    for part in p.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".") {
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    out
}

/// How a stream's bytes were compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (every member of a multi-member stream).
    Gzip,
    /// zstd (every frame).
    Zstd,
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "un",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        })
    }
}

/// How bytes starting with `head` (at least 4 of them, if there are) are compressed.
pub fn compression(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// `r`'s bytes, inflated when they start as gzip or zstd does.
pub fn inflated<R: Read + Send + 'static>(r: R) -> io::Result<(Compression, Box<dyn Read + Send>)> {
    let mut r = BufReader::with_capacity(64 << 10, r);
    let c = compression(r.fill_buf()?);
    Ok(match c {
        Compression::Gzip => (c, Box::new(flate2::bufread::MultiGzDecoder::new(r))),
        Compression::Zstd => (c, Box::new(Zstd { r, frame: None })),
        Compression::None => (c, Box::new(r)),
    })
}

/// The frames of a zstd stream, inflated one after another.
struct Zstd<R> {
    r: R,
    frame: Option<ruzstd::decoding::FrameDecoder>,
}

impl<R: BufRead> Read for Zstd<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
        use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
        let bad =
            |e: FrameDecoderError| io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}"));
        loop {
            if let Some(d) = &mut self.frame {
                if d.can_collect() > 0 {
                    return d.read(buf);
                }
                if !d.is_finished() {
                    d.decode_blocks(&mut self.r, BlockDecodingStrategy::UptoBlocks(1))
                        .map_err(bad)?;
                    continue;
                }
                self.frame = None;
            }
            if self.r.fill_buf()?.is_empty() {
                return Ok(0);
            }
            let mut d = FrameDecoder::new();
            d.set_max_window_size(MAX_ZSTD_WINDOW);
            match d.init(&mut self.r) {
                Ok(()) => self.frame = Some(d),
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped =
                        io::copy(&mut (&mut self.r).take(length.into()), &mut io::sink())?;
                    if skipped < u64::from(length) {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "zstd: cut short in a skippable frame",
                        ));
                    }
                }
                Err(e) => return Err(bad(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A member read: (path, kind, link, data).
    type Read4 = (Vec<u8>, Kind, Vec<u8>, Vec<u8>);
    /// Files written: (path, data).
    type Files = Vec<(Vec<u8>, Vec<u8>)>;

    /// Reads every member of `tar`.
    fn members(tar: &[u8]) -> Result<Vec<Read4>, ReadError> {
        let (_, r) = inflated(std::io::Cursor::new(tar.to_vec())).expect("sniff");
        let mut rd = Reader::new(r);
        let mut out = Vec::new();
        while let Some(m) = rd.next_member()? {
            let mut data = Vec::new();
            if m.kind == Kind::File {
                rd.data().read_to_end(&mut data).map_err(|e| err(0, e))?;
            }
            out.push((clean_path(&m.path), m.kind, m.link, data));
        }
        Ok(out)
    }

    /// A tree made with GNU tar in `format`, compressed with `compress` (a tar flag).
    fn gnu_tar(format: &str, compress: Option<&str>) -> (Vec<u8>, Files) {
        let dir = tempfile::tempdir().expect("tmp");
        let long = "d".repeat(120) + "/" + &"n".repeat(150);
        let mut files = Vec::new();
        for (i, p) in ["a", "sub/b", long.as_str(), "empty"].iter().enumerate() {
            let path = dir.path().join("t").join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            let data = if *p == "empty" { Vec::new() } else { vec![b'0' + i as u8; 700 * (i + 1)] };
            std::fs::write(&path, &data).expect("write");
            files.push((format!("t/{p}").into_bytes(), data));
        }
        std::os::unix::fs::symlink("a".repeat(200), dir.path().join("t/link")).expect("symlink");
        let out = dir.path().join("out");
        let mut cmd = Command::new("tar");
        cmd.arg("-C").arg(dir.path()).arg(format!("--format={format}")).arg("-cf").arg(&out);
        if let Some(c) = compress {
            cmd.arg(c);
        }
        let ok = cmd.arg("t").status().expect("tar runs").success();
        assert!(ok, "tar {format} {compress:?}");
        (std::fs::read(out).expect("read"), files)
    }

    /// GNU tar's gnu, pax and ustar formats, plain and gzipped: every file's name (long
    /// ones through `L` or PAX records, or ustar's prefix) and data, and the long link.
    #[test]
    fn reads_what_gnu_tar_writes() {
        for format in ["gnu", "pax", "ustar"] {
            for compress in [None, Some("-z")] {
                if format == "ustar" {
                    // ustar cannot hold the 200-byte link target: checked apart.
                    continue;
                }
                let (tar, files) = gnu_tar(format, compress);
                let got = members(&tar).expect("reads");
                for (path, data) in &files {
                    let m = got.iter().find(|m| &m.0 == path);
                    let m =
                        m.unwrap_or_else(|| panic!("{format}: {}", String::from_utf8_lossy(path)));
                    assert_eq!((m.1, &m.3), (Kind::File, data), "{format}");
                }
                let link = got.iter().find(|m| m.0 == b"t/link").expect("link");
                assert_eq!((link.1, link.2.clone()), (Kind::Symlink, "a".repeat(200).into_bytes()));
            }
        }
    }

    /// A stream of several zstd frames with a skippable frame between them reads as one.
    #[test]
    fn zstd_frames_and_skippable_frames() {
        let z = |data: &[u8]| {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        };
        let (tar, _) = gnu_tar("pax", None);
        let half = tar.len() / 2;
        let mut stream = z(&tar[..half]);
        stream.extend_from_slice(&0x184D2A50u32.to_le_bytes());
        stream.extend_from_slice(&5u32.to_le_bytes());
        stream.extend_from_slice(b"skip!");
        stream.extend_from_slice(&z(&tar[half..]));
        let (c, mut r) = inflated(std::io::Cursor::new(stream)).expect("sniff");
        assert_eq!(c, Compression::Zstd);
        let mut back = Vec::new();
        r.read_to_end(&mut back).expect("inflates");
        assert!(back == tar, "the frames inflate to the tar");
    }

    /// A ustar header of `name`, type `typ` and size field `size`, its checksum right.
    fn header(name: &[u8], typ: u8, size: &[u8]) -> Vec<u8> {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name);
        h[124..124 + size.len()].copy_from_slice(size);
        h[156] = typ;
        h[257..263].copy_from_slice(b"ustar\0");
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h.to_vec()
    }

    /// Extension records past the cap, sizes that overflow, bad checksums and cut
    /// headers are errors naming the offset; nothing panics.
    #[test]
    fn hostile_headers_are_errors() {
        let big = header(b"x", b'L', b"77777777777");
        let e = members(&big).expect_err("refused");
        assert!(e.to_string().contains("extension record"), "{e}");
        let mut bad = header(b"x", b'0', b"1");
        bad[0] = b'y';
        assert!(members(&bad).expect_err("checksum").to_string().contains("checksum"));
        let cut = header(b"x", b'0', b"1000");
        assert!(members(&cut).expect_err("cut").to_string().contains("cut short"));
        let mut base256 = header(b"x", b'0', &[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
        base256.extend_from_slice(&[b'v'; 512]);
        assert_eq!(members(&base256).expect("base-256 size")[0].3, b"vvvvv");
        let negative = header(b"x", b'0', &[0xff; 12]);
        assert!(members(&negative).is_err());
        let mut pax = header(b"p", b'x', b"20");
        pax.extend_from_slice(&[b"16 size=9999999\n".as_slice(), &[0; 496]].concat());
        pax.extend(header(b"x", b'0', b"1"));
        let e = members(&pax).expect_err("size from PAX");
        assert!(e.to_string().contains("cut short"), "{e}");
        for n in 0..600 {
            let mut junk = crate::prng::Prng::new(n).bytes(1024 + n as usize);
            junk.splice(0..0, header(b"j", b'0', b"2000"));
            let _ = members(&junk);
        }
    }

    /// A symlink or dir header claiming data, followed by a file: the file is read (Go's
    /// reader takes those types as header only); a GNU long name wins over a PAX path; a
    /// size past `i64::MAX` is an error, not an overflow.
    #[test]
    fn header_only_types_and_name_precedence() {
        for typ in [b'1', b'2', b'3', b'4', b'5', b'6'] {
            let mut tar = header(b"x", typ, b"1000");
            tar.extend(header(b"secret", b'0', b"5"));
            tar.extend([b'v'; 512]);
            let got = members(&tar).expect("reads");
            assert_eq!(got.len(), 2, "type {}", typ as char);
            assert_eq!((got[1].0.as_slice(), got[1].3.as_slice()), (&b"secret"[..], &b"vvvvv"[..]));
        }
        let mut tar = header(b"d/", 0, b"1000");
        tar.extend(header(b"f", b'0', b"1"));
        tar.extend([b'v'; 512]);
        let got = members(&tar).expect("reads");
        assert_eq!((got[0].1, got[1].0.as_slice()), (Kind::Dir, &b"f"[..]));
        let mut tar = header(b"p", b'x', b"16");
        tar.extend([b"14 path=.wh.x\n".as_slice(), &[0; 498]].concat());
        tar.extend(header(b"L", b'L', b"13"));
        tar.extend([b"etc/app.key\0".as_slice(), &[0; 500]].concat());
        tar.extend(header(b"short", b'0', b"1"));
        tar.extend([b'k'; 512]);
        let got = members(&tar).expect("reads");
        assert_eq!(got[0].0, b"etc/app.key");
        let mut big = header(b"p", b'x', b"35");
        big.extend([b"29 size=18446744073709551615\n".as_slice(), &[0; 483]].concat());
        big.extend(header(b"f", b'0', b"1"));
        assert!(members(&big).expect_err("refused").to_string().contains("bytes"));
    }

    #[test]
    fn paths_are_cleaned() {
        assert_eq!(clean_path(b"./a//b/./c/"), b"a/b/c");
        assert_eq!(clean_path(b"/../etc/x"), b"../etc/x");
        assert_eq!(clean_path(b"."), b"");
    }
}
