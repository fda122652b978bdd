"""The live path at cluster speed (issue 17): the field mask, and a stream read without
grpcio's helper thread that can still be cancelled from another thread."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest

from conftest import EXAMPLE, cpg, policies
from cpg_io.hubble import FLOW_FIELDS, TLSSettings, flows_request, open_channel, stream_flows
from fake_relay import fake_relay
from test_generate import example_responses


@pytest.mark.parametrize("refuse", [False, True], ids=["mask-honoured", "mask-refused"])
def test_the_field_mask_asks_for_what_cpg_reads(tmp_path: Path, refuse: bool) -> None:
    replayed = tmp_path / "replayed"
    assert cpg("replay", str(EXAMPLE), "-d", str(replayed), "--no-evidence").returncode == 0
    with fake_relay(example_responses()) as (relay, address):
        relay.refuse_mask = refuse
        live = tmp_path / "live"
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(live),
            "--no-evidence",
            "--duration",
            "1.5s",
        )
        assert ran.returncode == 0, ran.stderr
        first = relay.requests[0]
        assert list(first.field_mask.paths) == list(FLOW_FIELDS)
        if refuse:  # asked again, for whole flows
            assert len(relay.requests) >= 2 and not relay.requests[1].HasField("field_mask")
    # the masked flows make exactly the policies the whole ones do
    assert policies(live) == policies(replayed)


def test_the_single_threaded_stream_is_cancelled_cleanly_from_another_thread() -> None:
    with fake_relay(example_responses()) as (relay, address):
        channel = open_channel(address, TLSSettings())
        call = stream_flows(channel, flows_request([], None))
        received: list[object] = []
        ended: list[BaseException] = []
        all_in = threading.Event()

        def read() -> None:
            try:
                for response in call:
                    received.append(response)
                    if len(received) == len(relay.responses):
                        all_in.set()
            except grpc.RpcError as exc:
                ended.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        assert all_in.wait(10), "every flow arrived; the stream stays open (follow)"
        call.cancel()
        reader.join(timeout=5)
        channel.close()
    assert not reader.is_alive(), "the reading thread ended"
    assert ended and ended[0].code() == grpc.StatusCode.CANCELLED
    assert len(received) == len(relay.responses)
