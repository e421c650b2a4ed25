//! Built-in rules: generic assignments and HTTP credentials, in the conventions of `src/rules/table.rs`.
//!
//! These rules have no token prefix to key on: they find a secret by its *name* (a key
//! such as `password`, `client_secret`, `api_key` or `access_token`, a command-line flag,
//! a URL's user information, an `Authorization` header, a `.netrc` entry). Their keys
//! (`assword`, `ecret`, `token`, `://`, …) are common in ordinary text, which the
//! family needs; every regex is anchored at its literal, so a key hit costs one short
//! anchored attempt.
//!
//! Precision comes from the value, which must look like a secret and not like code, a
//! name or documentation (`strong!`): it holds a letter and a digit or a symbol such as
//! `!$%*+?@^|` (so `required`, `secret_name`, `DEFAULT_PASSWORD`, `dbPassword`, `true`
//! and `12345678` are not secrets); it does not start like a path (`/`, `./`, `~/`) or a
//! comment (`#`); it holds no `:` (URLs, `host:port`) and, unquoted, no quote, bracket
//! or parenthesis, and must end at a delimiter (so `getenv("X")`, `os.environ["X"]` and
//! `request.form.get(…)` are no values); it does not start with a known provider's token
//! prefix (`ghp_`, `glpat-`, `sk_live_`, `xoxb-`, `NRAK-`, `GOCSPX-`, `AIza`,
//! `GR1348941`: a lower-case word of 2–8 letters or an upper-case one of 2–6 followed by
//! `_` or `-`), which that provider's rule reports (or, with a bad checksum or length,
//! rightly does not); and it has an entropy of at least 3 bits per byte, which needs at
//! least 8 distinct bytes. The placeholder filter drops `${VAR}`, `$VAR`, `<…>`,
//! `changeme`, `****` and the like.
//!
//! A quoted value may hold more symbols (`(`, `{`, `;`, `,`, …) than an unquoted one. The
//! two are alternatives of one regex: a quoted value is the `secret` group, an unquoted
//! one the `span` group (the secret is then the span), because a regex may name a group
//! only once; an unquoted finding therefore covers the value alone.

use crate::finding::Severity;
use crate::rules::{lit, lit_at, lit_in, word_at, Check, RuleSpec};

/// A value of bytes `$x` (a class) that looks like a secret (see the module docs): a
/// letter and a "strong" byte of class `$ds` (digits and symbols), and none of the
/// provider prefixes. `$o` is the class of the other bytes a value may start with
/// (`_`, `-`); bytes of `$x` in neither class (`.`, `/`, `#`, `~`, brackets) may only
/// follow the first. Each alternative is one way the value may start, with what the
/// rest must then hold.
macro_rules! strong {
    ($x:literal, $ds:literal, $o:literal) => {
        concat!(
            "(?:",
            // A digit or symbol first, a letter later.
            $ds,
            $x,
            "*[A-Za-z]",
            $x,
            "*",
            "|",
            $o,
            $x,
            "*(?:[A-Za-z]",
            $x,
            "*",
            $ds,
            "|",
            $ds,
            $x,
            "*[A-Za-z])",
            $x,
            "*",
            // Lower-case letters: a run of 2 to 8 must not end at `_`/`-` (`ghp_`).
            "|[a-z]{1,8}",
            $ds,
            $x,
            "*",
            "|[a-z](?:[A-Z]|",
            $o,
            ")",
            $x,
            "*",
            $ds,
            $x,
            "*",
            "|[a-z]{2,8}[A-Z]",
            $x,
            "*",
            $ds,
            $x,
            "*",
            "|[a-z]{9}",
            $x,
            "*",
            $ds,
            $x,
            "*",
            // Upper-case letters: a run of 2 to 6 must not end at `_`/`-` (`NRAK-`), and
            // `AIza…` (Google) and `GR1…` (GitLab runners) are another rule's.
            "|[A-Z]",
            $ds,
            $x,
            "*",
            "|[A-Z](?:[a-z]|",
            $o,
            ")",
            $x,
            "*",
            $ds,
            $x,
            "*",
            "|(?:[B-FH-Z][A-Z]|A[A-HJ-Z]|G[A-QS-Z])(?:",
            $ds,
            "|[a-z]",
            $x,
            "*",
            $ds,
            ")",
            $x,
            "*",
            "|AI[0-9]",
            $x,
            "*",
            "|GR(?:[02-9]|[a-z]",
            $x,
            "*",
            $ds,
            ")",
            $x,
            "*",
            "|[A-Z]{3,6}(?:",
            $ds,
            "|[a-z]",
            $x,
            "*",
            $ds,
            ")",
            $x,
            "*",
            "|[A-Z]{7}",
            $x,
            "*",
            $ds,
            $x,
            "*",
            ")"
        )
    };
}

/// A password-like value in quotes: any printable byte but quotes, `\`, `` ` ``, `:`;
/// it may start with a bracket or `#`, and with `.` or `~` but not `./` or `~/`.
macro_rules! quoted_password {
    () => {
        strong!(
            r"[A-Za-z0-9!$%&*+?@^|=;,(){}<>\[\]_./#~-]",
            r"[0-9!$%&*+?@^|=;,]",
            r"(?:[_(){}<>\[\]#-]|[.~][A-Za-z0-9!$%&*+?@^|=;,(){}<>\[\]_#~-])"
        )
    };
}

/// A password-like value without quotes: no quote, bracket, parenthesis, `&`, `,`, `;`.
macro_rules! bare_password {
    () => {
        strong!(r"[A-Za-z0-9!$%*+?@^|_./#~=-]", r"[0-9!$%*+?@^|]", "[_-]")
    };
}

/// A token-like value: base64 or base64url bytes (no `.`, so JWTs, Vault's `s.` tokens
/// and Google's `ya29.` are their own rules'; no `~`, OpenShift's).
macro_rules! token_value {
    () => {
        strong!(r"[A-Za-z0-9+/=_-]", r"[0-9+]", "[_/-]")
    };
}

/// What ends an unquoted value.
macro_rules! bare_end {
    () => {
        r#"(?:[\s,;&<)}\]"'\\]|$)"#
    };
}

/// A value quoted (bytes `$quoted`, the `secret` group) or not (bytes `$bare` ending at
/// `$end`, the `span` group).
/// With `$suffix`, the groups are `secret$suffix` and `span$suffix` (for a pattern that
/// holds two values, one in each of two alternatives).
macro_rules! quoted_or_bare {
    ($quoted:expr, $bare:expr, $end:expr) => {
        quoted_or_bare!($quoted, $bare, $end, "")
    };
    ($quoted:expr, $bare:expr, $end:expr, $suffix:literal) => {
        concat!(
            r#"(?:\\?["'](?P<secret"#,
            $suffix,
            ">",
            $quoted,
            r#")\\?["']|(?P<span"#,
            $suffix,
            ">",
            $bare,
            ")",
            $end,
            ")"
        )
    };
}

/// A password-like value, quoted or not.
macro_rules! password_value {
    ($($suffix:literal)?) => {
        quoted_or_bare!(quoted_password!(), bare_password!(), bare_end!() $(, $suffix)?)
    };
}

/// A password-like value where only blanks and quotes end it (a `.netrc` token, a shell
/// word), quoted or not.
macro_rules! word_value {
    () => {
        quoted_or_bare!(word_bytes!(), word_bytes!(), r#"(?:[\s"'\\]|$)"#)
    };
}

/// The bytes of a [`word_value!`]: the place (a `.netrc` entry's `password`, `curl -u
/// user:`) says it is a password, so its shape need not (`strong!`); the entropy check
/// and the placeholder filter decide.
macro_rules! word_bytes {
    () => {
        r"[A-Za-z0-9!$%&*+?@^|=;,(){}<>\[\]_./#~-]{1,256}"
    };
}

/// A token-like value, quoted or not.
macro_rules! token_assigned {
    ($($suffix:literal)?) => {
        quoted_or_bare!(token_value!(), token_value!(), bare_end!() $(, $suffix)?)
    };
}

/// After a key's name: its closing quote, if any, and an assignment (`=`, `:`, `:=`,
/// `=>`, with spaces around; never `==`).
macro_rules! assign {
    () => {
        r#"(?:\\?["'])?[ \t]{0,8}(?::=|=>|[:=])[ \t]{0,8}"#
    };
}

/// A key's name (`$names`, a regex) assigned a value (`$value`), or an XML element of
/// that name whose text is bytes `$xml` up to its end tag (`<password>…</`, never
/// `<password>` before other markup).
macro_rules! assigned {
    ($names:expr, $value:expr, $xml:expr) => {
        concat!(
            "(?:(?:",
            $names,
            ")",
            assign!(),
            $value,
            "|(?:",
            $names,
            r")>[ \t\r\n]*(?P<secret_xml>",
            $xml,
            r")[ \t\r\n]*</)"
        )
    };
}

/// A URL's password, up to its `@`.
macro_rules! url_password {
    () => {
        concat!(
            strong!(
                r"[A-Za-z0-9!#$%&*+,;=?^|~(){}<>\[\]._-]",
                r"[0-9!#$%&*+,;=?^|~]",
                r"[(){}<>\[\]._-]"
            ),
            // In a URL's user information a password of letters alone is no name of
            // code: a long one of both cases counts too (the entropy check decides).
            r"|[A-Za-z]{12,128}"
        )
    };
}

/// This family's rules, in the order `kresidue rules` lists them.
pub(super) const RULES: &[RuleSpec] = &[
    RuleSpec {
        id: "generic-password-assignment",
        description: "Password assigned to a password/passwd/passphrase/pass key or flag",
        severity: Severity::High,
        literals: &[
            lit_at("password", 1),
            lit_at("Password", 1),
            lit_at("PASSWORD", 1),
            lit_at("passwd", 1),
            lit_at("Passwd", 1),
            lit_at("PASSWD", 1),
            lit_at("--password", 3),
            lit_at("--passwd", 3),
            lit_in("passphrase", 0, 5),
            lit("pass="),
            lit("pass:"),
            lit("pass\""),
            lit("PASS="),
            lit("PASS:"),
            lit("PASS\""),
        ],
        pattern: concat!(
            r"(?-u)^(?:--(?:password|passwd)[ \t]+",
            password_value!("_flag"),
            "|(?:--)?",
            assigned!(
                r"[Pp]assword|PASSWORD|[Pp]asswd|PASSWD|passphrase|pass|PASS",
                password_value!(),
                quoted_password!()
            ),
            ")"
        ),
        before: 0,
        after: 300,
        check: Check::Password(3.0),
        positive: &[
            "DB_PASSWORD={a:20}\n",
            "export MYSQL_ROOT_PASSWORD=\"{p:20}\"\n",
            "spring:\n  datasource:\n    username: app\n    password: {a:24}\n",
            "{{\"user\":\"{l:6}\",\"dbPassword\":\"{p:18}\"}\n",
            "[database]\npassword = \"{a:16}{d:2}\"\n",
            "<settings><password>{a:16}{d:2}</password></settings>\n",
            "<Password>{a:16}{d:2}</Password>\n",
            "<password>\n  {a:10},{a:8}4;\n</password>\n",
            "docker login -u {l:6} --password {a:20}{d:1} registry.{l:6}.test\n",
            "wget --user={l:6} --http-password={a:16}{d:2} https://{l:6}.test/f\n",
            "openssl pkcs12 -export -passout pass:{a:16}{d:2} -out a.p12\n",
            "PGPASSWORD='{a:12}{d:4}' psql -h db -U app\n",
            "DB_PASS={a:16}{d:2}\n",
            "ssl_key_passphrase: \"{a:16}{d:2}\"\n",
        ],
        negative: &[
            // An element's `>` takes a value only up to its end tag.
            "echo 'usage: login <password>{d:2}x{l:12} [--host h]'\n",
            // Code reads the password from somewhere.
            "password = os.getenv(\"DB_PASSWORD\")\n",
            "password := os.Getenv(\"DB_PASSWORD\")\n",
            "password = request.form['password']\n",
            "const password = req.body.password;\n",
            "    Password: cfg.Password,\n",
            "    Password: dbPassword,\n",
            "if password == \"\":\n",
            "password = DEFAULT_PASSWORD\n",
            "def login(user, password=None):\n",
            // Placeholders and documentation.
            "DB_PASSWORD=${{DB_PASSWORD}\n",
            "DB_PASSWORD=$DB_PASSWORD\n",
            "password: changeme\n",
            "password: <password>\n",
            "  --password string   Password for the registry\n",
            "  --password=PASSWORD\n",
            "password: \"********\"\n",
            "password: \"\"\n",
            // Names, paths, booleans and numbers.
            "passwordSecretRef:\n  name: db\n  key: password\n",
            "password_file: /run/secrets/db-password\n",
            "password: /run/secrets/{l:8}\n",
            "password: required\n",
            "no_password: true\n",
            "PASSWORD_MIN_LENGTH=12\n",
            "password: 1234567890\n",
            "PWD=/home/{l:6}/src\n",
            "\"forgotPassword\": \"Forgot your password?\"\n",
            "Accepted password for root from 10.0.0.1 port 22 ssh2\n",
            // Another rule's token prefix.
            "CI_DEPLOY_PASSWORD=gldt-{a:12}\n",
            "TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc{B:20}\n",
            // Too little entropy.
            "password: abc12abc\n",
        ],
    },
    RuleSpec {
        id: "generic-secret-assignment",
        description: "Secret assigned to a secret/client_secret/secret_key/credentials key",
        severity: Severity::High,
        literals: &[lit_at("secret", 1), lit_at("Secret", 1), lit_at("SECRET", 1)],
        pattern: concat!(
            "(?-u)^",
            assigned!(
                concat!(
                    r"(?:[Ss]ecret|SECRET)(?:[_-]?(?:key|token)(?:_base)?|[_-]?(?:KEY|TOKEN)(?:_BASE)?|Key|Token)?",
                    r"|[Cc]redentials"
                ),
                password_value!(),
                quoted_password!()
            )
        ),
        before: 0,
        after: 300,
        check: Check::Entropy(3.0),
        positive: &[
            "CLIENT_SECRET={a:32}\n",
            "{{\"client_id\":\"{d:12}\",\"client_secret\":\"{B:40}\"}\n",
            "SECRET_KEY='{p:50}'\n",
            "  appSecret: {x:32}\n",
            "secret_key_base: {x:128}\n",
            "oauth:\n  clientSecret: \"{a:40}\"\n",
            "JWT_SECRET={b:44}\n",
        ],
        negative: &[
            "kind: Secret\nmetadata:\n  name: db\n",
            "      secretName: {l:6}-tls\n",
            "        secretKeyRef:\n          name: db\n          key: password\n",
            "  secret:\n    secretName: {l:8}\n",
            "client_secret = os.environ[\"CLIENT_SECRET\"]\n",
            "CLIENT_SECRET=${{CLIENT_SECRET}\n",
            "secret: my-app-secret\n",
            "\"secret\": false\n",
            "secret_key = settings.SECRET_KEY\n",
            "STRIPE_SECRET_KEY=sk_test_{a:10}\n",
            "OAUTH_CLIENT_SECRET=GOCSPX-{B:10}\n",
            "STRIPE_WEBHOOK_SECRET=whsec_{a:16}\n",
            "credentials: /var/run/secrets/cloud.json\n",
        ],
    },
    RuleSpec {
        id: "generic-api-key-assignment",
        description: "API or access key assigned to an api_key/apikey/x-api-key/access_key key",
        severity: Severity::High,
        literals: &[
            lit_at("api_key", 1),
            lit_at("API_KEY", 1),
            lit_at("apikey", 1),
            lit_at("apiKey", 1),
            lit_at("api-key", 1),
            lit_at("API-KEY", 1),
            lit_at("API-Key", 1),
            word_at("access_key", 1),
            word_at("ACCESS_KEY", 1),
            word_at("accessKey", 1),
        ],
        pattern: concat!(
            "(?-u)^",
            assigned!(
                r"api[_-]?key|apiKey|API-Key|API[_-]KEY|access_key|ACCESS_KEY|accessKey",
                token_assigned!(),
                token_value!()
            )
        ),
        before: 0,
        after: 300,
        check: Check::Entropy(3.0),
        positive: &[
            "API_KEY={a:32}\n",
            "curl -H \"X-API-Key: {x:40}\" https://api.{l:6}.test/v1/items\n",
            "  \"apiKey\": \"{B:39}\",\n",
            "datadog:\n  api_key: {x:32}\n",
            "[default]\naccess_key = {[A-Z0-9]:20}\n",
        ],
        negative: &[
            "api_key = os.environ.get(\"API_KEY\")\n",
            "API_KEY=<your-api-key>\n",
            "api_key: ${{API_KEY}\n",
            "  \"apiKey\": \"\",\n",
            "apiKey: apiKeyFromConfig\n",
            "GOOGLE_API_KEY=AIza{B:20}\n",
            "NEW_RELIC_API_KEY=NRAK-{[A-Z0-9]:10}\n",
            "OPENAI_API_KEY=sk-proj-{B:10}T3BlbkFJ{B:10}\n",
            "aws_secret_access_key = {b:40}\n",
            "api_key_header: X-API-Key\n",
        ],
    },
    RuleSpec {
        id: "generic-token-assignment",
        description: "Token assigned to a token/access_token/auth_token key or --token flag",
        severity: Severity::High,
        literals: &[lit("token"), lit("Token"), lit("TOKEN"), lit("--token")],
        pattern: concat!(
            r"(?-u)^(?:--token(?:[ \t]+|=)",
            token_assigned!("_flag"),
            "|",
            assigned!("token|Token|TOKEN", token_assigned!(), token_value!()),
            ")"
        ),
        before: 0,
        after: 300,
        check: Check::Entropy(3.0),
        positive: &[
            "ACCESS_TOKEN={a:40}\n",
            "{{\"access_token\":\"{B:43}\",\"token_type\":\"bearer\",\"expires_in\":3600}\n",
            "X-Auth-Token: {x:32}\n",
            "  authToken: \"{a:32}\"\n",
            "vault login --token {a:26}{d:2}\n",
            "HF_TOKEN=hf{a:34}{d:2}\n",
        ],
        negative: &[
            "token = request.headers.get(\"Authorization\")\n",
            "token: string;\n",
            "    Token: token,\n",
            "    token = self.tokenizer(text)\n",
            "token_type: bearer\n",
            "token_url: https://auth.{l:6}.test/oauth/token\n",
            "GITHUB_TOKEN=${{{{ secrets.GITHUB_TOKEN }}\n",
            "GITHUB_TOKEN={ghtoken-bad:ghp}\n",
            "GITLAB_TOKEN=glpat-{B:19}\n",
            "VAULT_TOKEN=hvs.{a:10}\n",
            "REGISTRATION_TOKEN=GR1348941{B:12}\n",
            "id_token: {jwt:{{\"sub\":\"{l:8}\"}}\n",
            "kubeadm join 10.0.0.1:6443 --token {[a-z0-9]:6}.{[a-z0-9]:16}\n",
            "SLACK_BOT_TOKEN=xoxb-{d:12}-{d:13}-{a:10}\n",
            "token: xxxxxxxxxxxxxxxxxxxxxxxx\n",
        ],
    },
    RuleSpec {
        id: "cli-password-argument",
        description: "Password on a mysql/mysqldump/mysqladmin (-p) or sshpass (-p) command line",
        severity: Severity::High,
        literals: &[
            lit_in("mysql -", 1, 5),
            lit_in("mysqldump -", 1, 5),
            lit_in("mysqladmin -", 1, 5),
            lit_in("sshpass -p", 3, 8),
        ],
        pattern: concat!(
            r"(?-u)^(?:mysql(?:dump|admin)?[ \t](?:[^\n|;&]{0,256}?[ \t])?-p|sshpass[ \t]+-p[ \t]*)",
            password_value!()
        ),
        before: 0,
        after: 600,
        check: Check::Entropy(3.0),
        positive: &[
            "mysql -h db.{l:6}.svc -u root -p{a:16}{d:2} app < dump.sql\n",
            "mysqldump -uroot -p'{d:2}{p:18}' --all-databases > all.sql\n",
            "sshpass -p {a:16}{d:2} ssh {l:6}@10.0.0.{d:1}\n",
            "RUN mysqladmin -u root -p\"{a:14}{d:2}\" create app\n",
        ],
        negative: &[
            "mysql -u root -p app\n",
            "mysql -u root -p$MYSQL_ROOT_PASSWORD\n",
            "mysql -u root -pPASSWORD\n",
            "sshpass -p \"$SSHPASS\" ssh host\n",
            "mysql -h db -P 3306 -u app --protocol=tcp\n",
        ],
    },
    RuleSpec {
        id: "url-with-password",
        description: "HTTP(S), FTP(S), SFTP, SSH, SMB or LDAP URL with an inline password",
        severity: Severity::High,
        literals: &[
            lit_in("http://", 4, 7),
            lit_in("https://", 5, 8),
            lit_in("ftp://", 3, 6),
            lit_in("ftps://", 4, 7),
            lit_in("ssh://", 3, 6),
            lit_in("smb://", 3, 6),
            lit_in("ldap://", 4, 7),
            lit_in("ldaps://", 5, 8),
        ],
        pattern: concat!(
            r#"(?-u)^(?:https?|ftps?|ssh|smb|ldaps?)://[^\s:@/?#"'<>\\]{0,128}:(?P<secret>"#,
            url_password!(),
            r")@(?:[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])"
        ),
        before: 0,
        after: 720,
        check: Check::Entropy(3.0),
        positive: &[
            "PIP_INDEX_URL=https://{l:6}:{a:20}@pypi.{l:6}.test/simple\n",
            "git clone https://oauth2:{a:20}{d:2}@gitlab.{l:6}.test/{l:6}/{l:6}.git\n",
            "  proxy: \"http://{l:6}:{p:18}@proxy.corp.test:3128\"\n",
            "ftp://{l:6}:{a:12}{d:2}@ftp.{l:6}.test/pub/\n",
            "remote = git+https://{l:5}:{x:40}@git.{l:6}.test/repo\n",
            "url: ldaps://cn=admin:{a:16}{d:1}@ldap.{l:6}.test:636\n",
        ],
        negative: &[
            "https://user:password@example.com/\n",
            "https://{l:6}:${{GIT_TOKEN}@git.{l:6}.test/x.git\n",
            "https://{l:6}:$TOKEN@git.{l:6}.test/x.git\n",
            "http://[::1]:8080/healthz\n",
            "ssh://git@github.com:22/{l:6}/{l:6}.git\n",
            "https://{l:6}:@host.test/\n",
            "https://{l:6}:****@host.test/\n",
            "https://host.test:8443/path@v1\n",
            "https://{l:6}:{ghtoken-bad:ghp}@github.com/{l:6}/{l:8}.git\n",
        ],
    },
    RuleSpec {
        id: "http-basic-auth-header",
        description: "HTTP Authorization header with Basic credentials",
        severity: Severity::High,
        literals: &[lit_at("Authorization", 1), lit_at("authorization", 1), lit_at("AUTHORIZATION", 1)],
        pattern: concat!(
            // `Authorization: …`, `"Authorization": "…"`, nginx's `Authorization "…"`.
            r#"(?-u)^(?:[Aa]uthorization|AUTHORIZATION)(?:\\?["'])?(?:[ \t]*[:=][ \t]*|[ \t]+)(?:\\?["'])?(?:Basic|basic|BASIC)[ \t]+"#,
            // The whole value, whatever it holds (a JWT is no Basic credential: the
            // check rejects it, and the rule's claim keeps the JWT rule off it).
            r"(?P<secret>[A-Za-z0-9+/._~-]{8,}={0,2})(?:[^A-Za-z0-9+/=._~-]|$)"
        ),
        before: 0,
        after: 1024,
        check: Check::BasicCredentials,
        positive: &[
            "Authorization: Basic {b64:{l:8}:{a:20}}\n",
            "curl -H 'authorization: Basic {b64:admin:{p:16}}' https://{l:6}.test/api\n",
            "{{\"headers\":{{\"Authorization\":\"Basic {b64:{l:6}:{a:24}}\"}}\n",
            "git -c http.extraheader=\"AUTHORIZATION: basic {b64::{a:52}}\" fetch origin\n",
            "    proxy_set_header Authorization \"Basic {b64:{l:6}:{p:20}}\";\n",
        ],
        negative: &[
            "Authorization: Basic <credentials>\n",
            "Authorization: Basic ${{BASIC_AUTH}\n",
            "Authorization: Basic $(echo -n user:pass | base64)\n",
            "WWW-Authenticate: Basic realm=\"{l:8}\"\n",
            "Authorization: Basic xxxxxxxxxxxxxxxx\n",
            "Proxy-Authorization: Basic Og==\n",
            // No base64 of `user:password`.
            "Authorization: Basic authentication\n",
            "Authorization: Basic {b64:{l:8}{a:20}}\n",
            "Authorization: Basic {b64:user:password}\n",
            // A JWT where the credentials should be: no Basic credential, and not the
            // JWT rule's to report either.
            "Authorization: Basic {jwt:{{\"sub\":\"{l:8}\",\"exp\":{now+3600}}}\n",
        ],
    },
    RuleSpec {
        id: "http-bearer-token",
        description: "HTTP Authorization header with an opaque Bearer token (not a JWT)",
        severity: Severity::High,
        literals: &[lit_at("Authorization", 1), lit_at("authorization", 1), lit_at("AUTHORIZATION", 1)],
        pattern: concat!(
            r#"(?-u)^(?:[Aa]uthorization|AUTHORIZATION)(?:\\?["'])?(?:[ \t]*[:=][ \t]*|[ \t]+)(?:\\?["'])?(?:Bearer|bearer|BEARER)[ \t]+"#,
            r"(?P<secret>",
            token_value!(),
            r")(?:[^A-Za-z0-9+/=_.~-]|$)"
        ),
        before: 0,
        after: 1024,
        check: Check::Entropy(3.5),
        positive: &[
            "Authorization: Bearer {a:40}\n",
            "curl -H \"Authorization: Bearer {B:32}{d:2}\" https://api.{l:6}.test/v2/\n",
            "{{\"Authorization\": \"Bearer {x:64}\"}\n",
        ],
        negative: &[
            "Authorization: Bearer $TOKEN\n",
            "Authorization: Bearer ${{API_TOKEN}\n",
            "Authorization: Bearer <token>\n",
            "Authorization: Bearer {jwt:{{\"sub\":\"{l:8}\"}}\n",
            "Authorization: Bearer ya29.{B:150}\n",
            "Authorization: Bearer abc123\n",
            "Authorization: Bearer {ghtoken-bad:ghp}\n",
        ],
    },
    RuleSpec {
        id: "netrc-password",
        description: ".netrc entry with a password (machine … login … password …)",
        severity: Severity::High,
        // Searched by the `password` key it holds, which the password rule has anyway:
        // `machine` of its own would cost the key search more than the entry is worth.
        literals: &[lit_at("password", 1)],
        pattern: concat!(
            r"(?-u)\bmachine[ \t]+[^\s]{1,253}(?:[ \t\r\n]+(?:login|account|port)[ \t]+[^\s]{1,256}){0,3}",
            r"[ \t\r\n]+password[ \t]+",
            word_value!()
        ),
        before: 600,
        after: 300,
        check: Check::Entropy(3.0),
        positive: &[
            "machine api.{l:6}.test login {l:6} password {a:20}\n",
            "machine git.{l:6}.test\n  login {l:6}\n  password {a:16}{d:2}\n",
            "machine {l:6}.test login {l:6}@{l:6}.test password \"{p:20}\"\n",
            "machine api.{l:6}.test login deploy password {p:20}\n",
        ],
        negative: &[
            "machine api.{l:6}.test login {l:6} password $NETRC_PASSWORD\n",
            "machine host.test login user password password\n",
            "machine learning models password policies\n",
            "f'machine {{hostname}{{path} login {{self.username} password {{self.password}'\n",
            "machine host.test login {l:6}\n",
        ],
    },
    RuleSpec {
        id: "curl-user-password",
        description: "curl command line with -u/--user user:password",
        severity: Severity::High,
        literals: &[lit("curl ")],
        pattern: concat!(
            r#"(?-u)^curl[ \t](?:[^\n|;&]{0,256}?[ \t])?(?:-u|--user)(?:[ \t]+|=)?\\?["']?[^\s:@"'\\]{0,128}:"#,
            // The rest of the shell word: a password may hold any byte but a blank or a
            // quote.
            r"(?P<secret>",
            word_bytes!(),
            r#")(?:\\?["']|\s|$)"#
        ),
        before: 0,
        after: 720,
        check: Check::Entropy(3.0),
        positive: &[
            "curl -u {l:6}:{a:20} https://{l:6}.test/api\n",
            "curl -sSf --user \"admin:{a:16}{d:2}\" -X POST https://{l:6}.test/\n",
            "curl -fsS -uci:{a:18}{d:2} https://nexus.{l:6}.test/repository/x\n",
            "curl -u admin:{p:16} https://jenkins.{l:6}.test/job/deploy/build -X POST\n",
        ],
        negative: &[
            "curl -u user:password https://example.com/\n",
            "curl -u \"$USER:$PASS\" https://{l:6}.test/\n",
            "curl -u {l:6}: https://{l:6}.test/\n",
            "curl -u admin:${{ADMIN_PASSWORD} https://{l:6}.test/\n",
            "cmd = f'curl -u {{user}:{{self.password} {{url}'\n",
            "curl -X GET https://{l:6}.test/ -H 'Accept: */*'\n",
        ],
    },
    RuleSpec {
        id: "wget-password",
        description: "wget command line with --password, --http-password, --ftp-password or --proxy-password",
        severity: Severity::High,
        literals: &[lit("wget ")],
        pattern: concat!(
            r"(?-u)^wget[ \t](?:[^\n|;&]{0,256}?[ \t])?--(?:http-|ftp-|proxy-)?password(?:=|[ \t]+)",
            word_value!()
        ),
        before: 0,
        after: 720,
        check: Check::Entropy(3.0),
        positive: &[
            "wget --user=ci --password={p:16} https://{l:6}.test/releases/{l:4}.tar.gz\n",
            "RUN wget -q --http-user={l:6} --http-password='{a:16}{d:2}' -O /tmp/x.tgz https://{l:6}.test/x.tgz\n",
        ],
        negative: &[
            "wget --user=ci --password=$WGET_PASSWORD https://{l:6}.test/x\n",
            "wget --user=ci --ask-password https://{l:6}.test/x\n",
            "wget --password=changeme https://{l:6}.test/x\n",
            "wget --password=%WGET_PASSWORD% https://{l:6}.test/x\n",
            "\twget --password=$$WGET_PASSWORD https://{l:6}.test/x\n",
        ],
    },
];
