"""conftest.py - the servers of the suite: those of the caller when
FERRY_TEST_REDIS_PORT is set (tests/integration/test_python_client.c starts
a real redis-server, PostgreSQL and ferryd, and sets FERRY_TEST_PG_PORT,
FERRY_TEST_CONFIG and FERRY_TEST_FERRYCTL too), else the suite's own
(servers.py: Redis, PostgreSQL, a ferryd with the queues of ferryd.ini
here and harness_client.c's [queue pg]), started once for the session and
stopped at its end, whatever happened. A server that does not start fails
every test with the reason (never skips)."""

import os

import pytest
import redis

import servers

HERE = os.path.dirname(os.path.abspath(__file__))


def _read(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


@pytest.fixture(scope="session", autouse=True)
def ferry_servers():
    """The servers' variables in os.environ for the whole session."""
    if os.environ.get("FERRY_TEST_REDIS_PORT"):
        yield None
        return
    # as test_python_client.c and harness_client.c's h_client_start
    own = servers.start("[queue pg]\nhandler = postgres\ntable = events\n"
                        "columns = n\nworkers = 2\n" + _read("ferryd.ini"),
                        "CREATE TABLE events (n bigint);\n" +
                        _read("schema.sql"))
    saved = dict(os.environ)
    os.environ.update(own.env)
    try:
        yield own
    finally:
        os.environ.clear()
        os.environ.update(saved)
        own.stop()


@pytest.fixture
def r(ferry_servers):
    port = os.environ.get("FERRY_TEST_REDIS_PORT")
    assert port, "FERRY_TEST_REDIS_PORT is not set"
    client = redis.Redis(host="127.0.0.1", port=int(port))
    client.ping()
    return client
