"""``cpg generate`` against a fake Hubble Relay, as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import CPG, EXAMPLE, assert_crd_valid, cpg, policies, run_until_sigterm, wait_for
from fake_relay import example_responses, fake_relay


def test_generate_writes_what_replay_writes(tmp_path: Path) -> None:
    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "replayed")).returncode == 0
    with fake_relay(example_responses()) as (relay, address):
        result = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "live"),
            "--duration",
            "2s",
            "--flush-interval",
            "0.3s",
            "--output",
            "json",
        )
    assert result.returncode == 0, result.stderr
    assert policies(tmp_path / "live") == policies(tmp_path / "replayed")
    verified = cpg("verify", str(EXAMPLE), "--policies", str(tmp_path / "live"))
    assert verified.returncode == 0 and "29/29 candidate flows admitted" in verified.stdout
    report = json.loads(result.stdout)
    assert report["flows"]["candidate"] == 34
    assert report["lost_events"] == 3
    assert relay.requests[0].follow
    assert [list(f.verdict) for f in relay.requests[0].whitelist] == [[2]]
    for text in policies(tmp_path / "live").values():
        assert_crd_valid(text)


def test_a_forced_reconnect_changes_nothing(tmp_path: Path) -> None:
    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "replayed")).returncode == 0
    with fake_relay(example_responses(), break_after=25) as (relay, address):
        result = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "live"),
            "--duration",
            "3s",
            "--flush-interval",
            "0.3s",
            "--output",
            "json",
            "-n",
            "shop,payments,monitoring,kube-system",
        )
    assert result.returncode == 0, result.stderr
    assert len(relay.requests) == 2, "one reconnect"
    assert relay.requests[1].HasField("since"), "resumed from the last flow's time"
    assert "reconnecting" in result.stderr
    report = json.loads(result.stdout)
    assert report["reconnects"] == 1
    assert report["flows"]["candidate"] == 34, "re-sent flows with a uuid are not counted twice"
    replayed = policies(tmp_path / "replayed")
    assert policies(tmp_path / "live") == replayed
    filters = relay.requests[0].whitelist
    assert [list(f.source_pod) for f in filters] == [
        ["shop/", "payments/", "monitoring/", "kube-system/"],
        [],
    ]


def test_sigterm_leaves_complete_files_and_a_report(tmp_path: Path) -> None:
    out = tmp_path / "live"
    with fake_relay(example_responses()) as (relay, address):
        command = [CPG, "generate", "--server", address, "-d", str(out)]
        ran = run_until_sigterm(
            [*command, "--flush-interval", "0.2s"],
            lambda: relay.done.is_set() and len(policies(out) if out.exists() else {}) >= 6,
        )
        assert relay.done.is_set(), "the relay sent everything"
    stdout = ran.stdout
    assert ran.returncode == 0, ran.stderr
    assert "Policies in" in stdout and "Received" in stdout
    assert not list(out.rglob("*tmp")) and not list(out.rglob(".*"))
    for text in policies(out).values():
        assert_crd_valid(text)
    assert len(policies(out)) == 6


def test_generate_errors(tmp_path: Path) -> None:
    nobody = cpg(
        "generate", "--server", "127.0.0.1:9", "--timeout", "1s", "-d", str(tmp_path / "p")
    )
    assert nobody.returncode == 1 and "connection refused by 127.0.0.1:9" in nobody.stderr
    assert cpg("generate", "--server", "x:1", "--flush-interval", "0s").returncode == 2
    assert cpg("generate", "--server", "x:1", "--duration", "soon").returncode == 2
    missing = cpg("generate", "--kubeconfig", str(tmp_path / "none"))
    assert missing.returncode == 1 and "--server not given" in missing.stderr
    assert sys.executable


def test_cluster_dedup_skips_policies_the_cluster_already_has(tmp_path: Path) -> None:
    import yaml

    from fake_kube import fake_kube

    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "replayed")).returncode == 0
    applied = yaml.safe_load((tmp_path / "replayed" / "shop" / "cart.yaml").read_text())
    applied["metadata"]["resourceVersion"] = "42"  # what the API server adds does not matter
    with fake_kube(tmp_path) as (kube, kubeconfig), fake_relay(example_responses()) as (_, address):
        kube.policies = [applied]
        result = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "live"),
            "--duration",
            "2s",
            "--flush-interval",
            "0.3s",
            "--cluster-dedup",
            "--kubeconfig",
            str(kubeconfig),
        )
        assert result.returncode == 0, result.stderr
        assert any(
            "managed-by%3Dcpg" in path or "managed-by=cpg" in path for _, path in kube.requests
        )
    written = policies(tmp_path / "live")
    assert "shop/cart.yaml" not in written
    assert len(written) == 5
    assert "1 already in the cluster" in result.stdout


def test_auto_port_forward_through_the_kubernetes_api(tmp_path: Path) -> None:
    from fake_kube_pf import fake_cluster

    assert cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "replayed")).returncode == 0
    with fake_relay(example_responses()) as (_, address):
        relay_port = int(address.rsplit(":", 1)[1])
        with fake_cluster(tmp_path, relay_port) as (cluster, kubeconfig):
            result = cpg(
                "generate",
                "--kubeconfig",
                str(kubeconfig),
                "-d",
                str(tmp_path / "live"),
                "--duration",
                "2s",
                "--flush-interval",
                "0.3s",
                "--log-level",
                "info",
            )
            assert result.returncode == 0, result.stderr
            assert "port-forward to kube-system/hubble-relay-7d9f established" in result.stderr
            assert cluster.forwards and all("ports=4245" in f for f in cluster.forwards)
            assert policies(tmp_path / "live") == policies(tmp_path / "replayed")
            cluster.pods[0]["status"]["phase"] = "Pending"
            pending = cpg("generate", "--kubeconfig", str(kubeconfig), "--duration", "1s")
            assert pending.returncode == 1 and "none running" in pending.stderr
            cluster.pods.clear()
            none = cpg("generate", "--kubeconfig", str(kubeconfig), "--duration", "1s")
            assert none.returncode == 1 and "no hubble-relay pod in kube-system" in none.stderr
            cluster.pods.append(
                {
                    "metadata": {"name": "hubble-relay-x", "labels": {"k8s-app": "hubble-relay"}},
                    "status": {"phase": "Running"},
                }
            )
            cluster.forbid_portforward = True
            forbidden = cpg("generate", "--kubeconfig", str(kubeconfig), "--duration", "1s")
            assert forbidden.returncode == 1 and "hubble-relay-x" in forbidden.stderr
    nokube = cpg("generate", "--kubeconfig", str(tmp_path / "missing"), "--duration", "1s")
    assert nokube.returncode == 1 and "--server not given" in nokube.stderr


def test_an_auth_plugin_that_waits_for_a_terminal_is_bounded_by_timeout(tmp_path: Path) -> None:
    import yaml

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": "sleep",
                                "args": ["20"],
                                "interactiveMode": "IfAvailable",
                            }
                        },
                    }
                ],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    started = time.monotonic()
    result = cpg("generate", "--kubeconfig", str(kubeconfig), "--timeout", "1s", "--duration", "1s")
    assert result.returncode == 1
    assert "did not answer within 1s" in result.stderr and "needs a terminal" in result.stderr
    assert time.monotonic() - started < 15


def _issue_client_certificate(ca: tuple[Path, Path], name: str, folder: Path) -> tuple[Path, Path]:
    """A client certificate the CA signs, written as a Secret's volume shows it: tls.crt and
    tls.key in ``folder``, replaced at once (the kubelet swaps the whole folder)."""
    ca_key, ca_cert = ca
    work = folder.parent / f"{folder.name}-{name}"
    work.mkdir()
    key, request, cert = work / "tls.key", work / "request.csr", work / "tls.crt"
    subprocess.run(
        ["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
         "-keyout", str(key), "-out", str(request)],
        check=True, capture_output=True,
    )  # fmt: skip
    usage = work / "usage.cnf"
    usage.write_text("extendedKeyUsage=clientAuth\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(request), "-CA", str(ca_cert), "-CAkey",
         str(ca_key), "-CAcreateserial", "-days", "1", "-extfile", str(usage), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    for made in (key, cert):
        os.replace(made, folder / made.name)
    return folder / "tls.crt", folder / "tls.key"


def test_a_renewed_client_certificate_is_used_from_the_next_connection(
    tmp_path: Path, relay_cert: tuple[Path, Path]
) -> None:
    """Mutual TLS with the relay (the live-tls overlay, the certificate from cert-manager):
    the certificate files are read at each connection, so a certificate renewed on disk is
    the one the next reconnect presents, with no restart; none at all is refused."""
    from conftest import self_signed
    from fake_relay import fake_tls_relay

    key, cert = relay_cert
    ca = self_signed(tmp_path, "cilium-ca", "DNS:cilium-ca")
    mounted = tmp_path / "hubble-tls"
    mounted.mkdir()
    client_cert, client_key = _issue_client_certificate(ca, "cpg-first", mounted)
    relay_tls = ["--tls-ca-cert", str(cert), "--tls-server-name", "hubble-relay.test"]
    out = tmp_path / "p"
    with fake_tls_relay(
        example_responses(), cert.read_bytes(), key.read_bytes(),
        client_ca=ca[1].read_bytes(), break_after=3,
    ) as (relay, address):  # fmt: skip
        relay.pause_after = 3  # the first stream waits, then breaks: the relay restarting
        refused = cpg("generate", "--server", address, *relay_tls, "--duration", "1s")
        assert refused.returncode == 1 and relay.clients == []
        assert "refused the connection without a client certificate" in refused.stderr
        assert "--tls-client-cert and --tls-client-key" in refused.stderr
        stranger = tmp_path / "stranger"
        stranger.mkdir()
        foreign = _issue_client_certificate(
            self_signed(tmp_path, "other-ca", "DNS:other-ca"), "cpg", stranger
        )
        unknown = cpg(
            "generate", "--server", address, *relay_tls, "--tls-client-cert", str(foreign[0]),
            "--tls-client-key", str(foreign[1]), "--duration", "1s",
        )  # fmt: skip
        assert unknown.returncode == 1 and "refused the client certificate" in unknown.stderr

        def renew_while_the_first_stream_is_open() -> None:
            wait_for(lambda: relay.clients == ["cpg-first"])
            _issue_client_certificate(ca, "cpg-renewed", mounted)
            relay.resume.set()

        renewing = threading.Thread(target=renew_while_the_first_stream_is_open)
        renewing.start()
        ran = run_until_sigterm(
            [CPG, "generate", "--server", address, *relay_tls, "--tls-client-cert",
             str(client_cert), "--tls-client-key", str(client_key), "-d", str(out),
             "--flush-interval", "0.2s"],
            lambda: relay.done.is_set() and len(policies(out) if out.exists() else {}) >= 6,
        )  # fmt: skip
        renewing.join(30)
    assert ran.returncode == 0, ran.stderr
    assert relay.clients == ["cpg-first", "cpg-renewed"]
    assert len(policies(out)) == 6


def test_tls_with_a_ca_and_a_server_name(tmp_path: Path, relay_cert: tuple[Path, Path]) -> None:

    from fake_relay import fake_tls_relay

    key, cert = relay_cert
    with fake_tls_relay(example_responses(), cert.read_bytes(), key.read_bytes()) as (_, address):
        ok = cpg(
            "generate",
            "--server",
            address,
            "--tls",
            "--tls-ca-cert",
            str(cert),
            "--tls-server-name",
            "hubble-relay.test",
            "-d",
            str(tmp_path / "p"),
            "--duration",
            "1s",
            "--flush-interval",
            "0.3s",
        )
        assert ok.returncode == 0, ok.stderr
        assert len(policies(tmp_path / "p")) == 6
        wrong_name = cpg(
            "generate",
            "--server",
            address,
            "--tls",
            "--tls-ca-cert",
            str(cert),
            "--tls-server-name",
            "other.test",
            "--timeout",
            "1s",
            "--duration",
            "5s",
            "-d",
            str(tmp_path / "q"),
        )
        assert wrong_name.returncode == 1 and "TLS handshake with" in wrong_name.stderr
        # Refused, unresolvable and TLS-mismatched connections: told apart, each at once,
        # not after the connection timeout (30 s here; half of it leaves room for a busy
        # machine's start-up, which a tighter bound would measure instead).
        for args, said in (
            (["--server", "127.0.0.1:9"], "connection refused by 127.0.0.1:9"),
            (["--server", "no-such-host.invalid:4245"], "cannot resolve 'no-such-host.invalid'"),
            (  # the certificate names hubble-relay.test, not 127.0.0.1
                ["--server", address, "--tls", "--tls-ca-cert", str(cert)],
                f"TLS handshake with {address} failed",
            ),
        ):
            began = time.monotonic()
            failed = cpg("generate", *args, "--timeout", "30s", "-d", str(tmp_path / "r"))
            assert failed.returncode == 1 and said in failed.stderr, failed.stderr
            assert time.monotonic() - began < 15, args
    missing = cpg(
        "generate", "--server", "127.0.0.1:9", "--tls-ca-cert", str(tmp_path / "nope.pem")
    )
    assert missing.returncode == 1 and "cannot read the CA certificate" in missing.stderr


def test_a_status_line_on_a_terminal_and_none_when_piped(tmp_path: Path) -> None:
    import pty

    with fake_relay(example_responses()) as (_, address):
        primary, secondary = pty.openpty()
        proc = subprocess.Popen(
            [CPG, "generate", "--server", address, "-d", str(tmp_path / "p"), "--duration", "2.5s"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=30)
        os.close(primary)
        piped = cpg(
            "generate", "--server", address, "-d", str(tmp_path / "q"), "--duration", "1.5s"
        )
    terminal = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "flows (" in terminal and "candidates" in terminal and "infra drops" in terminal
    assert "flows (" not in piped.stderr


def test_a_grpc_server_that_is_not_hubble_relay_fails_at_once(tmp_path: Path) -> None:
    """No observer.Observer/GetFlows there (UNIMPLEMENTED): retrying cannot help."""
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        started = time.monotonic()
        ran = cpg("generate", "--server", f"127.0.0.1:{port}", "-d", str(tmp_path / "p"))
        took = time.monotonic() - started
    finally:
        server.stop(None)
    assert ran.returncode == 1, ran.stderr
    assert took < 15, took  # no retry with growing pauses (measured: about 1.2 s)
    assert "answers gRPC but is not Hubble Relay" in ran.stderr
    assert "--server" in ran.stderr and "reconnect" not in ran.stderr.lower()


def test_a_relay_sending_corrupt_protobuf_gets_one_readable_line_per_problem(
    tmp_path: Path,
) -> None:
    from concurrent import futures

    import grpc

    def garbage(request: bytes, context: object) -> Iterator[bytes]:
        yield b"\xff\xff\xff\xff not a GetFlowsResponse"

    handler = grpc.method_handlers_generic_handler(
        "observer.Observer", {"GetFlows": grpc.unary_stream_rpc_method_handler(garbage)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        ran = cpg(
            "generate",
            "--server",
            f"127.0.0.1:{port}",
            "-d",
            str(tmp_path / "p"),
            "--duration",
            "3s",
        )
    finally:
        server.stop(None)
    assert "Traceback" not in ran.stderr, ran.stderr
    problems = [line for line in ran.stderr.splitlines() if line.strip()]
    assert problems and all(line.startswith("cpg: ") for line in problems), ran.stderr
    # the message is skipped as a malformed flow, and the capture goes on
    assert any("does not decode" in line for line in problems), ran.stderr


def test_generate_learns_what_replay_learns(tmp_path: Path) -> None:
    from captures import learn_capture
    from fake_relay import responses_from_lines

    capture = learn_capture(tmp_path / "works.jsonl")
    learn = ("--learn", "forwarded", "--no-evidence")
    assert cpg("replay", str(capture), "-d", str(tmp_path / "replayed"), *learn).returncode == 0
    responses = responses_from_lines(capture.read_text().splitlines())
    with fake_relay(responses) as (relay, address):
        result = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(tmp_path / "live"),
            "--duration",
            "2s",
            "--flush-interval",
            "0.3s",
            *learn,
        )
    assert result.returncode == 0, result.stderr
    assert policies(tmp_path / "live") == policies(tmp_path / "replayed")
    assert sorted(policies(tmp_path / "live")) == ["shop/cart.yaml", "shop/frontend.yaml"]
    # FORWARDED, DROPPED, AUDIT (traffic an audit-mode policy let through), REDIRECTED
    assert [sorted(f.verdict) for f in relay.requests[0].whitelist] == [[1, 2, 4, 5]]


def test_a_live_runs_next_steps_run(tmp_path: Path) -> None:
    """After a live run there is no capture file to verify against: the check it prints is
    a shadow session on the same relay, which runs as printed (here cut to a second)."""
    import shlex

    out = tmp_path / "live"
    with fake_relay(example_responses()) as (_relay, address):
        ran = cpg("generate", "--server", address, "-d", str(out), "--duration", "2s")
        assert ran.returncode == 0, ran.stderr
        (check,) = [line for line in ran.stdout.splitlines() if line.strip().startswith("check:")]
        assert "Hubble Relay" not in check
        printed = shlex.split(check.split("check:", 1)[1].split("   (", 1)[0])
        assert printed[:4] == ["cpg", "shadow", "--server", address], printed
        printed[printed.index("--duration") + 1] = "1s"  # as printed, a shorter watch
        shadow = cpg(*printed[1:])
    assert shadow.returncode in (0, 3, 4), shadow.stderr
    assert "Error" not in shadow.stderr and "Usage" not in shadow.stderr
