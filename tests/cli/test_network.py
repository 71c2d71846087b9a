#!/usr/bin/env python3
"""`--network inherit` is a whole network (issue 17, item 3): names resolve
(resolv.conf, hosts, nsswitch.conf bound) and TLS verifies against the
host's CA settings (the CA stores bound; SSL_CERT_FILE, SSL_CERT_DIR,
NODE_EXTRA_CA_CERTS and REQUESTS_CA_BUNDLE passed when set, their files
bound read-only and held to the authority rule of invariant 18).

Everything is on loopback and bounded in time: a TLS server in this process
with a certificate signed by a test CA made with openssl at test time.

    test_network.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import http.server
import os
import shutil
import ssl
import subprocess
import threading

from wardentest import ARGS, WardenCase, main

CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
           "REQUESTS_CA_BUNDLE")


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, timeout=60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello-over-tls\n"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class NetworkInherit(WardenCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if shutil.which("openssl") is None:
            raise SystemExit("openssl is required (ci/deps.sh installs it)")
        # A test CA and a server certificate for localhost and 127.0.0.1,
        # outside every workspace, private to this user.
        cls.pki = os.path.join(cls.tmp, "pki")
        os.makedirs(cls.pki, mode=0o755)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem",
                "-days", "2", "-subj", "/CN=maelys test CA", cwd=cls.pki)
        openssl("req", *ec, "-keyout", "srv.key", "-out", "srv.csr",
                "-subj", "/CN=localhost", cwd=cls.pki)
        with open(os.path.join(cls.pki, "san.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey",
                "ca.key", "-CAcreateserial", "-out", "srv.pem", "-days", "2",
                "-extfile", "san.ext", cwd=cls.pki)
        for name in os.listdir(cls.pki):
            os.chmod(os.path.join(cls.pki, name), 0o644)
        cls.ca = os.path.join(cls.pki, "ca.pem")
        # An OpenSSL hashed directory holding only the test CA.
        cls.ca_dir = os.path.join(cls.tmp, "ca-dir")
        os.makedirs(cls.ca_dir, mode=0o755)
        h = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in",
                            cls.ca], check=True, timeout=60,
                           stdout=subprocess.PIPE).stdout.decode().strip()
        shutil.copy(cls.ca, os.path.join(cls.ca_dir, h + ".0"))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(cls.pki, "srv.pem"),
                            os.path.join(cls.pki, "srv.key"))
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
        cls.server.socket = ctx.wrap_socket(cls.server.socket,
                                            server_side=True)
        cls.port = cls.server.server_address[1]
        cls.thread = threading.Thread(target=cls.server.serve_forever,
                                      daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        super().tearDownClass()

    def env(self, **extra):
        # Failures as envelopes (run's included), which self.failure reads.
        e = super().env(MAELYS_CLI_FORMAT="json")
        e.update(extra)
        return e

    def sh(self, script, *extra, env=None, network="inherit"):
        return self.warden("run", "--ro", "--network", network, "--io",
                           "stdio", "--wall-time", "60s", *extra, "--",
                           "/bin/sh", "-c", script, env=env, timeout=90)

    def fetch_script(self):
        return ("exec /usr/bin/python3 -c 'import urllib.request; "
                "print(urllib.request.urlopen(\"https://localhost:%d/\", "
                "timeout=20).read().decode().strip())'" % self.port)

    # ------------------------------------------------------ name resolution

    def test_names_resolve(self):
        """resolv.conf is the host's, and a name of /etc/hosts resolves
        through nsswitch inside."""
        p = self.sh("cat /etc/resolv.conf; echo ---; "
                    "getent hosts localhost; echo ---; "
                    "/usr/bin/python3 -c 'import socket; print(sorted({a[4][0] "
                    "for a in socket.getaddrinfo(\"localhost\", 80)}))'")
        self.assertEqual(p.returncode, 0, p.stderr)
        resolv, getent, py = p.stdout.decode().split("---\n")
        if os.path.exists("/etc/resolv.conf"):
            with open("/etc/resolv.conf") as f:
                self.assertEqual(resolv, f.read())
        else:
            self.assertEqual(resolv, "")
        self.assertRegex(getent, r"(127\.0\.0\.1|::1)\s+localhost")
        self.assertTrue("127.0.0.1" in py or "::1" in py, py)

    def test_resolver_files_and_ca_stores_are_the_hosts(self):
        """The files name resolution and TLS read are the host's own, and
        every loopback name /etc/hosts gives (not only localhost, which a
        resolver may know by itself) resolves inside through nsswitch."""
        files = [f for f in ("/etc/resolv.conf", "/etc/hosts",
                             "/etc/nsswitch.conf", "/etc/host.conf",
                             "/etc/gai.conf", "/etc/services",
                             "/etc/protocols",
                             "/etc/ssl/certs/ca-certificates.crt",
                             "/etc/pki/tls/certs/ca-bundle.crt")
                 if os.path.isfile(f)]
        self.assertIn("/etc/hosts", files)
        names = []
        with open("/etc/hosts") as f:
            for line in f:
                words = line.split("#", 1)[0].split()
                if len(words) >= 2 and (words[0].startswith("127.") or
                                        words[0] == "::1"):
                    names += [(words[0], n) for n in words[1:]]
        self.assertTrue(names, "no loopback name in /etc/hosts")
        script = "".join("echo '=== %s'; cat %s; " % (f, f) for f in files)
        script += "".join("echo '=== %s'; getent ahosts %s; " % (n, n)
                          for _, n in names)
        p = self.sh(script)
        self.assertEqual(p.returncode, 0, p.stderr)
        parts = p.stdout.decode().split("=== ")[1:]
        got = dict(part.split("\n", 1) for part in parts)
        for path in files:
            with open(path) as f:
                self.assertEqual(got[path], f.read(), path)
        for address, name in names:
            self.assertIn(address, got[name].split(), name)

    def test_network_none_binds_no_resolver(self):
        """Without a network, there is nothing to resolve with: the
        resolver configuration stays out (the hosts file is part of the
        minimal runtime either way)."""
        p = self.sh("test -e /etc/resolv.conf && echo resolv=present; "
                    "getent hosts localhost >/dev/null && echo hosts=ok",
                    network="none")
        self.assertNotIn(b"resolv=present", p.stdout)
        self.assertIn(b"hosts=ok", p.stdout)

    # ----------------------------------------------------------------- TLS

    def test_tls_with_a_private_ca(self):
        """SSL_CERT_FILE reaches the payload with its file: a loopback TLS
        server signed by the test CA verifies; without it, it does not."""
        p = self.sh(self.fetch_script(), env=self.env(SSL_CERT_FILE=self.ca))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"hello-over-tls\n")
        p = self.sh(self.fetch_script())
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"CERTIFICATE_VERIFY_FAILED", p.stderr)

    def test_tls_with_a_private_ca_directory(self):
        p = self.sh(self.fetch_script(),
                    env=self.env(SSL_CERT_DIR=self.ca_dir))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"hello-over-tls\n")

    def test_node_extra_ca_certs(self):
        node = shutil.which("node", path="/usr/bin:/bin")
        self.assertIsNotNone(node, "nodejs is required (ci/deps.sh)")
        script = ("exec node -e 'require(\"https\").get(\"https://localhost:"
                  "%d/\", r => r.on(\"data\", d => process.stdout.write(d)))"
                  ".on(\"error\", e => { console.error(e.code); "
                  "process.exit(3) })'" % self.port)
        p = self.sh(script, env=self.env(NODE_EXTRA_CA_CERTS=self.ca))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"hello-over-tls\n")
        p = self.sh(script)
        self.assertEqual(p.returncode, 3, p.stderr)

    def test_ca_variables_pass_only_with_the_network(self):
        env = self.env(SSL_CERT_FILE=self.ca, SSL_CERT_DIR=self.ca_dir,
                       NODE_EXTRA_CA_CERTS=self.ca, REQUESTS_CA_BUNDLE=self.ca)
        p = self.warden(*self.run_args("--network", "inherit", "--io", "stdio",
                                       "--", ARGS.fixture, "env"),
                        env=env, check=0)
        got = dict(l.split("=", 1) for l in p.stdout.decode().splitlines())
        for name in CA_VARS:
            self.assertEqual(got.get(name), env[name], name)
        # With the network none there is nothing to trust: not passed.
        p = self.warden(*self.run_args("--io", "stdio", "--", ARGS.fixture,
                                       "env"), env=env, check=0)
        for name in CA_VARS:
            self.assertNotIn(name.encode() + b"=", p.stdout)
        # An explicit --env wins, and its value is the caller's business.
        p = self.warden(*self.run_args("--network", "inherit", "--io", "stdio",
                                       "--env", "SSL_CERT_FILE=/x.pem", "--",
                                       ARGS.fixture, "env"), env=env, check=0)
        self.assertIn(b"SSL_CERT_FILE=/x.pem\n", p.stdout)

    def test_ca_files_obey_the_authority_rule(self):
        """A CA file defines whom TLS trusts: never from where a sandbox
        writes, never through a symbolic link, never one others could
        change. Refused before anything runs."""
        marker = os.path.join(self.ws, "ran")
        planted = os.path.join(self.ws, "ca.pem")
        shutil.copy(self.ca, planted)
        link = os.path.join(self.tmp, "ca-link.pem")
        if not os.path.lexists(link):
            os.symlink(self.ca, link)
        shared = os.path.join(self.tmp, "ca-shared.pem")
        shutil.copy(self.ca, shared)
        os.chmod(shared, 0o666)
        writable = os.path.join(self.tmp, "ca-writable")
        os.makedirs(writable, exist_ok=True)
        shutil.copy(self.ca, os.path.join(writable, "ca.pem"))
        cases = [
            ("SSL_CERT_FILE", planted, [], "ACCESS_DENIED", "workspace"),
            ("NODE_EXTRA_CA_CERTS", link, [], "ACCESS_DENIED",
             "symbolic link"),
            ("REQUESTS_CA_BUNDLE", shared, [], "ACCESS_DENIED", "0666"),
            ("SSL_CERT_FILE", os.path.join(writable, "ca.pem"),
             ["--allow-write", writable], "ACCESS_DENIED", "writable"),
            ("SSL_CERT_DIR", os.path.join(self.tmp, "absent"), [],
             "NOT_FOUND", "SSL_CERT_DIR"),
        ]
        for name, value, extra, code, words in cases:
            p = self.warden("run", "--rw", "--network", "inherit", *extra,
                            "--", "/bin/sh", "-c", "touch ran",
                            env=self.env(**{name: value}))
            err = self.failure(p, code)
            self.assertIn(name, err["message"])
            self.assertIn(words, err["message"])
            self.assertFalse(os.path.exists(marker), name)
        # The same variables are not even looked at without a network.
        p = self.warden("run", "--rw", "--", "/bin/sh", "-c", "touch ran",
                        env=self.env(SSL_CERT_FILE=planted), check=0)
        self.assertTrue(os.path.exists(marker))

    def test_ca_files_never_from_where_an_earlier_run_wrote(self):
        """A CA file in a directory an earlier run made writable could be
        the payload's (owned by the caller, as a user-run sandbox's files
        are): refused, like a plan or a profile from there."""
        earlier = os.path.join(self.tmp, "earlier-writable")
        os.makedirs(earlier, exist_ok=True)
        p = self.warden("run", "--ro", "--allow-write", earlier, "--io",
                        "stdio", "--", "/bin/sh", "-c", "echo wrote",
                        env=self.env())
        self.assertEqual(p.returncode, 0, p.stderr)
        planted = os.path.join(earlier, "ca.pem")
        shutil.copy(self.ca, planted)
        os.chmod(planted, 0o644)
        for name in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"):
            p = self.sh("echo ran", env=self.env(**{name: planted}))
            err = self.failure(p, "ACCESS_DENIED")
            self.assertIn(name, err["message"])
            self.assertIn("earlier sandbox", err["message"])
        p = self.sh("echo ran", env=self.env(SSL_CERT_DIR=earlier))
        self.failure(p, "ACCESS_DENIED")

    def test_plan_shows_the_resolver_files(self):
        """What the inherited network adds is in the plan (so a reviewed
        plan file carries it)."""
        p = self.warden("plan", "--ro", "--network", "inherit", "--format",
                        "json", env=self.env(SSL_CERT_FILE=self.ca), check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        dests = {m["destination"] for m in plan["mounts"]}
        if os.path.exists("/etc/resolv.conf"):
            self.assertIn("/etc/resolv.conf", dests)
        self.assertIn("/etc/hosts", dests)
        self.assertIn("/etc/nsswitch.conf", dests)
        self.assertIn({"path": self.ca, "access": "read",
                       "scope": "literal-file"}, plan["rules"])
        p = self.warden("plan", "--ro", "--format", "json",
                        env=self.env(SSL_CERT_FILE=self.ca), check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        self.assertNotIn("/etc/resolv.conf",
                         {m["destination"] for m in plan["mounts"]})
        self.assertNotIn(self.ca, {r["path"] for r in plan["rules"]})


if __name__ == "__main__":
    main()
