"""Two campaigns on one Redis example database (a real redis-server on a free localhost port)."""

import shutil
import socket
import subprocess
import time

import pytest

from jfa_verify.core.errors import InvalidInput
from jfa_verify.fuzz import run_campaign
from jfa_verify.fuzz.database import open_database, parse_redis_url
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.strategies import cases


def test_redis_urls_are_checked():
    assert parse_redis_url("redis://localhost:6390/2") == ("localhost", 6390, 2)
    for bad in ("redis://localhost", "redis://:6379", "redis://h:99999", "redis://h:1/x"):
        with pytest.raises(InvalidInput, match="redis://HOST:PORT|database number"):
            parse_redis_url(bad)
    with pytest.raises(InvalidInput, match="only folders and redis"):
        open_database("s3://bucket")


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (.ci/run installs it: apt-get install redis-server)")
    pytest.importorskip("redis", reason="the redis package is missing: pip install 'jfa-verify[redis]'")
    with socket.socket() as s:  # a free port on the loopback interface
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
                time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_two_campaigns_share_a_redis_database(redis_url, tmp_path, misbehaving_plugin):
    plugin = misbehaving_plugin("wrong_in_redis", wrong="max(lengths, default=0) >= 9")
    load_plugin(plugin)
    kernel = get_kernel("wrong_in_redis")
    strategy = cases(kernel, max_batch=3, max_len=24, dtypes=["float32"])
    first = run_campaign(kernel, strategy=strategy, max_examples=150, corpus_dir=tmp_path / "a", database=redis_url,
                         device="cpu", seed=3, backward=False)
    assert first.failed, first.format(coverage=False)
    second = run_campaign(kernel, strategy=strategy, max_examples=1, corpus_dir=tmp_path / "b", database=redis_url,
                          device="cpu", seed=99, backward=False)
    assert second.failed and second.failures[0].status == "error"  # one drawn case: the failure came from Redis
    assert {f.signature["id"] for f in second.failures} <= {f.signature["id"] for f in first.failures}


def test_no_server_at_a_redis_url_is_a_clear_error():
    pytest.importorskip("redis", reason="the redis package is missing: pip install 'jfa-verify[redis]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(InvalidInput, match="no Redis server answers"):
        open_database(f"redis://127.0.0.1:{port}")
