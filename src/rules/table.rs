//! The built-in rule table: every shape of secret material `kresidue` recognises without
//! being told the value, as data (see [`RuleSpec`] for the fields and [`super::examples`]
//! for the example templates).
//!
//! Conventions every rule follows, checked by the tests at the bottom:
//! - ids are kebab-case and stable: reports, SARIF and baselines name rules by them;
//! - literals are case-sensitive and distinctive (a literal that ordinary logs and configs
//!   contain would make the prefilter useless); every match contains one;
//! - the prefilter searches for a literal's *key* ([`Literal::key`]), which leaves out
//!   leading bytes that ordinary text is full of (`post` of `postgres://`, `client` of
//!   `client-key-data`, `Acco` of `AccountKey=`): the SIMD search then stops at few
//!   false candidates. Literals may share a key and differ after it (the PEM rules'
//!   `-----BEGIN <label>-----` share `-BEGIN `): each literal is compared whole at a key
//!   hit, and only the rules of the literal found run their regex. Keys are 4 bytes or
//!   more (the bytes Teddy matches; a shorter one must be made of rare bytes, `Q~`), and
//!   no key is a prefix of another (the prefilter
//!   reports one key per position); the buckets are assigned when the rules compile
//!   (`src/rules/teddy.rs`);
//! - a token prefix (`ghp_`, `sk_live_`, `hvs.`) is a [`super::word`] literal: it counts
//!   only at the start of a word, so `task_test_…` is no Stripe key;
//! - patterns start with `(?-u)`: they work on bytes, `\s`/`\b` are ASCII and `[^…]`
//!   matches any byte, so binary files (etcd, `meta.db`) are searched like text;
//! - a rule whose match starts at its literal has `before: 0` and its pattern is anchored
//!   with `^`: the engine's window then starts exactly at the literal hit, so the regex
//!   tries one position instead of scanning the whole window for every hit (unanchored,
//!   a dense literal such as `eyJ` in a base64 blob cost a 16 KiB regex scan per hit);
//! - small repetitions are bounded (`{20,300}`); long spans (key bodies, the lines
//!   between a kubeconfig's `users:` and a token) are left open (`{400,}`, `*?`) and
//!   bounded by the rule's window (`before`/`after`) instead: the window is what bounds
//!   a match and the regex work, and a bound like `{400,16000}` compiles into a
//!   16000-state automaton that searches a hundred times slower;
//! - a group named `secret` holds the secret part whenever the match has context (and a
//!   group `span`, when there is one, the part a finding covers); alternatives that each
//!   need their own name them `secret_…`/`span_…`;
//! - at least two positive and two negative examples each, generated, never real.
//!
//! Severity is that of the material ([`Severity`]): private keys, cloud credentials and
//! kubeconfigs with credentials are critical; tokens, bootstrap tokens, registry
//! credentials and database passwords high; narrower or protected material lower. For
//! JWT rules it is only a default: the decoded token decides ([`super::jwt`]).

use super::{lit, lit_at, lit_in, word, word_at, Check, Literal, RuleSpec};
use crate::finding::{JwtKind, Severity};

/// Where a key's lines are string literals joined in code (Java's and Go's `" +` at a line
/// end, Python's and C's adjacent literals): a quote, an optional `+`, a line break and the
/// next line's opening quote.
macro_rules! pem_join {
    () => {
        r#""[ \t]*\+?[ \t]*\r?\n[ \t]*\+?[ \t]*""#
    };
}

/// Separator between PEM lines: whitespace, `\n`/`\r` escaped once to three times (a key
/// inside a JSON string, or JSON inside JSON), or string literals joined in code.
macro_rules! pem_sep {
    () => {
        concat!(r"(?:[ \t\r\n]|\\{1,3}[rn]|", pem_join!(), "){1,8}")
    };
}

/// A PEM body of at least `$min` characters: base64 lines and their separators.
macro_rules! pem_body {
    ($min:literal) => {
        concat!(
            r"[A-Za-z0-9+/](?:[A-Za-z0-9+/=\\ \t\r\n]|",
            pem_join!(),
            "){",
            $min,
            r",}[A-Za-z0-9+/=]"
        )
    };
}

/// The literal of a PEM block with label `$label`, `-----BEGIN $label-----`. Its key is
/// `-BEGIN `, one prefilter key for every PEM rule, which leaves out the dashes that rulers
/// and banners in logs are made of; the label is compared at each hit, so a certificate
/// runs no private-key rule.
macro_rules! pem_begin {
    ($label:literal) => {
        lit_in(concat!("-----BEGIN ", $label, "-----"), 4, 11)
    };
}

/// The whole lines of a PEM body cut before its END line: at least four of 64 characters
/// (OpenSSL's width) or three of 76 (MIME's), a part line after them left out, so text
/// after the cut (a log line's rest, the next line of a file) is never taken for key.
macro_rules! pem_cut_body {
    () => {
        concat!(
            r"[A-Za-z0-9+/]{64}(?:(?:\r?\n[ \t]*|\\{1,3}[rn]|",
            pem_join!(),
            r")?[A-Za-z0-9+/]{64}){3,}|[A-Za-z0-9+/]{76}(?:(?:\r?\n[ \t]*|\\{1,3}[rn]|",
            pem_join!(),
            r")?[A-Za-z0-9+/]{76}){2,}"
        )
    };
}

/// A PEM block with label `$label` and a base64 body of at least `$min` characters; or,
/// cut before its END line (a truncated copy, a log line's excerpt), whole lines of at
/// least 228 characters of body ([`pem_cut_body!`]), which a documentation stub does not
/// have. A cut key's finding covers those lines.
macro_rules! pem_key {
    ($label:literal, $min:literal) => {
        concat!(
            r"(?-u)^-----BEGIN ",
            $label,
            "-----",
            pem_sep!(),
            r"(?:(?P<secret>",
            pem_body!($min),
            ")",
            pem_sep!(),
            "-----END ",
            $label,
            "-----|(?P<span>",
            pem_cut_body!(),
            "))"
        )
    };
}

/// The part of a database URL after the scheme: `://user:password@host`.
macro_rules! url_credentials {
    () => {
        concat!(
            r"(?:\+[a-z0-9]{1,20})?://",
            r#"[^\s:@/?#"'<>\\]{0,128}:(?P<secret>[^\s@/"'\\]{1,256})@"#,
            r"(?:[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])"
        )
    };
}

/// The pattern of every database URL rule. Each rule runs it only at its own literals,
/// where the window (`before: 0`) starts with that rule's scheme and no other, so it
/// matches there exactly what the rule's own scheme followed by [`url_credentials!`]
/// would; shared, it compiles once for the six rules (its bounded repetitions make it one
/// of the costliest patterns to compile, ~0.6 ms).
const DB_URL: &str = concat!(
    r"(?-u)^(?:postgres(?:ql)?|mysql|mariadb|mongodb|rediss?|amqps?|mssql|sqlserver)",
    url_credentials!()
);

/// The literal of JWT rules: a dot and the base64url of `{"`, where the payload of every
/// signed JWT starts (a JSON object), whatever field its header begins with (`alg`, `typ`,
/// `kid`, `x5t`, `cty`, …). The match reaches back to the header before it.
const JWT_LITERALS: &[Literal] = &[lit(".eyJ")];

/// The shape of a JWT: `header.payload.signature`, both JSON objects (base64url starting
/// `eyJ`), `=` padding tolerated, the signature empty for `alg: none`, not glued to a
/// longer base64url run. The header is bounded (real ones are about 100 characters,
/// with certificate thumbprints a few hundred) so that a long base64 run that is not a
/// token fails after 1 KiB.
const JWT: &str = concat!(
    r"(?-u)(?:^|[^A-Za-z0-9_-])(?P<span>(?P<secret>eyJ[A-Za-z0-9_-]{2,1024}={0,2}",
    r"\.eyJ[A-Za-z0-9_-]{4,}={0,2}\.[A-Za-z0-9_-]*={0,2}))"
);

/// How far before its payload a JWT may start: its header, and a byte of context.
const JWT_BEFORE: usize = 1024 + 8;

mod cloud;
mod generic;

/// Every built-in rule, in the order `kresidue rules` lists them: this file's, then those
/// of the families in files of their own (`src/rules/table/`).
pub static RULES: std::sync::LazyLock<Vec<RuleSpec>> =
    std::sync::LazyLock::new(|| [OWN, cloud::RULES, generic::RULES].concat());

/// The rules of this file.
const OWN: &[RuleSpec] = &[
    // ---- Private keys -------------------------------------------------------------
    RuleSpec {
        id: "pem-rsa-private-key",
        description: "PEM RSA private key (PKCS#1)",
        severity: Severity::Critical,
        literals: &[pem_begin!("RSA PRIVATE KEY")],
        pattern: pem_key!("RSA PRIVATE KEY", 200),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "{pem:RSA PRIVATE KEY:1190}\n",
            "  tls.key: |\n    {pem:RSA PRIVATE KEY:609}\n",
            "{{\"key\":\"{json:{pem:RSA PRIVATE KEY:2349}\n}\"}\n",
            "{crlf:{pem:RSA PRIVATE KEY:1190}\n}",
            // Cut before its END line: still most of a key.
            "-----BEGIN RSA PRIVATE KEY-----\n{pembody:1190}\n",
            // Lines of string literals joined in Go (and Java's `\" +`).
            "const k = \"-----BEGIN RSA PRIVATE KEY-----\\n\" +\n\t\"MIIEpAIBAAKCAQEA{b:48}\\n\" +\n\t\"{b:64}\\n\" +\n\t\"{b:64}\\n\" +\n\t\"{b:64}\\n\" +\n\t\"-----END RSA PRIVATE KEY-----\\n\"\n",
        ],
        negative: &[
            // A certificate is public.
            "{pem:CERTIFICATE:900}\n",
            // Body too short to be a key.
            "{pem:RSA PRIVATE KEY:120}\n",
            // A documentation stub.
            "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----\n",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA{b:40}\n...\n",
            // Legacy-encrypted keys are their own rule.
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{X:32}\n\n{pembody:1200}\n-----END RSA PRIVATE KEY-----\n",
        ],
    },
    RuleSpec {
        id: "pem-ec-private-key",
        description: "PEM EC private key (SEC 1)",
        severity: Severity::Critical,
        literals: &[pem_begin!("EC PRIVATE KEY")],
        pattern: pem_key!("EC PRIVATE KEY", 60),
        before: 0,
        after: 4096,
        check: Check::Entropy(4.5),
        positive: &[
            "{pem:EC PRIVATE KEY:121}\n",
            "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{pem:EC PRIVATE KEY:223}\n",
            "KEY=\"{pem:EC PRIVATE KEY:167}\"\n",
        ],
        negative: &[
            "{pem:PUBLIC KEY:91}\n",
            "{pem:EC PRIVATE KEY:30}\n",
            "-----BEGIN EC PRIVATE KEY-----\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END EC PRIVATE KEY-----\n",
        ],
    },
    RuleSpec {
        id: "pem-dsa-private-key",
        description: "PEM DSA private key",
        severity: Severity::Critical,
        literals: &[pem_begin!("DSA PRIVATE KEY")],
        pattern: pem_key!("DSA PRIVATE KEY", 300),
        before: 0,
        after: 8192,
        check: Check::Entropy(4.5),
        positive: &["{pem:DSA PRIVATE KEY:443}\n", "ssh_key: \"{json:{pem:DSA PRIVATE KEY:860}}\"\n"],
        negative: &["{pem:DSA PRIVATE KEY:100}\n", "{pem:DSA PARAMETERS:420}\n"],
    },
    RuleSpec {
        id: "pem-openssh-private-key",
        description: "OpenSSH private key",
        severity: Severity::Critical,
        literals: &[pem_begin!("OPENSSH PRIVATE KEY")],
        pattern: pem_key!("OPENSSH PRIVATE KEY", 200),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "{pem:OPENSSH PRIVATE KEY:290}\n",
            "  id_rsa: |\n    {pem:OPENSSH PRIVATE KEY:1800}\n",
            "{crlf:{pem:OPENSSH PRIVATE KEY:2590}\n}",
        ],
        negative: &[
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b:43} user@host\n",
            "{pem:OPENSSH PRIVATE KEY:90}\n",
            // END's label is another's: no whole block (and too short for a cut one).
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{pembody:150}\n-----END RSA PRIVATE KEY-----\n",
        ],
    },
    RuleSpec {
        id: "pem-pkcs8-private-key",
        description: "PEM private key (PKCS#8)",
        severity: Severity::Critical,
        literals: &[pem_begin!("PRIVATE KEY")],
        pattern: pem_key!("PRIVATE KEY", 60),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "{pem:PRIVATE KEY:1217}\n",
            "{pem:PRIVATE KEY:48}\n",
            "{{\"tls.key\":\"{json:{pem:PRIVATE KEY:2374}\n}\"}\n",
            "TLS_KEY=-----BEGIN PRIVATE KEY----- {pembody:1217} -----END PRIVATE KEY-----\n",
        ],
        negative: &[
            "{pem:CERTIFICATE:1200}\n",
            "{pem:PRIVATE KEY:20}\n",
            "-----BEGIN PRIVATE KEY-----\n<your private key here>\n-----END PRIVATE KEY-----\n",
            "-----BEGIN PRIVATE KEY-----\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n-----END PRIVATE KEY-----\n",
        ],
    },
    RuleSpec {
        id: "pem-pkcs8-encrypted-private-key",
        description: "PEM encrypted private key (PKCS#8); needs its passphrase to use",
        severity: Severity::High,
        literals: &[pem_begin!("ENCRYPTED PRIVATE KEY")],
        pattern: pem_key!("ENCRYPTED PRIVATE KEY", 100),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "{pem:ENCRYPTED PRIVATE KEY:1298}\n",
            "  key.pem: |\n    {pem:ENCRYPTED PRIVATE KEY:154}\n",
        ],
        negative: &["{pem:ENCRYPTED PRIVATE KEY:40}\n", "{pem:CERTIFICATE REQUEST:700}\n"],
    },
    RuleSpec {
        id: "pem-legacy-encrypted-private-key",
        description: "PEM RSA/EC/DSA private key encrypted with OpenSSL's legacy headers",
        severity: Severity::High,
        literals: &[
            pem_begin!("RSA PRIVATE KEY"),
            pem_begin!("EC PRIVATE KEY"),
            pem_begin!("DSA PRIVATE KEY"),
        ],
        pattern: concat!(
            r"(?-u)^-----BEGIN (?:RSA|EC|DSA) PRIVATE KEY-----",
            pem_sep!(),
            r"Proc-Type: ?4,ENCRYPTED",
            pem_sep!(),
            r"DEK-Info: ?[A-Z0-9-]{3,32},[0-9A-Fa-f]{8,64}",
            pem_sep!(),
            r"(?P<secret>[A-Za-z0-9+/][A-Za-z0-9+/=\\ \t\r\n]{100,}[A-Za-z0-9+/=])",
            pem_sep!(),
            r"-----END (?:RSA|EC|DSA) PRIVATE KEY-----"
        ),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{X:32}\n\n{pembody:1200}\n-----END RSA PRIVATE KEY-----\n",
            "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: DES-EDE3-CBC,{X:16}\n\n{pembody:128}\n-----END EC PRIVATE KEY-----\n",
        ],
        negative: &[
            "{pem:RSA PRIVATE KEY:1190}\n",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{X:32}\n\n-----END RSA PRIVATE KEY-----\n",
        ],
    },
    RuleSpec {
        id: "pgp-private-key-block",
        description: "ASCII-armored PGP private key",
        severity: Severity::Critical,
        literals: &[pem_begin!("PGP PRIVATE KEY BLOCK")],
        pattern: concat!(
            r"(?-u)^-----BEGIN PGP PRIVATE KEY BLOCK-----",
            r"(?:",
            pem_sep!(),
            r"(?:Version|Comment|Hash|Charset): ?[^\r\n\\]{0,200}){0,5}",
            pem_sep!(),
            r"(?P<secret>[A-Za-z0-9+/][A-Za-z0-9+/=\\ \t\r\n]{200,}[A-Za-z0-9+/=])",
            pem_sep!(),
            r"-----END PGP PRIVATE KEY BLOCK-----"
        ),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n{pembody:1800}\n={b:4}\n-----END PGP PRIVATE KEY BLOCK-----\n",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pembody:600}\n={b:4}\n-----END PGP PRIVATE KEY BLOCK-----\n",
        ],
        negative: &[
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{pembody:1200}\n={b:4}\n-----END PGP PUBLIC KEY BLOCK-----\n",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pembody:60}\n-----END PGP PRIVATE KEY BLOCK-----\n",
        ],
    },
    RuleSpec {
        id: "putty-private-key",
        description: "PuTTY private key file (.ppk), unencrypted",
        severity: Severity::Critical,
        literals: &[lit("PuTTY-User-Key-File-")],
        pattern: concat!(
            r"(?-u)^PuTTY-User-Key-File-[23]: ?[a-z0-9@.-]{3,64}\r?\nEncryption: none\r?\n",
            r"(?s:.)*?Private-Lines: ?[0-9]{1,3}\r?\n",
            r"(?P<secret>(?:[A-Za-z0-9+/=]+\r?\n)+)Private-(?:MAC|Hash):"
        ),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.0),
        positive: &[
            "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-{d:8}\nPublic-Lines: 6\n{pembody:276}\nPrivate-Lines: 14\n{pembody:660}\nPrivate-MAC: {x:40}\n",
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ed25519-key-{d:8}\nPublic-Lines: 2\n{pembody:51}\nPrivate-Lines: 1\n{pembody:36}\nPrivate-MAC: {x:64}\n",
            "{crlf:PuTTY-User-Key-File-2: ecdsa-sha2-nistp256\nEncryption: none\nComment: {l:8}\nPublic-Lines: 3\n{pembody:104}\nPrivate-Lines: 1\n{pembody:37}\nPrivate-MAC: {x:40}\n}",
        ],
        negative: &[
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\nComment: k\nPublic-Lines: 2\n{pembody:51}\nKey-Derivation: Argon2id\nArgon2-Salt: {x:32}\nPrivate-Lines: 1\n{pembody:48}\nPrivate-MAC: {x:64}\n",
            "---- BEGIN SSH2 PUBLIC KEY ----\nComment: \"rsa-key-{d:8}\"\n{pembody:276}\n---- END SSH2 PUBLIC KEY ----\n",
            "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: k\nPublic-Lines: 6\n{pembody:276}\n",
        ],
    },
    RuleSpec {
        id: "putty-encrypted-private-key",
        description: "PuTTY private key file (.ppk), passphrase-encrypted",
        severity: Severity::High,
        literals: &[lit("PuTTY-User-Key-File-")],
        pattern: concat!(
            r"(?-u)^PuTTY-User-Key-File-[23]: ?[a-z0-9@.-]{3,64}\r?\nEncryption: aes[a-z0-9-]{3,32}\r?\n",
            r"(?s:.)*?Private-Lines: ?[0-9]{1,3}\r?\n",
            r"(?P<secret>(?:[A-Za-z0-9+/=]+\r?\n)+)Private-(?:MAC|Hash):"
        ),
        before: 0,
        after: 16384,
        check: Check::Entropy(4.0),
        positive: &[
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\nComment: ed25519-key-{d:8}\nPublic-Lines: 2\n{pembody:51}\nKey-Derivation: Argon2id\nArgon2-Memory: 8192\nArgon2-Passes: 13\nArgon2-Parallelism: 1\nArgon2-Salt: {x:32}\nPrivate-Lines: 1\n{pembody:48}\nPrivate-MAC: {x:64}\n",
            "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: aes256-cbc\nComment: imported-openssh-key\nPublic-Lines: 6\n{pembody:276}\nPrivate-Lines: 14\n{pembody:672}\nPrivate-MAC: {x:40}\n",
        ],
        negative: &[
            "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-{d:8}\nPublic-Lines: 6\n{pembody:276}\nPrivate-Lines: 14\n{pembody:660}\nPrivate-MAC: {x:40}\n",
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\nComment: k\nPublic-Lines: 2\n{pembody:51}\nPrivate-Lines: 1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\nPrivate-MAC: {x:64}\n",
        ],
    },
    // ---- Kubernetes ----------------------------------------------------------------
    RuleSpec {
        id: "kubernetes-service-account-token-legacy",
        description: "Kubernetes legacy (Secret-based) service-account token",
        severity: Severity::Critical,
        literals: JWT_LITERALS,
        pattern: JWT,
        before: JWT_BEFORE,
        after: 16384,
        check: Check::Jwt(JwtKind::LegacyServiceAccount),
        positive: &[
            "token: {jwt:{{\"iss\":\"kubernetes/serviceaccount\",\"kubernetes.io/serviceaccount/namespace\":\"ci\",\"kubernetes.io/serviceaccount/secret.name\":\"builder-token-{l:5}\",\"kubernetes.io/serviceaccount/service-account.name\":\"builder\",\"kubernetes.io/serviceaccount/service-account.uid\":\"{uuid}\",\"sub\":\"system:serviceaccount:ci:builder\"}}\n",
            "{{\"token\":\"{jwt:{{\"iss\":\"kubernetes/serviceaccount\",\"sub\":\"system:serviceaccount:kube-system:{l:8}\"}}\"}\n",
        ],
        negative: &[
            "token: {jwt:{{\"iss\":\"https://kubernetes.default.svc.cluster.local\",\"kubernetes.io\":{{\"namespace\":\"ci\",\"serviceaccount\":{{\"name\":\"builder\",\"uid\":\"{uuid}\"}},\"sub\":\"system:serviceaccount:ci:builder\",\"exp\":{now+3600}}}\n",
            "Authorization: Bearer {jwt:{{\"iss\":\"https://issuer.{l:8}.test\",\"sub\":\"{uuid}\"}}\n",
            "token: eyJhbGci{B:40}.eyJ{B:80}.{B:86}\n",
        ],
    },
    RuleSpec {
        id: "kubernetes-service-account-token",
        description: "Kubernetes bound (projected, TokenRequest) service-account token",
        severity: Severity::High,
        literals: JWT_LITERALS,
        pattern: JWT,
        before: JWT_BEFORE,
        after: 16384,
        check: Check::Jwt(JwtKind::BoundServiceAccount),
        positive: &[
            "{jwt:{{\"aud\":[\"https://kubernetes.default.svc.cluster.local\"],\"exp\":{now+3600},\"iat\":{now-60},\"iss\":\"https://kubernetes.default.svc.cluster.local\",\"kubernetes.io\":{{\"namespace\":\"kube-system\",\"pod\":{{\"name\":\"coredns-{l:5}\",\"uid\":\"{uuid}\"},\"serviceaccount\":{{\"name\":\"coredns\",\"uid\":\"{uuid}\"}},\"nbf\":{now-60},\"sub\":\"system:serviceaccount:kube-system:coredns\"}}",
            "{jwt:{{\"aud\":[\"sts.amazonaws.com\"],\"exp\":{now-86400},\"iss\":\"https://oidc.eks.test/id/{X:32}\",\"sub\":\"system:serviceaccount:{l:6}:{l:8}\"}}\n",
            // A header that opens with `kid`.
            "token: {b64url:{{\"kid\":\"{B:43}\",\"alg\":\"RS256\"}}.{b64url:{{\"iss\":\"https://kubernetes.default.svc\",\"kubernetes.io\":{{\"namespace\":\"{l:6}\",\"serviceaccount\":{{\"name\":\"{l:6}\",\"uid\":\"{uuid}\"}},\"exp\":{now+3600}}}.{B:344}\n",
        ],
        negative: &[
            "token: {jwt:{{\"iss\":\"kubernetes/serviceaccount\",\"sub\":\"system:serviceaccount:ci:builder\"}}\n",
            "id_token: {jwt:{{\"iss\":\"https://accounts.{l:8}.test\",\"sub\":\"{d:21}\",\"exp\":{now+3600}}}\n",
            "{jwt:{{\"kubernetes.io\":{{\"namespace\":\"x\"},\"sub\":\"alice\"}}\n",
        ],
    },
    RuleSpec {
        id: "jwt",
        description: "JSON Web Token (not a Kubernetes service-account token)",
        severity: Severity::Medium,
        literals: JWT_LITERALS,
        pattern: JWT,
        before: JWT_BEFORE,
        after: 16384,
        check: Check::Jwt(JwtKind::Other),
        positive: &[
            "Authorization: Bearer {jwt:{{\"iss\":\"https://auth.{l:8}.test\",\"sub\":\"{uuid}\",\"aud\":\"api\",\"exp\":{now+3600}}}\n",
            "{{\"id_token\":\"{jwt:{{\"iss\":\"https://accounts.{l:6}.test\",\"sub\":\"{d:21}\",\"email\":\"{l:6}@{l:6}.test\"}}\"}\n",
            "refresh: {jwt:{{\"sub\":\"{l:8}\",\"exp\":{now-600}}}\n",
            // A header that opens with `typ`, HS256-signed.
            "session={b64url:{{\"typ\":\"JWT\",\"alg\":\"HS256\"}}.{b64url:{{\"sub\":\"{l:8}\",\"iat\":{now}}}.{B:44}; Path=/\n",
        ],
        negative: &[
            "token: {jwt:{{\"iss\":\"kubernetes/serviceaccount\",\"sub\":\"system:serviceaccount:ci:builder\"}}\n",
            "token: {jwt:{{\"iss\":\"https://kubernetes.default.svc\",\"sub\":\"system:serviceaccount:ci:builder\"}}\n",
            "data: eyJhbGci{B:60}\n",
            "header: eyJ0eXAi{B:40}.eyJ{B:80}\n",
            // A header longer than any real one.
            "token: {b64url:{{\"alg\":\"RS256\",\"x\":\"{a:1000}\"}}.{b64url:{{\"sub\":\"a\"}}.{B:86}\n",
        ],
    },
    RuleSpec {
        id: "kubeconfig-client-key",
        description: "kubeconfig user with an embedded client private key (client-key-data)",
        severity: Severity::Critical,
        literals: &[lit_at("client-key-data", 9)],
        pattern: r#"(?-u)^client-key-data"?[ \t]*:[ \t]*["']?(?P<secret>LS0tLS1CRUdJTi[A-Za-z0-9+/]{80,}={0,2})"#,
        before: 0,
        after: 16384,
        check: Check::Entropy(4.5),
        positive: &[
            "users:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: {b64:{pem:CERTIFICATE:780}\n}\n    client-key-data: {b64:{pem:RSA PRIVATE KEY:1190}\n}\n",
            "{{\"users\":[{{\"name\":\"admin\",\"user\":{{\"client-key-data\":\"{b64:{pem:EC PRIVATE KEY:121}\n}\"}}]}\n",
        ],
        negative: &[
            "users:\n- name: admin\n  user:\n    client-certificate-data: DATA+OMITTED\n    client-key-data: DATA+OMITTED\n",
            "    client-key-data: REDACTED\n",
            "    client-key: /etc/kubernetes/pki/admin.key\n    client-certificate-data: {b64:{pem:CERTIFICATE:780}\n}\n",
            "    client-key-data: LS0tLS1CRUdJTi{b:20}\n",
        ],
    },
    RuleSpec {
        id: "kubeconfig-user-token",
        description: "kubeconfig user with an embedded bearer token",
        severity: Severity::Critical,
        // Searched by `sers:\n`: in the node benchmark's tree `user` occurs 880,000 times and
        // `sers` 3,800, and each occurrence of a key's first four bytes costs a comparison.
        literals: &[lit_at("users:\n", 1)],
        pattern: r#"(?-u)^users:\n(?:  )?- (?:name|user):(?s:.)*?\n[ \t]{4,24}token:[ \t]*["']?(?P<secret>[A-Za-z0-9._~+/=-]{16,})"#,
        before: 0,
        after: 16384,
        check: Check::Entropy(2.5),
        positive: &[
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: prod\nusers:\n- name: deployer\n  user:\n    token: {a:40}\n",
            "users:\n- name: tls-bootstrap-token-user\n  user:\n    token: {[a-z0-9]:6}.{[a-z0-9]:16}\n",
            "users:\n  - name: admin\n    user:\n      client-certificate: /etc/kubernetes/pki/admin.crt\n      client-key: /etc/kubernetes/pki/admin.key\n  - name: ci\n    user:\n      token: \"{B:64}\"\n",
        ],
        negative: &[
            "users:\n- name: deployer\n  user:\n    token: ${{KUBE_TOKEN}\n",
            "users:\n- name: deployer\n  user:\n    token: {a:8}\n",
            "users:\n- name: oidc\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: kubectl\n      args: [oidc-login, get-token]\n",
            "users:\n- name: deployer\n  user:\n    token: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
        ],
    },
    RuleSpec {
        id: "kubeconfig-user-password",
        description: "kubeconfig user with an embedded basic-auth password",
        severity: Severity::Critical,
        // Searched by `sers:\n`: in the node benchmark's tree `user` occurs 880,000 times and
        // `sers` 3,800, and each occurrence of a key's first four bytes costs a comparison.
        literals: &[lit_at("users:\n", 1)],
        pattern: r#"(?-u)^users:\n(?:  )?- (?:name|user):(?s:.)*?\n[ \t]{4,24}password:[ \t]*["']?(?P<secret>[^\s"']{6,256})"#,
        before: 0,
        after: 16384,
        check: Check::None,
        positive: &[
            "users:\n- name: admin\n  user:\n    password: {a:16}\n    username: admin\n",
            "users:\n  - user:\n      password: \"{p:20}\"\n      username: {l:6}\n    name: basic\n",
        ],
        negative: &[
            "users:\n- name: admin\n  user:\n    password: ${{ADMIN_PASSWORD}\n    username: admin\n",
            "users:\n- name: admin\n  user:\n    password: changeme\n",
            "users:\n- name: admin\n  user:\n    password: \"\"\n",
        ],
    },
    RuleSpec {
        id: "kubernetes-bootstrap-token",
        description: "Kubernetes bootstrap token in a kubeadm config or command line",
        severity: Severity::High,
        literals: &[
            lit("--token"),
            lit_at("--discovery-token", 2),
            lit_at("--tls-bootstrap-token", 6),
            lit_at("bootstrapToken", 7),
            lit_at("tlsBootstrapToken", 10),
        ],
        pattern: concat!(
            r#"(?-u)^(?:--(?:discovery-|tls-bootstrap-)?token(?:=|[ \t]{1,4})|bootstrapTokens?:(?s:.)*?[ \t-]token:[ \t]*|tlsBootstrapToken:[ \t]*)["']?"#,
            r"(?P<secret>[a-z0-9]{6}\.[a-z0-9]{16})\b"
        ),
        before: 0,
        after: 1024,
        check: Check::None,
        positive: &[
            "kubeadm join 10.0.{d:1}.{d:2}:6443 --token {[a-z0-9]:6}.{[a-z0-9]:16} --discovery-token-ca-cert-hash sha256:{x:64}\n",
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nbootstrapTokens:\n- groups:\n  - system:bootstrappers:kubeadm:default-node-token\n  token: {[a-z0-9]:6}.{[a-z0-9]:16}\n  ttl: 24h0m0s\n",
            "kind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: \"{[a-z0-9]:6}.{[a-z0-9]:16}\"\n    unsafeSkipCAVerification: true\n",
            "discovery:\n  tlsBootstrapToken: {[a-z0-9]:6}.{[a-z0-9]:16}\n",
            "kubeadm join 10.0.0.{d:2}:6443 --discovery-token {[a-z0-9]:6}.{[a-z0-9]:16} --tls-bootstrap-token={[a-z0-9]:6}.{[a-z0-9]:16}\n",
        ],
        negative: &[
            // kubeadm's documentation token.
            "kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef\n",
            "kubeadm join 10.0.0.1:6443 --token {[A-Z]:6}.{[A-Z0-9]:16}\n",
            "kubeadm join 10.0.0.1:6443 --token {[a-z0-9]:6}.{[a-z0-9]:15} --token-ttl 0\n",
            "bootstrapTokens:\n- token: ${{BOOTSTRAP_TOKEN}\n  ttl: 24h0m0s\n",
            "kubeadm join 10.0.0.1:6443 --discovery-token-ca-cert-hash sha256:{x:64}\n",
        ],
    },
    RuleSpec {
        id: "kubernetes-bootstrap-token-secret",
        description: "Kubernetes bootstrap-token Secret's token-secret (YAML, JSON or etcd protobuf)",
        severity: Severity::High,
        literals: &[lit_at("token-secret", 4)],
        pattern: r#"(?-u)^token-secret(?:"?[ \t]*:[ \t]*["']?|\x12\x10)(?P<secret>[a-z0-9]{16}\b|[A-Za-z0-9+/]{22}==)"#,
        before: 0,
        after: 64,
        check: Check::None,
        positive: &[
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bootstrap-token-{[a-z0-9]:6}\n  namespace: kube-system\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: {[a-z0-9]:6}\n  token-secret: {[a-z0-9]:16}\n  usage-bootstrap-authentication: \"true\"\n",
            "data:\n  token-id: {b64:{[a-z0-9]:6}}\n  token-secret: {b64:{[a-z0-9]:16}}\n",
            "{{\"data\":{{\"token-id\":\"{b64:{[a-z0-9]:6}}\",\"token-secret\":\"{b64:{[a-z0-9]:16}}\"}}\n",
            "\n\x08token-id\x12\x06{[a-z0-9]:6}\n\x0ctoken-secret\x12\x10{[a-z0-9]:16}\n",
        ],
        negative: &[
            "  token-secret: {[a-z0-9]:15}\n",
            "  token-secret: ${{TOKEN_SECRET}\n",
            "  token-secret: {[A-Z]:16}\n",
        ],
    },
    RuleSpec {
        id: "docker-config-auth",
        description: "Docker/OCI registry credentials in a config.json or .dockerconfigjson (auths)",
        severity: Severity::High,
        literals: &[lit_at("\"auths\"", 2)],
        pattern: concat!(
            r#"(?-u)^"auths"\s*:\s*\{(?:[^{}]*\{[^{}]*\})*?[^{}]*\{[^{}]*?"#,
            r#""(?:auth|password|identitytoken|registrytoken)"\s*:\s*"(?P<secret>[^"\\\s]{4,})""#
        ),
        before: 0,
        after: 8192,
        check: Check::None,
        positive: &[
            "{{\"auths\":{{\"{l:8}.azurecr.io\":{{\"username\":\"{l:8}\",\"password\":\"{a:32}\",\"auth\":\"{b64:{l:8}:{a:32}}\"}}}\n",
            "{{\n\t\"auths\": {{\n\t\t\"https://index.docker.io/v1/\": {{\n\t\t\t\"auth\": \"{b64:{l:8}:{p:20}}\"\n\t\t}\n\t}\n}\n",
            "{{\"auths\":{{\"quay.io\":{{},\"ghcr.io\":{{\"auth\":\"{b64:{l:8}:{ghtoken:ghp}}\"}}}\n",
        ],
        negative: &[
            "{{\"auths\":{{\"registry.local\":{{}},\"credsStore\":\"desktop\"}\n",
            "{{\"auths\":{{\"registry.local\":{{\"auth\":\"\"}}}\n",
            "{{\"auths\":{{\"registry.local\":{{\"auth\":\"${{REGISTRY_AUTH}\"}}}\n",
            "{{\"credHelpers\":{{\"{d:12}.dkr.ecr.us-east-1.amazonaws.com\":\"ecr-login\"}}\n",
        ],
    },
    RuleSpec {
        id: "kubernetes-encryption-config-key",
        description: "Kubernetes EncryptionConfiguration key (aescbc/aesgcm/secretbox): decrypts etcd",
        severity: Severity::Critical,
        literals: &[lit("aescbc:"), lit("aesgcm:"), lit_at("secretbox:", 4)],
        pattern: concat!(
            r#"(?-u)^(?:aescbc|aesgcm|secretbox):\s{1,32}keys:(?s:.){0,256}?secret:[ \t]*["']?"#,
            r"(?P<secret>[A-Za-z0-9+/]{43}=|[A-Za-z0-9+/]{22}==|[A-Za-z0-9+/]{32})(?:[^A-Za-z0-9+/=]|$)"
        ),
        before: 0,
        after: 1024,
        check: Check::Entropy(3.0),
        positive: &[
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources:\n      - secrets\n    providers:\n      - aescbc:\n          keys:\n            - name: key1\n              secret: {b:43}=\n      - identity: {{}\n",
            "    providers:\n    - secretbox:\n        keys:\n        - name: key2\n          secret: \"{b:43}=\"\n",
            "    - aesgcm:\n        keys:\n        - name: k\n          secret: {b:22}==\n",
        ],
        negative: &[
            "      - aescbc:\n          keys:\n            - name: key1\n              secret: <BASE 64 ENCODED SECRET>\n",
            "      - aescbc:\n          keys:\n            - name: key1\n              secret: ${{ENCRYPTION_KEY}\n",
            "      - aescbc:\n          keys:\n            - name: key1\n              secret: {b:20}\n",
            "    - kms:\n        apiVersion: v2\n        name: vault\n        endpoint: unix:///var/run/kms.sock\n",
        ],
    },
    // ---- Cloud credentials ---------------------------------------------------------
    RuleSpec {
        id: "aws-access-key",
        description: "AWS access key id with its secret access key after it",
        severity: Severity::Critical,
        literals: &[word("AKIA"), word("ASIA")],
        pattern: concat!(
            r"(?-u)^(?P<span>(?:AKIA|ASIA)[A-Z2-7]{16}\b(?s:.){0,300}?[^A-Za-z0-9+/]",
            r"(?P<secret>[A-Za-z0-9+/]{40}))(?:[^A-Za-z0-9+/=]|$)"
        ),
        before: 0,
        after: 400,
        check: Check::Entropy(4.0),
        positive: &[
            "AWS_ACCESS_KEY_ID=AKIA{[A-Z2-7]:16}\nAWS_SECRET_ACCESS_KEY={b:40}\n",
            "[default]\naws_access_key_id = ASIA{[A-Z2-7]:16}\naws_secret_access_key = {b:40}\naws_session_token = {b:300}\n",
            "{{\"AccessKeyId\":\"AKIA{[A-Z2-7]:16}\",\"SecretAccessKey\":\"{b:40}\"}\n",
            "AWS_ACCESS_KEY_ID=AKIA{[A-Z2-7]:16} AWS_SECRET_ACCESS_KEY={b:40}",
        ],
        negative: &[
            // The AWS documentation pair.
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
            "aws_access_key_id = AKIA{[A-Z2-7]:15}\naws_secret_access_key = {b:40}\n",
            "aws_access_key_id = AKIA{[A-Z2-7]:16}\naws_secret_access_key = {b:39}\n",
            "aws_access_key_id = AKIA{[A-Z2-7]:16}\naws_secret_access_key = {b:41}\n",
            "aws_access_key_id = AKIA{[A-Z2-7]:16}\ncommit = {x:40}\n",
            "aws_access_key_id = AKIA{[A-Z2-7]:16}\n# {l:320}\naws_secret_access_key = {b:40}\n",
        ],
    },
    RuleSpec {
        id: "aws-access-key-secret-first",
        description: "AWS secret access key with its access key id after it",
        severity: Severity::Critical,
        literals: &[word("AKIA"), word("ASIA")],
        pattern: concat!(
            r"(?-u)(?:^|[^A-Za-z0-9+/])(?P<span>(?P<secret>[A-Za-z0-9+/]{40})[^A-Za-z0-9+/=]",
            r"(?s:.){0,300}?(?:AKIA|ASIA)[A-Z2-7]{16})\b"
        ),
        before: 360,
        after: 32,
        check: Check::Entropy(4.0),
        positive: &[
            "{{\"SecretAccessKey\":\"{b:40}\",\"AccessKeyId\":\"ASIA{[A-Z2-7]:16}\"}\n",
            "- name: AWS_SECRET_ACCESS_KEY\n  value: {b:40}\n- name: AWS_ACCESS_KEY_ID\n  value: AKIA{[A-Z2-7]:16}\n",
            "aws_secret_access_key={b:40} aws_access_key_id=AKIA{[A-Z2-7]:16}",
        ],
        negative: &[
            "secret = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nkey = AKIAIOSFODNN7EXAMPLE\n",
            "secret = {x:40}\nkey = AKIA{[A-Z2-7]:16}\n",
            "secret = {b:40}\n# {l:320}\nkey = AKIA{[A-Z2-7]:16}\n",
            "secret = {b:40}\nkey = AKIA{[a-z]:16}\n",
        ],
    },
    RuleSpec {
        id: "gcp-service-account-key",
        description: "Google Cloud service-account JSON key",
        severity: Severity::Critical,
        literals: &[lit_at("\"service_account\"", 8)],
        // `type` before or after the key, within one JSON object (`[^{}]`): both parts
        // are optional here, but the engine keeps only matches that contain the literal,
        // so one of them is always there.
        pattern: concat!(
            r#"(?-u)(?:"type"\s*:\s*"service_account"[^{}]*?)?"private_key"\s*:\s*""#,
            r#"(?P<secret>-----BEGIN (?:RSA )?PRIVATE KEY-----[A-Za-z0-9+/=\\ ]{64,}"#,
            r#"-----END (?:RSA )?PRIVATE KEY-----(?:\\n)?)""#,
            r#"(?:[^{}]*?"type"\s*:\s*"service_account")?"#
        ),
        before: 4096,
        after: 4096,
        check: Check::None,
        positive: &[
            "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"{l:6}-{d:6}\",\n  \"private_key_id\": \"{x:40}\",\n  \"private_key\": \"{json:{pem:PRIVATE KEY:1217}\n}\",\n  \"client_email\": \"{l:8}@{l:6}-{d:6}.iam.gserviceaccount.com\",\n  \"client_id\": \"{d:21}\",\n  \"auth_uri\": \"https://accounts.google.com/o/oauth2/auth\",\n  \"token_uri\": \"https://oauth2.googleapis.com/token\"\n}\n",
            // Keys sorted (jq -S): private_key comes before type.
            "{{\"client_email\":\"{l:8}@{l:6}.iam.gserviceaccount.com\",\"client_id\":\"{d:21}\",\"private_key\":\"{json:{pem:PRIVATE KEY:2374}\n}\",\"private_key_id\":\"{x:40}\",\"project_id\":\"{l:8}\",\"token_uri\":\"https://oauth2.googleapis.com/token\",\"type\":\"service_account\"}\n",
        ],
        negative: &[
            "{{\"type\": \"service_account\", \"project_id\": \"p\", \"private_key_id\": \"{x:40}\", \"private_key\": \"\", \"client_email\": \"a@p.iam.gserviceaccount.com\"}\n",
            "{{\"type\": \"service_account\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n<redacted>\\n-----END PRIVATE KEY-----\\n\"}\n",
            "{{\"type\": \"authorized_user\", \"client_id\": \"{d:21}.apps.googleusercontent.com\", \"refresh_token\": \"1//{B:100}\"}\n",
        ],
    },
    RuleSpec {
        id: "azure-storage-connection-string",
        description: "Azure Storage connection string with an account key",
        severity: Severity::Critical,
        literals: &[lit_at("AccountKey=", 5)],
        pattern: concat!(
            r"(?-u)(?P<span>(?:DefaultEndpointsProtocol=https?;)?AccountName=[a-z0-9]{3,24};",
            r"AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==))(?:[^A-Za-z0-9+/=]|$)"
        ),
        before: 96,
        after: 128,
        check: Check::Entropy(4.5),
        positive: &[
            "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName={[a-z0-9]:12};AccountKey={b:86}==;EndpointSuffix=core.windows.net\n",
            "{{\"ConnectionStrings\": {{\"Storage\": \"DefaultEndpointsProtocol=https;AccountName={[a-z0-9]:24};AccountKey={b:86}==;EndpointSuffix=core.windows.net\"}}\n",
            "  connectionString: AccountName={[a-z0-9]:3};AccountKey={b:86}==",
        ],
        negative: &[
            // Azurite's well-known development account.
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;\n",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=<account-key>;EndpointSuffix=core.windows.net\n",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={b:85}==;EndpointSuffix=core.windows.net\n",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${{STORAGE_KEY}\n",
        ],
    },
    // ---- Tokens ----------------------------------------------------------------------
    RuleSpec {
        id: "github-personal-access-token",
        description: "GitHub personal access token (classic)",
        severity: Severity::High,
        literals: &[word("ghp_")],
        pattern: r"(?-u)^(?P<secret>ghp_[A-Za-z0-9]{36})\b",
        before: 0,
        after: 48,
        check: Check::GithubChecksum,
        positive: &[
            "GITHUB_TOKEN={ghtoken:ghp}\n",
            "  github-token: \"{ghtoken:ghp}\"\n",
            "https://{l:6}:{ghtoken:ghp}@github.com/{l:6}/{l:8}.git",
        ],
        negative: &[
            "GITHUB_TOKEN={ghtoken-bad:ghp}\n",
            "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
            "GITHUB_TOKEN=ghp_{a:35}\n",
            "GITHUB_TOKEN=ghp_{a:37}\n",
        ],
    },
    RuleSpec {
        id: "github-oauth-token",
        description: "GitHub OAuth access token",
        severity: Severity::High,
        literals: &[word("gho_")],
        pattern: r"(?-u)^(?P<secret>gho_[A-Za-z0-9]{36})\b",
        before: 0,
        after: 48,
        check: Check::GithubChecksum,
        positive: &["Authorization: token {ghtoken:gho}\n", "{{\"access_token\":\"{ghtoken:gho}\"}\n"],
        negative: &[
            "Authorization: token {ghtoken-bad:gho}\n",
            // GitHub's documentation example.
            "Authorization: token gho_16C7e42F292c6912E7710c838347Ae178B4a\n",
        ],
    },
    RuleSpec {
        id: "github-app-token",
        description: "GitHub App user-to-server or installation (server-to-server) token",
        severity: Severity::High,
        literals: &[word("ghu_"), word("ghs_")],
        pattern: r"(?-u)^(?P<secret>gh[us]_[A-Za-z0-9]{36})\b",
        before: 0,
        after: 48,
        check: Check::GithubChecksum,
        positive: &[
            "git clone https://x-access-token:{ghtoken:ghs}@github.com/{l:6}/{l:6}.git\n",
            "GH_TOKEN={ghtoken:ghu}\n",
        ],
        negative: &["GH_TOKEN={ghtoken-bad:ghs}\n", "GH_TOKEN=ghs_{a:30}\n"],
    },
    RuleSpec {
        id: "github-refresh-token",
        description: "GitHub App refresh token",
        severity: Severity::High,
        literals: &[word("ghr_")],
        pattern: r"(?-u)^(?P<secret>ghr_[A-Za-z0-9]{36})\b",
        before: 0,
        after: 48,
        check: Check::GithubChecksum,
        positive: &["{{\"refresh_token\":\"{ghtoken:ghr}\"}\n", "refresh_token={ghtoken:ghr}&grant_type=refresh_token"],
        negative: &["{{\"refresh_token\":\"{ghtoken-bad:ghr}\"}\n", "ghr_{a:36}_x\n"],
    },
    RuleSpec {
        id: "github-fine-grained-pat",
        description: "GitHub fine-grained personal access token",
        severity: Severity::High,
        literals: &[word_at("github_pat_", 5)],
        pattern: r"(?-u)^(?P<secret>github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b",
        before: 0,
        after: 96,
        check: Check::Entropy(4.0),
        positive: &["GITHUB_TOKEN=github_pat_{a:22}_{a:59}\n", "  token: \"github_pat_{a:22}_{a:59}\"\n"],
        negative: &[
            "GITHUB_TOKEN=github_pat_{a:22}_{a:58}\n",
            "GITHUB_TOKEN=github_pat_{a:22}{a:60}\n",
            "GITHUB_TOKEN=github_pat_xxxxxxxxxxxxxxxxxxxxxx_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
        ],
    },
    RuleSpec {
        id: "gitlab-personal-access-token",
        description: "GitLab personal, project or group access token",
        severity: Severity::High,
        literals: &[word("glpat-")],
        pattern: r"(?-u)^(?P<secret>glpat-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{2}\.[0-9a-z]{7,9})?)",
        before: 0,
        after: 330,
        check: Check::Entropy(3.0),
        positive: &[
            "GITLAB_TOKEN=glpat-{B:20}\n",
            "PRIVATE-TOKEN: glpat-{B:27}.01.{[0-9a-z]:9}\n",
            "  token: \"glpat-{a:20}\"\n",
        ],
        negative: &[
            "GITLAB_TOKEN=glpat-{B:19}\n",
            "GITLAB_TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx\n",
            "GITLAB_TOKEN=glpat-<your-token>\n",
            "MY_VAR=myglpat-{B:20}\n",
        ],
    },
    RuleSpec {
        id: "gitlab-deploy-token",
        description: "GitLab deploy token",
        severity: Severity::High,
        literals: &[word("gldt-")],
        pattern: r"(?-u)^(?P<secret>gldt-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{2}\.[0-9a-z]{7,9})?)",
        before: 0,
        after: 330,
        check: Check::Entropy(3.0),
        positive: &[
            "CI_DEPLOY_PASSWORD=gldt-{B:20}\n",
            "password: gldt-{a:20}\n",
        ],
        negative: &["CI_DEPLOY_PASSWORD=gldt-{a:12}\n", "CI_DEPLOY_PASSWORD=gldt-XXXXXXXXXXXXXXXXXXXX\n"],
    },
    RuleSpec {
        id: "gitlab-runner-token",
        description: "GitLab runner authentication token",
        severity: Severity::High,
        literals: &[word("glrt-")],
        pattern: r"(?-u)^(?P<secret>glrt-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{2}\.[0-9a-z]{7,9})?)",
        before: 0,
        after: 330,
        check: Check::Entropy(3.0),
        positive: &[
            "[[runners]]\n  name = \"{l:8}\"\n  url = \"https://gitlab.com\"\n  token = \"glrt-{B:20}\"\n",
            "  token = \"glrt-t1_{B:20}.0w1{[0-9a-z]:6}\"\n",
        ],
        negative: &["  token = \"glrt-{a:10}\"\n", "  token = \"glrt-REDACTED\"\n"],
    },
    RuleSpec {
        id: "gitlab-pipeline-trigger-token",
        description: "GitLab pipeline trigger token",
        severity: Severity::High,
        literals: &[word("glptt-")],
        pattern: r"(?-u)^(?P<secret>glptt-[0-9a-f]{40})\b",
        before: 0,
        after: 64,
        check: Check::Entropy(3.0),
        positive: &[
            "curl -X POST -F token=glptt-{x:40} -F ref=main https://gitlab.example/api/v4/projects/1/trigger/pipeline\n",
            "TRIGGER_TOKEN=glptt-{x:40}\n",
        ],
        negative: &["TRIGGER_TOKEN=glptt-{x:39}\n", "TRIGGER_TOKEN=glptt-{[g-z]:40}\n"],
    },
    RuleSpec {
        id: "slack-bot-token",
        description: "Slack bot token",
        severity: Severity::High,
        literals: &[word("xoxb-")],
        pattern: r"(?-u)^(?P<secret>xoxb-[0-9]{8,14}-[0-9]{8,14}-[A-Za-z0-9]{20,40}|xoxb-[0-9]-[A-Za-z0-9]{140,180})\b",
        before: 0,
        after: 256,
        check: Check::Entropy(3.0),
        positive: &[
            "SLACK_BOT_TOKEN=xoxb-{d:12}-{d:13}-{a:24}\n",
            "  slack_token: \"xoxb-{d:11}-{d:12}-{a:24}\"\n",
            "{{\"token\":\"xoxe.xoxb-1-{a:163}\"}\n",
        ],
        negative: &[
            "SLACK_BOT_TOKEN=xoxb-{d:12}-{d:13}\n",
            "SLACK_BOT_TOKEN=xoxb-{d:12}-{d:13}-{a:10}\n",
            "SLACK_BOT_TOKEN=xoxb-your-bot-token-here\n",
        ],
    },
    RuleSpec {
        id: "slack-user-token",
        description: "Slack user token",
        severity: Severity::High,
        literals: &[word("xoxp-")],
        pattern: r"(?-u)^(?P<secret>xoxp-[0-9]{8,14}-[0-9]{8,14}-[0-9]{8,14}-[a-f0-9]{32}|xoxp-[0-9]-[A-Za-z0-9]{140,180})\b",
        before: 0,
        after: 256,
        check: Check::Entropy(3.0),
        positive: &[
            "SLACK_USER_TOKEN=xoxp-{d:12}-{d:12}-{d:13}-{x:32}\n",
            "{{\"authed_user\":{{\"access_token\":\"xoxp-{d:11}-{d:11}-{d:13}-{x:32}\"}}\n",
        ],
        negative: &[
            "SLACK_USER_TOKEN=xoxp-{d:12}-{d:12}-{d:13}-{x:31}\n",
            "SLACK_USER_TOKEN=xoxp-{d:12}-{d:12}-{d:13}-{[g-z]:32}\n",
        ],
    },
    RuleSpec {
        id: "slack-token",
        description: "Slack workspace, refresh or configuration token",
        severity: Severity::High,
        literals: &[word("xoxa-"), word("xoxr-"), word("xoxe-")],
        pattern: r"(?-u)^(?P<secret>xox[are]-(?:[0-9]{1,2}-)?[A-Za-z0-9-]{20,250})",
        before: 0,
        after: 280,
        check: Check::Entropy(3.0),
        positive: &[
            "SLACK_REFRESH_TOKEN=xoxe-1-{a:146}\n",
            "{{\"refresh_token\":\"xoxr-{a:40}\"}\n",
            "token: xoxa-2-{d:12}-{d:12}-{x:32}\n",
        ],
        negative: &["SLACK_TOKEN=xoxa-{a:10}\n", "SLACK_TOKEN=xoxe-1-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"],
    },
    RuleSpec {
        id: "slack-webhook-url",
        description: "Slack incoming-webhook or workflow URL (posts to one channel)",
        severity: Severity::Medium,
        literals: &[lit_at("hooks.slack.com/", 3)],
        pattern: concat!(
            r"(?-u)^hooks\.slack\.com/(?:services/T[A-Z0-9]{8,12}/B[A-Z0-9]{8,12}/(?P<secret>[A-Za-z0-9]{24})",
            r"|workflows/T[A-Z0-9]{8,12}/A[A-Z0-9]{8,12}/[0-9]{17,19}/[A-Za-z0-9]{32})\b"
        ),
        before: 0,
        after: 160,
        check: Check::None,
        positive: &[
            "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T{[A-Z0-9]:8}/B{[A-Z0-9]:10}/{a:24}\n",
            "  webhook: \"https://hooks.slack.com/workflows/T{[A-Z0-9]:10}/A{[A-Z0-9]:10}/{d:18}/{a:32}\"\n",
        ],
        negative: &[
            "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX\n",
            "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T{[A-Z0-9]:8}/B{[A-Z0-9]:10}/{a:12}\n",
        ],
    },
    RuleSpec {
        id: "stripe-live-secret-key",
        description: "Stripe live-mode secret or restricted key",
        severity: Severity::High,
        literals: &[word("sk_live_"), word("rk_live_")],
        pattern: r"(?-u)^(?P<secret>[sr]k_live_[A-Za-z0-9]{24,247})\b",
        before: 0,
        after: 264,
        check: Check::Entropy(3.0),
        positive: &["STRIPE_SECRET_KEY=sk_live_{a:24}\n", "  stripeKey: \"rk_live_{a:99}\"\n"],
        negative: &[
            "STRIPE_SECRET_KEY=sk_live_{a:12}\n",
            "STRIPE_SECRET_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx\n",
            "STRIPE_PUBLISHABLE_KEY=pk_live_{a:24}\n",
            "\"desk_live_{a:24}\": true\n",
        ],
    },
    RuleSpec {
        id: "stripe-test-secret-key",
        description: "Stripe test-mode secret or restricted key (no real money, still an account key)",
        severity: Severity::Low,
        literals: &[word("sk_test_"), word("rk_test_")],
        pattern: r"(?-u)^(?P<secret>[sr]k_test_[A-Za-z0-9]{24,247})\b",
        before: 0,
        after: 264,
        check: Check::Entropy(3.0),
        positive: &["STRIPE_SECRET_KEY=sk_test_{a:24}\n", "stripe.api_key = \"rk_test_{a:99}\"\n"],
        negative: &[
            "STRIPE_SECRET_KEY=sk_test_{a:10}\n",
            "STRIPE_SECRET_KEY=sk_test_EXAMPLE{a:17}\n",
            // A prefix inside a longer word.
            "\"task_test_{a:24}\": true\n",
        ],
    },
    RuleSpec {
        id: "stripe-webhook-secret",
        description: "Stripe webhook signing secret",
        severity: Severity::Medium,
        literals: &[word("whsec_")],
        pattern: r"(?-u)^(?P<secret>whsec_[A-Za-z0-9+/]{32,88})\b",
        before: 0,
        after: 100,
        check: Check::Entropy(3.5),
        positive: &["STRIPE_WEBHOOK_SECRET=whsec_{a:32}\n", "  signingSecret: \"whsec_{a:64}\"\n"],
        negative: &["STRIPE_WEBHOOK_SECRET=whsec_{a:16}\n", "STRIPE_WEBHOOK_SECRET=whsec_...\n"],
    },
    RuleSpec {
        id: "vault-token",
        description: "HashiCorp Vault service, batch or recovery token",
        severity: Severity::High,
        literals: &[word("hvs."), word("hvb."), word("hvr.")],
        pattern: r"(?-u)^(?P<secret>hv[sbr]\.[A-Za-z0-9_-]{24,512})",
        before: 0,
        after: 520,
        check: Check::Entropy(3.0),
        positive: &[
            "VAULT_TOKEN=hvs.{B:90}\n",
            "X-Vault-Token: hvb.{a:138}\n",
            "{{\"auth\":{{\"client_token\":\"hvs.{a:24}\",\"accessor\":\"{a:24}\"}}\n",
        ],
        negative: &[
            "VAULT_TOKEN=hvs.{a:10}\n",
            "VAULT_TOKEN=hvs.xxxxxxxxxxxxxxxxxxxxxxxx\n",
            "VAULT_TOKEN=hvs.${{VAULT_TOKEN}\n",
            "VAULT_MARKER=prefixhvs.{a:24}\n",
        ],
    },
    // ---- Tokens of registries, CI and cloud services (issue 32) -----------------------
    RuleSpec {
        id: "gitlab-token",
        description: "GitLab CI job, agent, feed, OAuth, SCIM, incoming-mail or feature-flag token",
        severity: Severity::High,
        literals: &[
            word("glcbt-"),
            word("glagent-"),
            word("glft-"),
            word("glsoat-"),
            word("gloas-"),
            word("glimt-"),
            word("glffct-"),
        ],
        pattern: r"(?-u)^(?P<secret>gl(?:cbt|agent|ft|soat|oas|imt|ffct)-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{2}\.[0-9a-z]{7,9})?)",
        before: 0,
        after: 330,
        check: Check::Entropy(3.0),
        positive: &[
            "CI_JOB_TOKEN=glcbt-{x:2}_{B:20}\n",
            "  token: glagent-{B:50}\n",
            "GITLAB_OAUTH_SECRET=gloas-{x:64}\n",
            "curl -H 'Authorization: Bearer glsoat-{B:20}' https://gitlab.example/api/scim/v2\n",
        ],
        negative: &["CI_JOB_TOKEN=glcbt-{a:10}\n", "x=myglft-{B:20}\n", "glagent-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"],
    },
    RuleSpec {
        id: "gitlab-runner-registration-token",
        description: "GitLab runner registration token (legacy)",
        severity: Severity::High,
        literals: &[word("GR1348941")],
        pattern: r"(?-u)^(?P<secret>GR1348941[A-Za-z0-9_-]{20})(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 40,
        check: Check::Entropy(3.0),
        positive: &[
            "gitlab-runner register --url https://gitlab.com --registration-token GR1348941{B:20}\n",
            "REGISTRATION_TOKEN=\"GR1348941{B:20}\"\n",
        ],
        negative: &["REGISTRATION_TOKEN=GR1348941{B:12}\n", "id=AXGR1348941{B:20}\n"],
    },
    RuleSpec {
        id: "docker-hub-token",
        description: "Docker Hub personal or organisation access token",
        severity: Severity::High,
        literals: &[word("dckr_pat_"), word("dckr_oat_")],
        pattern: r"(?-u)^(?P<secret>dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,40})(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 60,
        check: Check::Entropy(3.0),
        positive: &[
            "echo dckr_pat_{B:27} | docker login -u builder --password-stdin\n",
            "DOCKERHUB_TOKEN=dckr_oat_{B:32}\n",
        ],
        negative: &["DOCKERHUB_TOKEN=dckr_pat_{B:12}\n", "DOCKERHUB_TOKEN=dckr_pat_xxxxxxxxxxxxxxxxxxxxxxxxxxx\n"],
    },
    RuleSpec {
        id: "npm-token",
        description: "npm access token",
        severity: Severity::High,
        literals: &[word("npm_")],
        pattern: r"(?-u)^(?P<secret>npm_[A-Za-z0-9]{36})(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 42,
        check: Check::Entropy(3.5),
        positive: &["//registry.npmjs.org/:_authToken=npm_{a:36}\n", "NPM_TOKEN: npm_{a:36}\n"],
        negative: &["npm_config_cache=/tmp/{l:36}\n", "NPM_TOKEN=npm_{a:20}\n", "x=mynpm_{a:36}\n"],
    },
    RuleSpec {
        id: "pypi-token",
        description: "PyPI API token",
        severity: Severity::High,
        literals: &[word_at("pypi-AgEIcHlwaS5vcmc", 5)],
        pattern: r"(?-u)^(?P<secret>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})",
        before: 0,
        after: 400,
        check: Check::Entropy(3.5),
        positive: &[
            "[pypi]\n  username = __token__\n  password = pypi-AgEIcHlwaS5vcmc{B:120}\n",
            "TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc{B:70}\n",
        ],
        negative: &["TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc{B:20}\n", "see pypi-AgEIcHlwaS5vcmcxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"],
    },
    RuleSpec {
        id: "terraform-cloud-token",
        description: "Terraform Cloud / Enterprise API token",
        severity: Severity::High,
        literals: &[lit(".atlasv1.")],
        pattern: r"(?-u)(?:^|[^A-Za-z0-9])(?P<span>(?P<secret>[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}))(?:[^A-Za-z0-9_=-]|$)",
        before: 15,
        after: 80,
        check: Check::Entropy(3.5),
        positive: &[
            "credentials \"app.terraform.io\" {{\n  token = \"{a:14}.atlasv1.{B:67}\"\n}\n",
            "TFE_TOKEN={a:14}.atlasv1.{B:60}\n",
        ],
        negative: &["TFE_TOKEN={a:14}.atlasv1.{B:20}\n", "TFE_TOKEN={a:10}.atlasv1.{B:67}\n"],
    },
    RuleSpec {
        id: "gcp-api-key",
        description: "Google Cloud API key",
        severity: Severity::High,
        literals: &[word("AIza")],
        pattern: r"(?-u)^(?P<span>(?P<secret>AIza[0-9A-Za-z_-]{35}))(?:[^0-9A-Za-z_-]|$)",
        before: 0,
        after: 40,
        check: Check::Entropy(3.5),
        positive: &["GOOGLE_API_KEY=AIza{B:35}\n", "  \"apiKey\": \"AIza{B:35}\",\n"],
        negative: &["GOOGLE_API_KEY=AIza{B:20}\n", "GOOGLE_API_KEY=AIzaxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", "x=XTAIza{B:35}\n"],
    },
    RuleSpec {
        id: "gcp-oauth-client-secret",
        description: "Google OAuth client secret",
        severity: Severity::High,
        literals: &[word("GOCSPX-")],
        pattern: r"(?-u)^(?P<span>(?P<secret>GOCSPX-[0-9A-Za-z_-]{28}))(?:[^0-9A-Za-z_-]|$)",
        before: 0,
        after: 40,
        check: Check::Entropy(3.5),
        positive: &["  \"client_secret\": \"GOCSPX-{B:28}\",\n", "OAUTH_CLIENT_SECRET=GOCSPX-{B:28}\n"],
        negative: &["OAUTH_CLIENT_SECRET=GOCSPX-{B:10}\n", "OAUTH_CLIENT_SECRET=GOCSPX-<secret>\n"],
    },
    RuleSpec {
        id: "gcp-oauth-access-token",
        description: "Google OAuth access token",
        severity: Severity::Medium,
        literals: &[word("ya29.")],
        pattern: r"(?-u)^(?P<secret>ya29\.[0-9A-Za-z_-]{30,})",
        before: 0,
        after: 2100,
        check: Check::Entropy(3.5),
        positive: &["Authorization: Bearer ya29.{B:150}\n", "{{\"access_token\": \"ya29.a0{B:200}\", \"expires_in\": 3599}\n"],
        negative: &["Authorization: Bearer ya29.{B:10}\n", "token ya29.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"],
    },
    RuleSpec {
        id: "azure-ad-client-secret",
        description: "Microsoft Entra ID (Azure AD) application client secret",
        severity: Severity::Critical,
        literals: &[lit("Q~")],
        pattern: r"(?-u)(?:^|[^A-Za-z0-9_~.-])(?P<span>(?P<secret>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}))(?:[^A-Za-z0-9_~.-]|$)",
        before: 5,
        after: 40,
        check: Check::Entropy(3.5),
        positive: &["AZURE_CLIENT_SECRET={a:3}{d:1}Q~{B:34}\n", "  \"clientSecret\": \"{a:3}{d:1}Q~{a:31}\",\n"],
        negative: &["AZURE_CLIENT_SECRET={a:3}{d:1}Q~{B:10}\n", "AZURE_CLIENT_SECRET={a:3}xQ~{B:34}\n"],
    },
    RuleSpec {
        id: "azure-shared-access-key",
        description: "Azure Service Bus, Event Hubs or IoT Hub shared access key",
        severity: Severity::High,
        literals: &[lit_at("SharedAccessKey=", 6)],
        pattern: r"(?-u)^SharedAccessKey=(?P<secret>[A-Za-z0-9+/]{42,43}=)",
        before: 0,
        after: 64,
        check: Check::Entropy(3.5),
        positive: &[
            "Endpoint=sb://{l:8}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={b:43}=\n",
            "IOTHUB=HostName={l:6}.azure-devices.net;DeviceId=d1;SharedAccessKey={b:43}=\n",
        ],
        negative: &["SharedAccessKey=<key>\n", "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={b:20}=\n"],
    },
    RuleSpec {
        id: "azure-devops-pat",
        description: "Azure DevOps personal access token (84-character format)",
        severity: Severity::High,
        literals: &[lit("AZDO")],
        pattern: r"(?-u)(?:^|[^A-Za-z0-9])(?P<span>(?P<secret>[A-Za-z0-9]{52}JQQJ[A-Za-z0-9]{20}AZDO[A-Za-z0-9]{4}))(?:[^A-Za-z0-9]|$)",
        before: 77,
        after: 10,
        check: Check::Entropy(3.5),
        positive: &["AZURE_DEVOPS_EXT_PAT={a:52}JQQJ99{a:2}{[A-L]:1}{a:15}AZDO{a:4}\n", "  pat: {a:52}JQQJ9D{a:18}AZDO{a:4}\n"],
        negative: &["AZURE_DEVOPS_EXT_PAT={a:40}JQQJ99{a:18}AZDO{a:4}\n", "AZDO_ORG=contoso\n"],
    },
    RuleSpec {
        id: "slack-app-token",
        description: "Slack app-level token",
        severity: Severity::High,
        literals: &[word("xapp-")],
        pattern: r"(?-u)^(?P<secret>xapp-[0-9]-[A-Z0-9]{8,14}-[0-9]{8,16}-[a-z0-9]{32,80})\b",
        before: 0,
        after: 140,
        check: Check::Entropy(3.0),
        positive: &["SLACK_APP_TOKEN=xapp-1-A{[A-Z0-9]:10}-{d:13}-{x:64}\n", "  app_token: \"xapp-1-A{[A-Z0-9]:9}-{d:12}-{x:64}\"\n"],
        negative: &["SLACK_APP_TOKEN=xapp-1-A{[A-Z0-9]:10}-{d:13}-{x:10}\n", "SLACK_APP_TOKEN=xapp-<token>\n"],
    },
    RuleSpec {
        id: "openai-api-key",
        description: "OpenAI API key (project, service-account, admin or legacy)",
        severity: Severity::High,
        literals: &[lit("T3BlbkFJ")],
        pattern: r"(?-u)(?:^|[^A-Za-z0-9_-])(?P<span>(?P<secret>sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,80}T3BlbkFJ[A-Za-z0-9_-]{20,80}))(?:[^A-Za-z0-9_-]|$)",
        before: 100,
        after: 90,
        check: Check::Entropy(3.5),
        positive: &["OPENAI_API_KEY=sk-proj-{B:74}T3BlbkFJ{B:74}\n", "openai.api_key = \"sk-{a:20}T3BlbkFJ{a:20}\"\n", "OPENAI_ADMIN_KEY=sk-admin-{B:58}T3BlbkFJ{B:58}\n"],
        negative: &["OPENAI_API_KEY=sk-proj-{B:10}T3BlbkFJ{B:10}\n", "x=task-{a:20}T3BlbkFJ{a:20}\n"],
    },
    RuleSpec {
        id: "anthropic-api-key",
        description: "Anthropic API or admin key",
        severity: Severity::High,
        literals: &[word("sk-ant-")],
        pattern: r"(?-u)^(?P<secret>sk-ant-(?:api|admin|oat)[0-9]{2}-[A-Za-z0-9_-]{80,100}AA)(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 130,
        check: Check::Entropy(3.5),
        positive: &["ANTHROPIC_API_KEY=sk-ant-api03-{B:93}AA\n", "  \"x-api-key\": \"sk-ant-admin01-{B:93}AA\"\n"],
        negative: &["ANTHROPIC_API_KEY=sk-ant-api03-{B:20}AA\n", "ANTHROPIC_API_KEY=sk-ant-api03-xxxx\n"],
    },
    RuleSpec {
        id: "sendgrid-api-key",
        description: "SendGrid API key",
        severity: Severity::High,
        literals: &[word("SG.")],
        pattern: r"(?-u)^(?P<span>(?P<secret>SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}))(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 72,
        check: Check::Entropy(3.5),
        positive: &["SENDGRID_API_KEY=SG.{B:22}.{B:43}\n", "  apiKey: \"SG.{B:22}.{B:43}\"\n"],
        negative: &["SENDGRID_API_KEY=SG.{B:22}.{B:20}\n", "version SG.{d:2}.{d:3}\n"],
    },
    RuleSpec {
        id: "new-relic-api-key",
        description: "New Relic user API key or Insights insert key",
        severity: Severity::High,
        literals: &[word("NRAK-"), word("NRII-")],
        pattern: r"(?-u)^(?P<secret>NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32})(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 40,
        check: Check::Entropy(3.0),
        positive: &["NEW_RELIC_API_KEY=NRAK-{[A-Z0-9]:27}\n", "  insert_key: \"NRII-{B:32}\"\n"],
        negative: &["NEW_RELIC_API_KEY=NRAK-{[A-Z0-9]:10}\n", "NEW_RELIC_API_KEY=NRAK-XXXXXXXXXXXXXXXXXXXXXXXXXXX\n"],
    },
    RuleSpec {
        id: "grafana-token",
        description: "Grafana Cloud access policy token or Grafana service account token",
        severity: Severity::High,
        literals: &[word("glc_"), word("glsa_")],
        pattern: r"(?-u)^(?P<secret>glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})(?:[^A-Za-z0-9+/=_]|$)",
        before: 0,
        after: 420,
        check: Check::Entropy(3.5),
        positive: &["GRAFANA_CLOUD_TOKEN=glc_{b:120}==\n", "  token: glsa_{a:32}_{x:8}\n"],
        negative: &["GRAFANA_CLOUD_TOKEN=glc_{b:10}\n", "  token: glsa_{a:10}_{x:8}\n"],
    },
    RuleSpec {
        id: "openshift-token",
        description: "OpenShift OAuth access token",
        severity: Severity::High,
        literals: &[word("sha256~")],
        pattern: r"(?-u)^(?P<span>(?P<secret>sha256~[A-Za-z0-9_-]{43}))(?:[^A-Za-z0-9_-]|$)",
        before: 0,
        after: 52,
        check: Check::Entropy(3.5),
        positive: &["oc login --token=sha256~{B:43} --server=https://api.{l:6}.example:6443\n", "    token: sha256~{B:43}\n"],
        negative: &["    token: sha256~{B:20}\n", "digest sha256~xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"],
    },
    RuleSpec {
        id: "vault-token-legacy",
        description: "HashiCorp Vault token in the format before Vault 1.10 (s., b., r.)",
        severity: Severity::High,
        // Named by Vault's variable or header: the bare prefixes are too short to key on,
        // and `token: s.x` is as often code (`s.bootstrapTokenSecretName`) as a token.
        literals: &[lit("VAULT_TOKEN"), lit("Vault-Token"), lit("vault_token"), lit("vault-token")],
        pattern: concat!(
            r#"(?-u)^(?:VAULT_TOKEN|Vault-Token|vault_token|vault-token)["']?[ \t]*[:=][ \t]*["']?"#,
            r"(?P<secret>[sbr]\.[A-Za-z0-9_-]{24,1024})(?:[^A-Za-z0-9_.-]|$)"
        ),
        before: 0,
        after: 1100,
        check: Check::Entropy(3.0),
        positive: &[
            "export VAULT_TOKEN=s.{a:24}\n",
            "curl -H \"X-Vault-Token: s.{a:24}\" https://vault.internal:8200/v1/secret/app\n",
            "vault_token: \"b.{a:90}\"\n",
            "NOMAD_VAULT_TOKEN=s.{a:24}\n",
            "x-vault-token: s.{a:24}\n",
            "VAULT_TOKEN=b.AAAAAQ{B:140}\n",
        ],
        negative: &[
            "export VAULT_TOKEN=s.{a:10}\n",
            "export VAULT_TOKEN=root\n",
            "\t\tToken: s.bootstrapTokenSecretNameForNode,\n",
        ],
    },
    RuleSpec {
        id: "vault-unseal-key",
        description: "HashiCorp Vault unseal or recovery key share (operator init output, operator unseal)",
        severity: Severity::Critical,
        literals: &[lit("operator unseal"), lit("Unseal Key "), lit("Recovery Key "), lit_at("\"unseal_keys_", 1), lit_at("\"recovery_keys_", 1)],
        // A share is 33 bytes: 44 characters of base64, or 66 of hex (`-format=json`
        // prints both; the first share of a list stands for the list).
        pattern: concat!(
            r"(?-u)^(?:operator[ \t]+unseal(?:[ \t]+-[A-Za-z-]+(?:=[^\s]*)?)*[ \t]+",
            r"|(?:Unseal|Recovery) Key [0-9]{1,2}:[ \t]*",
            r#"|"(?:unseal|recovery)_keys_(?:b64|hex)"[ \t]*:[ \t]*\[\s*")"#,
            r"(?P<secret>[A-Za-z0-9+/]{44}|[0-9a-f]{66})(?:[^A-Za-z0-9+/=]|$)"
        ),
        before: 0,
        after: 160,
        check: Check::Entropy(3.0),
        positive: &[
            "Unseal Key 1: {b:44}\nUnseal Key 2: {b:44}\n\nInitial Root Token: hvs.{a:24}\n",
            "Recovery Key 1: {b:44}\n",
            "vault operator unseal {b:44}\n",
            "vault operator unseal -address=https://vault.{l:6}.test:8200 {b:44}\n",
            "{{\n  \"unseal_keys_b64\": [\n    \"{b:44}\"\n  ],\n  \"unseal_keys_hex\": [\n    \"{x:66}\"\n  ]\n}\n",
        ],
        negative: &[
            "Unseal Key 1: <redacted>\n",
            "vault operator unseal\nvault token lookup -accessor\n",
            "vault operator unseal -reset\n",
            "{{\"recovery_keys_b64\": [], \"unseal_shares\": 3}\n",
            "Unseal Key 1: {b:20}\n",
        ],
    },
    // ---- Database URLs with an inline password ------------------------------------
    RuleSpec {
        id: "postgres-url-with-password",
        description: "PostgreSQL connection URL with an inline password",
        severity: Severity::High,
        literals: &[lit_at("postgres://", 6), lit_at("postgresql://", 6), lit_at("postgresql+", 6)],
        pattern: DB_URL,
        before: 0,
        after: 720,
        check: Check::None,
        positive: &[
            "DATABASE_URL=postgres://{l:8}:{a:24}@{l:6}.{l:4}.svc.cluster.local:5432/{l:6}?sslmode=require\n",
            "  url: \"postgresql+asyncpg://app:{p:20}@10.0.{d:1}.{d:2}/app\"\n",
            "2024-01-01T00:00:00Z INFO connecting to postgresql://{l:6}:{a:16}@[fd00::{x:4}]:5432/app",
        ],
        negative: &[
            "DATABASE_URL=postgres://app:${{DB_PASSWORD}@db:5432/app\n",
            "DATABASE_URL=postgres://app:password@localhost:5432/app\n",
            "DATABASE_URL=postgres://app@db:5432/app\n",
            "DATABASE_URL=postgres://app:****@db:5432/app\n",
            "DATABASE_URL=postgresql://db.{l:6}.svc:5432/app?user=app\n",
            "DATABASE_URL=postgres://app:<password>@db/app\n",
            "DATABASE_URL=postgres://app:$DB_PASS@db:5432/app\n",
        ],
    },
    RuleSpec {
        id: "mysql-url-with-password",
        description: "MySQL or MariaDB connection URL with an inline password",
        severity: Severity::High,
        literals: &[lit_at("mysql://", 2), lit_at("mysql+", 2), lit_at("mariadb://", 2), lit_at("mariadb+", 2)],
        pattern: DB_URL,
        before: 0,
        after: 720,
        check: Check::None,
        positive: &[
            "MYSQL_URL=mysql://root:{a:20}@mysql.{l:6}.svc:3306/{l:6}\n",
            "sqlalchemy.url = mysql+pymysql://{l:6}:{p:16}@{l:8}/{l:6}?charset=utf8mb4\n",
            "  DSN: \"mariadb://{l:5}:{a:12}@10.1.{d:1}.{d:1}/app\"\n",
        ],
        negative: &[
            "MYSQL_URL=mysql://root:changeme@mysql:3306/app\n",
            "MYSQL_URL=mysql://root@mysql:3306/app\n",
            "MYSQL_URL=mysql://root:@mysql:3306/app\n",
        ],
    },
    RuleSpec {
        id: "mongodb-url-with-password",
        description: "MongoDB connection URL with an inline password",
        severity: Severity::High,
        literals: &[lit_at("mongodb://", 2), lit_at("mongodb+srv://", 2)],
        pattern: DB_URL,
        before: 0,
        after: 720,
        check: Check::None,
        positive: &[
            "MONGO_URL=mongodb+srv://{l:8}:{a:24}@cluster0.{l:5}.mongodb.net/?retryWrites=true\n",
            "mongodb://admin:{p:18}@mongo-0.mongo:27017,mongo-1.mongo:27017/admin?replicaSet=rs0\n",
        ],
        negative: &[
            "MONGO_URL=mongodb://mongo-0.mongo:27017/admin\n",
            "MONGO_URL=mongodb+srv://user:<password>@cluster0.mongodb.net/\n",
            "MONGO_URL=mongodb://user:{{{{ .Values.mongo.password }}@mongo/\n",
        ],
    },
    RuleSpec {
        id: "redis-url-with-password",
        description: "Redis connection URL with an inline password",
        severity: Severity::High,
        literals: &[lit_at("redis://", 3), lit_at("rediss://", 3)],
        pattern: DB_URL,
        before: 0,
        after: 720,
        check: Check::None,
        positive: &[
            "REDIS_URL=redis://:{a:32}@redis-master.{l:6}.svc:6379/0\n",
            "  cache: \"rediss://default:{a:32}@{l:10}.cache.amazonaws.com:6379\"\n",
        ],
        negative: &[
            "REDIS_URL=redis://redis-master:6379/0\n",
            "REDIS_URL=redis://:$(REDIS_PASSWORD)@redis:6379/0\n",
            "REDIS_URL=redis://:xxxxxxxx@redis:6379/0\n",
        ],
    },
    RuleSpec {
        id: "amqp-url-with-password",
        description: "AMQP (RabbitMQ) connection URL with an inline password",
        severity: Severity::High,
        literals: &[lit_at("amqp://", 1), lit_at("amqps://", 1)],
        pattern: DB_URL,
        before: 0,
        after: 720,
        check: Check::None,
        positive: &[
            "AMQP_URL=amqp://{l:6}:{a:20}@rabbitmq.{l:6}.svc:5672/%2f\n",
            "broker_url = \"amqps://{l:6}:{p:24}@b-{uuid}.mq.us-east-1.amazonaws.com:5671\"\n",
        ],
        negative: &[
            // RabbitMQ's built-in default, documented everywhere.
            "AMQP_URL=amqp://guest:guest@localhost:5672/\n",
            "AMQP_URL=amqp://rabbitmq:5672/\n",
            // Shell variables in place of the password.
            "AMQP_URL=amqps://app:$password@mq.internal/vhost\n",
            "AMQP_URL=amqp://app:$RABBITMQ_PASS@mq.internal/vhost\n",
        ],
    },
    RuleSpec {
        id: "sqlserver-url-with-password",
        description: "SQL Server connection URL with an inline password",
        severity: Severity::High,
        literals: &[lit_at("mssql://", 2), lit_at("mssql+", 2), lit_at("sqlserver://", 2)],
        pattern: DB_URL,
        before: 0,
        after: 720,
        check: Check::None,
        positive: &[
            "SQLSERVER_URL=sqlserver://sa:{a:20}@mssql.{l:6}.svc:1433?database={l:6}\n",
            "url = mssql+pyodbc://{l:6}:{p:16}@{l:8}.database.windows.net/{l:6}?driver=ODBC+Driver+18\n",
        ],
        negative: &[
            "SQLSERVER_URL=sqlserver://mssql:1433?database=app\n",
            "SQLSERVER_URL=sqlserver://sa:%(password)s@mssql:1433\n",
        ],
    },
];

#[cfg(test)]
mod tests {
    /// The README's rule table lists every rule with its severity and description.
    #[test]
    fn readme_lists_every_rule() {
        let table = include_str!("../../docs/RULES.md");
        let readme = include_str!("../../README.md");
        for r in RULES.iter() {
            let row =
                format!("| `{}` | {} | {} |", r.id, r.severity, r.description.replace('|', "\\|"));
            assert!(table.contains(&row), "docs/RULES.md lacks the row {row:?}");
            assert!(readme.contains(&format!("`{}`", r.id)), "README.md does not name {}", r.id);
        }
    }

    /// docs/RULES.md lists every known example value, so that each has its source there.
    #[test]
    fn rules_md_lists_every_known_example() {
        let table = include_str!("../../docs/RULES.md");
        for v in crate::rules::check::known_examples() {
            let v = String::from_utf8_lossy(v);
            assert!(table.contains(&format!("`{v}`")), "docs/RULES.md lacks {v}");
        }
    }

    use super::*;
    use crate::rules::examples::render;
    use crate::rules::{find_all, RuleHit, Rules};
    use std::sync::OnceLock;

    /// Seeds every example is rendered with.
    const SEEDS: [u64; 4] = [1, 2, 3, 0x5eed_cafe];

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_secs() as i64
    }

    fn rules() -> &'static Rules {
        static RULES_ONCE: OnceLock<Rules> = OnceLock::new();
        RULES_ONCE.get_or_init(|| Rules::builtin(now()))
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    /// Random bytes of every value (binary files) or random printable lines (logs).
    fn filler(len: usize, seed: u64, binary: bool) -> Vec<u8> {
        let mut out = if binary {
            let hex = render(&format!("{{x:{}}}", 2 * len), seed);
            hex.chunks(2)
                .map(|h| u8::from_str_radix(std::str::from_utf8(h).expect("hex"), 16).expect("hex"))
                .collect()
        } else {
            let mut text = Vec::new();
            while text.len() < len {
                text.extend(render(
                    "{l:3-9} {a:1-12} {d:1-5} {l:2-7}.{l:2-4} {x:0-8}\n",
                    seed ^ text.len() as u64,
                ));
            }
            text
        };
        out.truncate(len);
        out
    }

    fn hits_of(id: &str, data: &[u8]) -> Vec<RuleHit> {
        find_all(rules(), data).into_iter().filter(|h| rules().spec(h.rule).id == id).collect()
    }

    /// Asserts a hit of `rule` whose secret lies inside `data[at..at + len]` and whose
    /// match does too, give or take the one delimiter byte a pattern may take on either
    /// side as a boundary (`[^A-Za-z0-9+/]` around an AWS secret).
    fn assert_found(rule: &RuleSpec, data: &[u8], at: usize, len: usize, what: &str) {
        let hits = hits_of(rule.id, data);
        let inside = hits.iter().find(|h| {
            let (start, end) = (h.offset as usize, h.offset as usize + h.len as usize);
            let secret = start + h.secret.start as usize..start + h.secret.end as usize;
            start + 1 >= at
                && end <= at + len + 1
                && secret.start >= at
                && secret.end <= at + len
                && !secret.is_empty()
        });
        let Some(hit) = inside else {
            panic!(
                "rule {} finds nothing in {what}: {:?}",
                rule.id,
                String::from_utf8_lossy(&data[at..at + len])
            );
        };
        assert!(
            hit.secret.start <= hit.secret.end && hit.secret.end <= hit.len,
            "rule {}: secret {:?} outside the match of {} bytes",
            rule.id,
            hit.secret,
            hit.len
        );
    }

    #[test]
    fn every_positive_example_is_found_alone_in_filler_and_at_both_ends() {
        let middle = filler(64 * 1024, 7, true);
        let text = filler(32 * 1024, 8, false);
        for rule in RULES.iter() {
            for template in rule.positive {
                for seed in SEEDS {
                    let ex = render(template, seed);
                    let what = format!("positive {template:?} seed {seed}");
                    assert!(
                        rule.literals.iter().any(|l| contains(&ex, l.text.as_bytes())),
                        "rule {}: {what} contains none of its literals",
                        rule.id
                    );
                    assert_found(rule, &ex, 0, ex.len(), &what);

                    let half = middle.len() / 2;
                    let mut buf = middle[..half].to_vec();
                    buf.push(b'\n');
                    let at = buf.len();
                    buf.extend(&ex);
                    buf.push(b'\n');
                    buf.extend(&middle[half..]);
                    assert_found(rule, &buf, at, ex.len(), &format!("{what} amid filler"));

                    let mut buf = ex.clone();
                    buf.push(b'\n');
                    buf.extend(&text);
                    assert_found(rule, &buf, 0, ex.len(), &format!("{what} at the start"));

                    let mut buf = text.clone();
                    buf.push(b'\n');
                    let at = buf.len();
                    buf.extend(&ex);
                    assert_found(rule, &buf, at, ex.len(), &format!("{what} at the end"));
                }
            }
        }
    }

    #[test]
    fn no_negative_example_is_found() {
        for rule in RULES.iter() {
            for template in rule.negative {
                for seed in SEEDS {
                    let ex = render(template, seed);
                    let hits = hits_of(rule.id, &ex);
                    assert!(
                        hits.is_empty(),
                        "rule {} matches negative {template:?} seed {seed}: {:?}",
                        rule.id,
                        String::from_utf8_lossy(&ex)
                    );
                }
            }
        }
    }

    #[test]
    fn streamed_buffers_find_what_one_buffer_finds() {
        // Every positive example of every rule, one after another, read in chunks the way
        // the matcher streams a file: consecutive buffers overlap by `overlap()` bytes.
        // Examples are kept 17 KiB apart: a key id and a secret of two examples would
        // otherwise make one match across them (the AWS rules reach 16 KiB), reported
        // once in one buffer but once per buffer when the two are in different ones.
        let mut data = Vec::new();
        for rule in RULES.iter() {
            for template in rule.positive {
                data.extend(render(template, 42));
                data.extend(b"\n-- \n");
                data.extend(b"# .\n".repeat(4400));
            }
        }
        let mut whole = find_all(rules(), &data);
        whole.dedup();
        let overlap = rules().overlap();
        // Each buffer must move on by at least `overlap` bytes or the loop would crawl.
        for chunk in [2 * overlap, 2 * overlap + 4093, 5 * overlap] {
            let mut hits = Vec::new();
            let mut start = 0;
            loop {
                let end = (start + chunk).min(data.len());
                let last = end == data.len();
                let done = if start == 0 { 0 } else { overlap };
                rules().find(&data[start..end], start as u64, done, last, &mut hits);
                if last {
                    break;
                }
                start = end - overlap;
            }
            hits.sort_by_key(|h| (h.offset, h.rule));
            // A match holding two literal hits is found from each; count it once.
            hits.dedup();
            assert_eq!(hits, whole, "chunk size {chunk}");
        }
    }

    #[test]
    fn ordinary_text_and_binary_data_have_no_hits() {
        let mut data = filler(256 * 1024, 99, true);
        data.extend(filler(256 * 1024, 100, false));
        data.extend(
            concat!(
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
                "authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: true\n",
                "  x509:\n    clientCAFile: /etc/kubernetes/pki/ca.crt\n",
                "I0101 00:00:00.000000    1234 kubelet.go:2000] \"SyncLoop ADD\" source=\"api\"\n",
                "token: \nusers:\n- name: ci\n  user:\n    exec:\n      command: aws\n",
                "kubeadm join 10.0.0.1:6443 --token-ttl 24h --discovery-token-unsafe-skip-ca-verification\n",
                "postgres://db:5432/app redis://cache:6379 amqp://mq:5672/\n",
                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            )
            .as_bytes(),
        );
        let hits = find_all(rules(), &data);
        assert!(
            hits.is_empty(),
            "{:?}",
            hits.iter().map(|h| rules().spec(h.rule).id).collect::<Vec<_>>()
        );
    }

    #[test]
    fn gnutls_self_test_keys_are_not_reported() {
        // GnuTLS compiles public self-test keys into its library, present in every
        // Debian-based image; skipped where this machine has no libgnutls.
        let Ok(dir) = std::fs::read_dir("/usr/lib/x86_64-linux-gnu") else { return };
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("libgnutls.so.30") && entry.path().is_file() {
                let data = std::fs::read(entry.path()).expect("readable library");
                let hits = find_all(rules(), &data);
                let ids: Vec<&str> = hits.iter().map(|h| rules().spec(h.rule).id).collect();
                assert!(ids.is_empty(), "{name}: {ids:?}");
            }
        }
    }

    #[test]
    fn jwt_kinds_are_exclusive_and_decide_severity() {
        let jwt_rules =
            ["kubernetes-service-account-token-legacy", "kubernetes-service-account-token", "jwt"];
        for rule in RULES.iter().filter(|r| jwt_rules.contains(&r.id)) {
            for template in rule.positive {
                let ex = render(template, 5);
                let hits = find_all(rules(), &ex);
                let ids: Vec<&str> = hits
                    .iter()
                    .map(|h| rules().spec(h.rule).id)
                    .filter(|id| jwt_rules.contains(id))
                    .collect();
                assert_eq!(ids, [rule.id], "{template:?}");
                assert!(hits
                    .iter()
                    .all(|h| h.token.is_some() || !jwt_rules.contains(&rules().spec(h.rule).id)));
            }
        }
        let severity = |t: &str| {
            let hits = find_all(rules(), &render(t, 1));
            assert_eq!(hits.len(), 1, "{t}");
            hits[0].severity
        };
        let legacy =
            r#"{jwt:{{"iss":"kubernetes/serviceaccount","sub":"system:serviceaccount:a:b"}}"#;
        let bound = r#"{jwt:{{"sub":"system:serviceaccount:a:b","exp":{now+600}}}"#;
        let bound_expired = r#"{jwt:{{"sub":"system:serviceaccount:a:b","exp":{now-600}}}"#;
        let other = r#"{jwt:{{"sub":"alice","exp":{now+600}}}"#;
        assert_eq!(severity(legacy), Severity::Critical);
        assert_eq!(severity(bound), Severity::High);
        assert_eq!(severity(bound_expired), Severity::Low);
        assert_eq!(severity(other), Severity::Medium);
    }

    #[test]
    fn ids_are_unique_kebab_case_and_every_required_family_is_present() {
        assert!(RULES.len() >= 25, "{} rules", RULES.len());
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        for id in &ids {
            let kebab = !id.is_empty()
                && id.split('-').all(|w| {
                    !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                });
            assert!(kebab, "{id} is not kebab-case");
        }
        ids.sort_unstable();
        let before = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), before, "duplicate rule ids");
        for required in [
            "pem-rsa-private-key",
            "pem-ec-private-key",
            "pem-dsa-private-key",
            "pem-openssh-private-key",
            "pem-pkcs8-private-key",
            "pem-pkcs8-encrypted-private-key",
            "putty-private-key",
            "kubernetes-service-account-token-legacy",
            "kubernetes-service-account-token",
            "jwt",
            "kubeconfig-client-key",
            "kubeconfig-user-token",
            "kubeconfig-user-password",
            "kubernetes-bootstrap-token",
            "kubernetes-bootstrap-token-secret",
            "docker-config-auth",
            "aws-access-key",
            "aws-access-key-secret-first",
            "gcp-service-account-key",
            "azure-storage-connection-string",
            "github-personal-access-token",
            "github-oauth-token",
            "github-app-token",
            "github-refresh-token",
            "github-fine-grained-pat",
            "gitlab-personal-access-token",
            "slack-bot-token",
            "slack-user-token",
            "slack-token",
            "slack-webhook-url",
            "stripe-live-secret-key",
            "stripe-test-secret-key",
            "vault-token",
            "postgres-url-with-password",
            "mysql-url-with-password",
            "mongodb-url-with-password",
            "redis-url-with-password",
            "amqp-url-with-password",
            "sqlserver-url-with-password",
        ] {
            assert!(ids.binary_search(&required).is_ok(), "missing rule {required}");
        }
        let checked = |id: &str| RULES.iter().find(|r| r.id == id).expect("present").check;
        assert_eq!(
            checked("kubernetes-service-account-token-legacy"),
            Check::Jwt(JwtKind::LegacyServiceAccount)
        );
        assert_eq!(
            checked("kubernetes-service-account-token"),
            Check::Jwt(JwtKind::BoundServiceAccount)
        );
        assert_eq!(checked("jwt"), Check::Jwt(JwtKind::Other));
        for id in [
            "github-personal-access-token",
            "github-oauth-token",
            "github-app-token",
            "github-refresh-token",
        ] {
            assert_eq!(checked(id), Check::GithubChecksum, "{id}");
        }
    }

    #[test]
    fn every_rule_has_examples_literals_and_an_anchored_byte_pattern() {
        for rule in RULES.iter() {
            assert!(rule.positive.len() >= 2 && rule.negative.len() >= 2, "{}: examples", rule.id);
            assert!(!rule.literals.is_empty(), "{}: no literal", rule.id);
            assert!(!rule.description.is_empty(), "{}: no description", rule.id);
            assert!(rule.pattern.starts_with("(?-u)"), "{}: patterns work on bytes", rule.id);
            // A window that starts at the literal is searched anchored. (An anchored rule
            // may also start `before` bytes ahead of a literal that always sits that far
            // into its match; the positive examples prove the offset.)
            if rule.before == 0 {
                assert!(
                    rule.pattern.starts_with("(?-u)^"),
                    "{}: a rule with before = 0 is anchored with ^",
                    rule.id
                );
            }
            for lit in rule.literals {
                // Teddy matches 4 bytes; a shorter key lets through every byte past its
                // end, so it must be made of rare bytes: no lower case, and punctuation.
                let key = lit.key_text().as_bytes();
                assert!(
                    key.len() >= 4
                        || (key.len() >= 2
                            && !key.iter().any(u8::is_ascii_lowercase)
                            && key.iter().any(|b| b.is_ascii_punctuation())),
                    "{}: key of {lit:?} is short and not made of rare bytes",
                    rule.id
                );
                assert!(rule.after >= lit.text.len(), "{}: window shorter than {lit:?}", rule.id);
            }
        }
    }

    #[test]
    fn no_key_is_a_prefix_of_another() {
        let keys = super::super::prefilter::keys_of(&RULES);
        for a in &keys {
            for b in &keys {
                assert!(a == b || !b.starts_with(a), "key {a:?} is a prefix of {b:?}");
            }
        }
    }

    #[test]
    fn windows_are_bounded() {
        for rule in RULES.iter() {
            assert!(rule.before + rule.after <= 64 * 1024, "{}: window too large", rule.id);
            assert!(rule.after > 0, "{}: a match must reach past its literal", rule.id);
        }
        assert!(rules().overlap() <= 64 * 1024);
    }
}
